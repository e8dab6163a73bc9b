#include "cli/run/run_command.h"

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstdio>
#include <thread>

#include "cli/run/chaos_monkey.h"
#include "cli/run/job_runner.h"
#include "cli/run/local_capacity.h"
#include "cli/run/run_dir.h"
#include "cli/run/service_binaries.h"
#include "cli/run/template_command.h"
#include "services/api/training_job.h"
#include "services/base/file_contents.h"
#include "services/base/flag_values.h"
#include "services/base/termination_signal.h"
#include "services/learn/dataset.h"

namespace gaptrain {
namespace {

constexpr char kUsage[] =
    "usage: gaptrain run -f JOB.yaml [--run-dir DIR] [--resume] [--threads-per-worker N]\n"
    "                    [--data-cache DIR|none] [--chaos every=20s,restart=5s,master=60s]\n"
    "                    [--template-trainers K]\n"
    "Runs the job's coordinator, master, evaluator and spec.workers.replicas trainers\n"
    "as processes on this machine (loopback), shows progress, and ends with a summary.\n"
    "  -f JOB.yaml             the TrainingJob manifest (docs/trainingjob.md)\n"
    "  --run-dir DIR           logs, state, checkpoints and summary [runs/<metadata.name>];\n"
    "                          an earlier run there is moved aside, unless --resume\n"
    "  --resume                continue the run in --run-dir (after Ctrl-C or a crash)\n"
    "  --threads-per-worker N  compute threads of each worker [cores / (replicas + 1), >= 1;\n"
    "                          maxReplicas in place of replicas when autoscaled]\n"
    "  --data-cache DIR|none   inflated copies of the gzip'd data files, made by the first\n"
    "                          worker and read by the others and by later runs\n"
    "                          [$XDG_CACHE_HOME/gaptrain/data, else ~/.cache/gaptrain/data]\n"
    "  --chaos SPEC            faults, timed from the first trainer's registration: kill\n"
    "                          a random trainer every=S seconds or every=P% of the job\n"
    "                          (SIGTERM and SIGKILL in turn), restart it restart=S\n"
    "                          later, SIGKILL the master at master=S or master=P%\n"
    "                          (repeat the key for more); seed=N picks the trainers.\n"
    "                          summary.json lists each fault with its time\n"
    "  --template-trainers K   when spec.workers.template's first container sets a\n"
    "                          command, only trainers 0..K-1 run it (the others run\n"
    "                          gaptrain-worker) [all]\n";

int Fail(const std::string& message, int code) {
  std::fprintf(stderr, "gaptrain run: %s\n", message.c_str());
  return code;
}

// What the workers will read, and whether this machine holds them, checked
// before anything starts.
Status CheckInputs(const TrainingJob& job) {
  // Custom and sharded data are the trainers' own to read: the size is the
  // job's, and the bytes the trainers hold are not known here.
  uint64_t train_samples = job.data.train_samples, dataset_bytes = 0;
  DatasetFormat format;
  if (!job.data.ReadByTrainers()) {
    GAPTRAIN_RETURN_IF_ERROR(ParseDatasetFormat(job.data.format, &format));
  }
  // The headers only: each worker reads and checks every byte when it loads
  // its split.
  for (Split split : {Split::kTrain, Split::kTest}) {
    if (job.data.ReadByTrainers()) break;
    DatasetShape shape;
    Status s = DescribeDataset(format, job.data.path, split, &shape);
    if (!s.ok()) return Status(s.code(), "spec.data.path: " + s.message());
    if (split == Split::kTrain) train_samples = shape.samples;
    dataset_bytes += shape.samples * (shape.channels * shape.height * shape.width + 1);
  }
  GAPTRAIN_RETURN_IF_ERROR(CheckJobAgainstData(job, train_samples));
  // An autoscaled job may grow to maxReplicas trainers.
  if (job.workers.autoscale.enabled) {
    GAPTRAIN_RETURN_IF_ERROR(CheckLocalCapacity(job.workers.Ceiling(), dataset_bytes, ThisMachine(),
                                                "spec.workers.maxReplicas"));
  } else {
    GAPTRAIN_RETURN_IF_ERROR(
        CheckLocalCapacity(job.workers.replicas, dataset_bytes, ThisMachine()));
  }
  if (!job.model.torchscript.empty() && access(job.model.torchscript.c_str(), R_OK) != 0) {
    return Status::NotFound("spec.model.torchscript: cannot read " + job.model.torchscript);
  }
  if (job.run_policy.suspend) {
    return Status::FailedPrecondition("spec.runPolicy.suspend: the job is suspended; set it to "
                                      "false to run it");
  }
  return Status::OK();
}

}  // namespace

int RunCommand(const std::vector<std::string>& args) {
  if (std::find(args.begin(), args.end(), "--help") != args.end() ||
      std::find(args.begin(), args.end(), "-h") != args.end()) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  std::string job_path, run_dir, chaos, data_cache;
  bool resume = false;
  uint32_t threads = 0;
  uint32_t template_trainers = UINT32_MAX;
  FlagSet flags;
  flags.String("-f", &job_path);
  flags.String("--run-dir", &run_dir);
  flags.Switch("--resume", &resume);
  flags.Unsigned("--threads-per-worker", 1, 256, &threads);
  flags.String("--chaos", &chaos);
  flags.String("--data-cache", &data_cache);
  flags.Unsigned("--template-trainers", 0, UINT32_MAX, &template_trainers);
  Status s = flags.Parse(args);
  if (!s.ok()) return Fail(s.message() + "\n" + kUsage, 2);
  if (job_path.empty()) return Fail(std::string("-f: the job file is required\n") + kUsage, 2);
  JobRunner::Options runner_options;
  if (!chaos.empty()) {
    s = ParseChaosOptions(chaos, &runner_options.chaos);
    if (!s.ok()) return Fail(s.message(), 2);
  }

  std::string yaml;
  TrainingJob job;
  s = ReadFile(job_path, &yaml);
  if (!s.ok()) s = Status(s.code(), "-f: " + s.message());
  if (s.ok()) s = ParseTrainingJob(yaml, job_path, &job);
  if (s.ok()) s = CheckInputs(job);
  LocalJob::Options local;
  if (s.ok()) {
    const char* path_env = std::getenv("PATH");
    s = TemplateTrainerCommand(job, JobFileDir(job_path), path_env != nullptr ? path_env : "",
                               &local.trainer_command);
    if (s.ok()) {
      s = TemplateEvaluatorCommand(job, JobFileDir(job_path),
                                   path_env != nullptr ? path_env : "", &local.evaluator_command);
    }
  }
  if (s.ok() && job.model.from_trainer) {
    // The trainers declare the model: every one, and the evaluator, must
    // run the user's code.
    if (local.trainer_command.argv.empty()) {
      s = Status::InvalidArgument(
          "spec.model.fromTrainer: spec.workers.template sets no command (the trainers declare "
          "the model: they run the Python SDK)");
    } else if (template_trainers < job.workers.replicas) {
      s = Status::InvalidArgument("--template-trainers: spec.model.fromTrainer needs every "
                                  "trainer to run the template's command");
    } else if (local.evaluator_command.argv.empty()) {
      s = Status::InvalidArgument(
          "spec.model.fromTrainer: spec.evaluator.template sets no command (the evaluator has "
          "no model of its own: run gaptrain.evaluate)");
    }
  }
  const TargetSpec target = JobTarget(job.training);
  if (s.ok() && target.IsSet() && !IsEvaluatorMetric(target.metric) &&
      local.evaluator_command.argv.empty()) {
    s = Status::InvalidArgument(std::string(kRuleTargetMetricNeedsUsersEvaluator) + ", got '" +
                                target.metric + "'");
  }
  if (s.ok() && runner_options.chaos.master_shard >= job.master.shards) {
    s = Status::InvalidArgument("--chaos: shard " +
                                std::to_string(runner_options.chaos.master_shard) +
                                ": the job has spec.master.shards " +
                                std::to_string(job.master.shards));
  }
  if (!s.ok()) return Fail(s.message() + "\nnothing was started", 2);
  local.template_trainers = template_trainers;
  if (template_trainers != UINT32_MAX && local.trainer_command.argv.empty()) {
    return Fail("--template-trainers: spec.workers.template sets no command\nnothing was started",
                2);
  }
  s = FindServiceBinaries(&local.binaries);
  if (!s.ok()) return Fail(s.message(), 1);
  if (run_dir.empty()) run_dir = "runs/" + job.name;
  std::unique_ptr<RunDir> dir;
  std::string moved_to;
  s = RunDir::Open(run_dir, resume, &moved_to, &dir);
  if (!s.ok()) return Fail(s.message(), 1);
  if (!moved_to.empty()) std::printf("the previous run in %s was moved to %s\n", run_dir.c_str(), moved_to.c_str());
  s = dir->Token(&local.token);
  if (s.ok()) s = dir->StoreManifest(yaml, &local.job_file);
  if (s.ok()) s = TerminationSignal::Install();
  if (!s.ok()) return Fail(s.message(), 1);

  local.run_dir = dir->path();
  local.data_cache = DataCacheDir(data_cache, std::getenv("XDG_CACHE_HOME"), std::getenv("HOME"),
                                  dir->path());
  local.trainers = job.workers.replicas;
  local.master_shards = job.master.shards;
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  // An autoscaled job is sized for its most trainers.
  const uint32_t most_trainers =
      job.workers.autoscale.enabled ? job.workers.Ceiling() : job.workers.replicas;
  local.threads_per_worker = threads > 0 ? threads : std::max(1u, cores / (most_trainers + 1));
  runner_options.live_line = isatty(STDOUT_FILENO) != 0;
  if (!local.evaluator_command.argv.empty()) {
    std::string argv;
    for (const std::string& word : local.evaluator_command.argv) argv += " " + word;
    std::printf("the evaluator runs the template's command:%s\n", argv.c_str());
  }
  if (!local.trainer_command.argv.empty() && template_trainers > 0) {
    std::string argv;
    for (const std::string& word : local.trainer_command.argv) argv += " " + word;
    const uint32_t k = std::min(template_trainers, job.workers.replicas);
    std::printf("trainers run the template's command%s:%s\n",
                template_trainers == UINT32_MAX ? ""
                                                : (" (trainer-0 .. trainer-" +
                                                   std::to_string(k == 0 ? 0 : k - 1) + ")")
                                                      .c_str(),
                argv.c_str());
  }

  JobRunner runner(job, dir.get(), local, runner_options, stdout);
  RunSummary summary;
  return runner.Run(&summary);
}

}  // namespace gaptrain
