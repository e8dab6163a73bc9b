// One worker's training throughput beside a plain LibTorch loop, in the
// same run: samples per second of the real Trainer (pull, compute, push
// against a real MasterService and CoordinatorService in this process, over
// loopback gRPC) and of a loop that trains the same model on the same
// batches with no network (Model::ComputeGradient and an in-place momentum
// SGD step on the flat buffer). The overhead target is at most 15% for
// lenet5 on CPU; mlp is printed too (its step is short and its model
// large, so the network's share is bigger).
//
//   bazel build -c opt //cli:gaptrain                # for the README job's row
//   bazel run -c opt //bench:worker_bench            # ../shared/data/mnist
//   bazel run -c opt //bench:worker_bench -- DIR     # another MNIST directory
//
// One compute thread for both; five rounds alternate (plain, worker,
// plain, ...) and the medians are reported, with every round's overhead
// and the network's share of a worker's step (pull and push against
// compute, per batch: a push brings the next batch's parameters, so the
// worker pulls on its own only at a task's start), which a neighbour's
// load disturbs less, and both loops' compute per batch (ComputeGradient
// alone): whether the worker computes slower or only the network costs.
// The load average is printed: on a busy machine the numbers are noisier.
//
// The last row is the README's job as a user runs it: `gaptrain run -f
// examples/mnist-gap-aware.yaml` (4 trainers, an evaluator, the master and
// the coordinator as processes) against 4 plain loops sharing this
// machine's cores, as updates per second (target >= 0.85), and the share of
// the job's CPU time its processes spent in the kernel (target <= 10%;
// page faults are where that share went before the heap policy).

#include <grpcpp/grpcpp.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "services/api/training_job.h"
#include "services/base/available_cpus.h"
#include "services/base/heap_policy.h"
#include "services/base/process.h"
#include "services/coordinator/coordinator_client.h"
#include "services/coordinator/coordinator_config.h"
#include "services/coordinator/coordinator_metrics.h"
#include "services/coordinator/coordinator_service.h"
#include "services/coordinator/coordinator_state.h"
#include "services/engine/job_config.h"
#include "services/learn/batch_loader.h"
#include "services/learn/compute_threads.h"
#include "services/learn/dataset.h"
#include "services/learn/epoch_order.h"
#include "services/learn/model.h"
#include "services/master/master_client.h"
#include "services/master/master_metrics.h"
#include "services/master/master_service.h"
#include "services/net/grpc_keepalive.h"
#include "services/worker/coordinator_session.h"
#include "services/worker/stop_flag.h"
#include "services/worker/trainer.h"
#include "services/worker/worker_channel.h"
#include "services/worker/worker_metrics.h"

namespace gaptrain {
namespace {

using Clock = std::chrono::steady_clock;

constexpr uint32_t kBatch = 64;
constexpr uint64_t kShuffleSeed = 1;

double Since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

std::string LoadAverage() {
  std::ifstream in("/proc/loadavg");
  std::string a, b, c;
  in >> a >> b >> c;
  return a + " " + b + " " + c;
}

TrainingJob Job(const std::string& model) {
  TrainingJob job;
  job.name = "worker-bench";
  job.model.builtin = model;
  job.training.batch_size = kBatch;
  job.training.epochs = 1;
  job.training.optimizer.learning_rate = 0.05;
  job.training.optimizer.momentum = 0.9;
  job.training.optimizer.weight_decay = 1e-4;
  job.training.optimizer.decay.type = "none";
  job.training.staleness.rule = "gap-aware";
  job.workers.replicas = 1;
  return job;
}

struct PlainRun {
  double samples_per_second = 0;
  double compute_ms = 0;  // per batch: ComputeGradient alone, as the worker's "compute"
};

// The plain loop: the same batches, forward and backward, and momentum SGD
// with weight decay on the flat buffer.
PlainRun PlainLoop(const TrainingJob& job, const Dataset& train, uint32_t samples) {
  std::unique_ptr<Model> model;
  Status s = Model::CreateBuiltin(
      job.model.builtin, ModelInput{train.channels, train.height, train.width, train.num_classes},
      kShuffleSeed, &model);
  if (!s.ok()) {
    std::fprintf(stderr, "%s\n", s.ToString().c_str());
    std::exit(1);
  }
  const size_t p = model->layout().size();
  std::vector<float> velocity(p, 0.0f);
  const float lr = 0.05f, momentum = 0.9f, decay = 1e-4f;
  BatchLoader loader(train, kBatch);
  const std::vector<uint32_t> order =
      EpochPermutation(kShuffleSeed, 0, static_cast<uint32_t>(train.size()));
  BatchIterator it(loader, order, SampleRange{0, samples});
  std::vector<float> images(loader.images_buffer_size());
  std::vector<int64_t> labels(loader.labels_buffer_size());
  const auto start = Clock::now();
  uint64_t done = 0, batches = 0;
  Clock::duration computing{};
  while (size_t k = it.Next(images.data(), labels.data())) {
    const auto compute_start = Clock::now();
    model->ComputeGradient(images.data(), labels.data(), static_cast<int64_t>(k));
    computing += Clock::now() - compute_start;
    float* w = model->parameters();
    const float* g = model->gradients();
    for (size_t j = 0; j < p; ++j) {
      velocity[j] = momentum * velocity[j] + g[j] + decay * w[j];
      w[j] -= lr * velocity[j];
    }
    done += k;
    ++batches;
  }
  PlainRun run;
  run.samples_per_second = static_cast<double>(done) / Since(start);
  run.compute_ms = 1000.0 * std::chrono::duration<double>(computing).count() /
                   static_cast<double>(std::max<uint64_t>(batches, 1));
  return run;
}

struct WorkerRun {
  double samples_per_second = 0;
  double pull_ms = 0, compute_ms = 0, push_ms = 0;  // per batch
};

// A master and a coordinator in this process, on loopback.
class InProcessJob {
 public:
  InProcessJob(const TrainingJob& job, const Dataset& train, uint32_t samples) {
    std::unique_ptr<Model> model;
    Model::CreateBuiltin(job.model.builtin,
                         ModelInput{train.channels, train.height, train.width, train.num_classes},
                         kShuffleSeed, &model);
    UpdateEngine::Options engine_options;
    Check(RuleConfigFromJob(job, &engine_options.rule));
    engine_options.schedule = ScheduleFromJob(job, static_cast<double>(train.size()) / kBatch, 1);
    std::unique_ptr<UpdateEngine> engine;
    Check(UpdateEngine::Create(model->layout(), engine_options, &engine));
    std::memcpy(engine->mutable_store()->params(), model->parameters(),
                model->layout().size() * sizeof(float));
    auto master_metrics = std::make_shared<MasterMetrics>(std::make_shared<prometheus::Registry>(),
                                                          engine->store().layout());
    MasterService::Options master_options;
    master_options.job_name = job.name;
    master_ = std::make_unique<MasterService>(std::move(engine), master_options, master_metrics);
    grpc::ServerBuilder master_builder;
    master_builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                                    &master_port_);
    ApplyBulkTransferArguments(&master_builder);
    ApplyKeepaliveArguments(&master_builder);
    master_builder.RegisterService(master_.get());
    master_server_ = master_builder.BuildAndStart();

    CoordinatorConfig config;
    Check(CoordinatorConfigFromJob(job, train.size(), /*task_batches=*/1000000, &config));
    config.epochs = static_cast<double>(samples) / static_cast<double>(train.size());
    config.min_trainers = 1;
    config.lease_seconds = 30;
    std::unique_ptr<CoordinatorState> state;
    const double now = 1e9;
    Check(CoordinatorState::Create(config, now, &state));
    CoordinatorService::Options coordinator_options;
    coordinator_options.master_addresses = {"127.0.0.1:" + std::to_string(master_port_)};
    coordinator_ = std::make_unique<CoordinatorService>(
        std::move(state), coordinator_options,
        std::make_shared<CoordinatorMetrics>(std::make_shared<prometheus::Registry>()),
        [start = Clock::now(), now] { return now + Since(start); });
    // The membership feed, in process: the master's members follow the
    // coordinator's live workers.
    MasterService* master = master_.get();
    coordinator_->set_members_fn([master](uint64_t, const std::vector<WorkerId>& members) {
      master->WithEngine([&](UpdateEngine* e) {
        for (WorkerId w : e->members()) {
          if (std::find(members.begin(), members.end(), w) == members.end()) e->Leave(w);
        }
        for (WorkerId w : members) {
          if (!e->IsMember(w)) e->Join(w);
        }
      });
    });
    grpc::ServerBuilder coordinator_builder;
    coordinator_builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                                         &coordinator_port_);
    ApplyKeepaliveArguments(&coordinator_builder);
    coordinator_builder.RegisterService(coordinator_.get());
    coordinator_server_ = coordinator_builder.BuildAndStart();
  }
  ~InProcessJob() {
    coordinator_server_->Shutdown();
    master_server_->Shutdown();
  }

  std::string coordinator_address() const {
    return "127.0.0.1:" + std::to_string(coordinator_port_);
  }

 private:
  static void Check(const Status& s) {
    if (!s.ok()) {
      std::fprintf(stderr, "worker_bench: %s\n", s.ToString().c_str());
      std::exit(1);
    }
  }

  std::unique_ptr<MasterService> master_;
  std::unique_ptr<grpc::Server> master_server_;
  int master_port_ = 0;
  std::unique_ptr<CoordinatorService> coordinator_;
  std::unique_ptr<grpc::Server> coordinator_server_;
  int coordinator_port_ = 0;
};

// The sum (ms) and count of a phase's step-duration histogram.
void PhaseTotals(prometheus::Registry& registry, const std::string& phase, double* sum_ms,
                 double* count) {
  *sum_ms = *count = 0;
  for (const auto& family : registry.Collect()) {
    if (family.name != "gaptrain_worker_step_duration_seconds") continue;
    for (const auto& metric : family.metric) {
      for (const auto& label : metric.label) {
        if (label.name == "phase" && label.value == phase) {
          *sum_ms = 1000.0 * metric.histogram.sample_sum;
          *count = static_cast<double>(metric.histogram.sample_count);
        }
      }
    }
  }
}

WorkerRun RunWorker(const TrainingJob& job, const Dataset& train, uint32_t samples) {
  InProcessJob servers(job, train, samples);
  CoordinatorClient::Options co;
  CoordinatorClient client(
      CreateWorkerChannel(servers.coordinator_address(), grpc::InsecureChannelCredentials(),
                          ChannelKind::kCoordinator),
      co);
  auto registry = std::make_shared<prometheus::Registry>();
  WorkerMetrics metrics(registry);
  StopFlag stop;
  CoordinatorSession::Options so;
  so.host = "bench-worker";
  CoordinatorSession session(&client, so, &stop, &metrics);
  MasterLink::Connector connect = [](const std::string& address) {
    return std::make_unique<MasterClient>(
        CreateWorkerChannel(address, grpc::InsecureChannelCredentials(), ChannelKind::kMaster),
        MasterClient::Options());
  };
  Trainer trainer(job, train, &session, connect, &stop, &metrics, Trainer::Options());
  const auto start = Clock::now();
  Status s = trainer.Run();
  const double seconds = Since(start);
  if (!s.ok()) {
    std::fprintf(stderr, "worker_bench: the trainer failed: %s\n", s.ToString().c_str());
    std::exit(1);
  }
  WorkerRun run;
  run.samples_per_second = static_cast<double>(trainer.samples_pushed()) / seconds;
  // Per batch: a push also brings the next batch's parameters (PushPull),
  // so the worker pulls on its own only at a task's start.
  double pull_ms, pulls, compute_ms, batches, push_ms, pushes;
  PhaseTotals(*registry, "pull", &pull_ms, &pulls);
  PhaseTotals(*registry, "compute", &compute_ms, &batches);
  PhaseTotals(*registry, "push", &push_ms, &pushes);
  if (batches > 0) {
    run.pull_ms = pull_ms / batches;
    run.compute_ms = compute_ms / batches;
    run.push_ms = push_ms / batches;
  }
  return run;
}

constexpr int kRounds = 5;

size_t MedianIndex(const std::vector<double>& values) {
  std::vector<size_t> index(values.size());
  for (size_t i = 0; i < index.size(); ++i) index[i] = i;
  std::sort(index.begin(), index.end(), [&](size_t a, size_t b) { return values[a] < values[b]; });
  return index[index.size() / 2];
}

double Median(const std::vector<double>& values) { return values[MedianIndex(values)]; }

// Steps per second of `loops` plain loops at once, each on its own thread
// with its own model (one compute thread each, like the job's trainers).
double PlainLoopsStepsPerSecond(const TrainingJob& job, const Dataset& train, int loops,
                                uint32_t samples_each) {
  std::vector<std::thread> threads;
  const auto start = Clock::now();
  for (int i = 0; i < loops; ++i) {
    threads.emplace_back([&] { PlainLoop(job, train, samples_each); });
  }
  for (std::thread& t : threads) t.join();
  return loops * static_cast<double>(samples_each) / kBatch / Since(start);
}

struct JobRun {
  double updates_per_second = 0;
  double user_seconds = 0;
  double system_seconds = 0;
};

double Seconds(const timeval& t) { return t.tv_sec + t.tv_usec / 1e6; }

// `gaptrain run -f JOB` from `workspace` (relative paths in the job mean
// the user's directory), its run directory under `run_root`. The CPU times
// are its processes' (every service is waited for by gaptrain).
bool RunJob(const std::string& gaptrain, const std::string& workspace, const std::string& job,
            const std::string& run_root, JobRun* run) {
  rusage before{};
  getrusage(RUSAGE_CHILDREN, &before);
  Process::Spec spec;
  spec.binary = gaptrain;
  spec.args = {"run", "-f", job, "--run-dir", run_root + "/job"};
  spec.env = {{"BUILD_WORKING_DIRECTORY", workspace}};
  spec.log_file = run_root + "/gaptrain-run.log";
  std::unique_ptr<Process> process;
  Status s = Process::Start(spec, &process);
  if (s.ok() && !process->WaitExit(std::chrono::minutes(10))) {
    s = Status::Internal("gaptrain run did not finish within 10 minutes");
  }
  if (s.ok() && process->wait_status() != 0) {
    s = Status::Internal("gaptrain run ended with " + DescribeWaitStatus(process->wait_status()));
  }
  process.reset();
  if (!s.ok()) {
    std::fprintf(stderr, "worker_bench: %s (log: %s)\n", s.ToString().c_str(),
                 spec.log_file.c_str());
    return false;
  }
  rusage after{};
  getrusage(RUSAGE_CHILDREN, &after);
  run->user_seconds = Seconds(after.ru_utime) - Seconds(before.ru_utime);
  run->system_seconds = Seconds(after.ru_stime) - Seconds(before.ru_stime);
  std::ifstream in(run_root + "/job/summary.json");
  const nlohmann::json summary = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!summary.is_object() || !summary.value("pushesAccepted", 0.0) ||
      !summary.value("seconds", 0.0)) {
    std::fprintf(stderr, "worker_bench: no summary in %s/job\n", run_root.c_str());
    return false;
  }
  run->updates_per_second = summary["pushesAccepted"].get<double>() /
                            summary["seconds"].get<double>();
  return true;
}

// The README job against 4 plain loops, in alternating rounds.
void ReadmeJobRow(const Dataset& train, const std::string& workspace) {
  const std::string gaptrain = workspace + "/bazel-bin/cli/gaptrain";
  if (access(gaptrain.c_str(), X_OK) != 0) {
    std::printf("README job: skipped, %s is not built (bazel build -c opt //cli:gaptrain)\n",
                gaptrain.c_str());
    return;
  }
  const std::string job_file = "examples/mnist-gap-aware.yaml";
  TrainingJob job;
  Status s = LoadTrainingJob(workspace + "/" + job_file, &job);
  if (!s.ok()) {
    std::printf("README job: skipped, %s\n", s.ToString().c_str());
    return;
  }
  const int trainers = static_cast<int>(job.workers.replicas);
  char run_root[] = "/tmp/worker_bench_job_XXXXXX";
  if (mkdtemp(run_root) == nullptr) return;
  std::printf("\nREADME job (%s, %d trainers, batch %u) vs %d plain loops sharing %d CPUs\n",
              job_file.c_str(), trainers, job.training.batch_size, trainers, AvailableCpus());
  std::vector<double> ratios, shares, job_rates, plain_rates;
  constexpr int kJobRounds = 3;
  for (int round = 0; round < kJobRounds; ++round) {
    const double plain = PlainLoopsStepsPerSecond(Job("lenet5"), train, trainers, kBatch * 300);
    JobRun run;
    if (!RunJob(gaptrain, workspace, job_file, run_root, &run)) return;
    const double share = run.system_seconds / (run.user_seconds + run.system_seconds);
    std::printf("  round %d: job %.1f upd/s (user %.1f s, system %.1f s: %.1f%% in the kernel), "
                "plain loops %.1f steps/s, ratio %.2f\n",
                round + 1, run.updates_per_second, run.user_seconds, run.system_seconds,
                100 * share, plain, run.updates_per_second / plain);
    ratios.push_back(run.updates_per_second / plain);
    shares.push_back(share);
    job_rates.push_back(run.updates_per_second);
    plain_rates.push_back(plain);
  }
  const double ratio = Median(ratios), share = Median(shares);
  std::printf("ratio README job / %d plain loops: %.2f (job %.1f upd/s, plain %.1f steps/s; "
              "target >= 0.85): %s\n",
              trainers, ratio, Median(job_rates), Median(plain_rates),
              ratio >= 0.85 ? "met" : "MISSED");
  std::printf("kernel share of the job's CPU time: %.1f%% (target <= 10%%): %s\n", 100 * share,
              share <= 0.10 ? "met" : "MISSED");
}


int Main(int argc, char** argv) {
  const char* ws = std::getenv("BUILD_WORKSPACE_DIRECTORY");
  const std::string workspace = ws != nullptr ? ws : ".";
  const std::string dir = argc > 1 ? argv[1] : workspace + "/../shared/data/mnist";
  spdlog::set_level(spdlog::level::warn);
  Dataset train;
  Status s = LoadDataset(DatasetFormat::kMnistIdx, dir, Split::kTrain, &train);
  if (!s.ok()) {
    std::fprintf(stderr, "worker_bench: %s (pass the MNIST directory as the argument)\n",
                 s.ToString().c_str());
    return 1;
  }
  SetComputeThreads(1);
  std::printf(
      "worker_bench: one worker vs a plain LibTorch loop, MNIST, batch %u, 1 compute "
      "thread, %d CPUs; load average %s\n",
      kBatch, AvailableCpus(), LoadAverage().c_str());
  std::printf("%-7s %8s %9s %14s %15s %9s  %-24s %s\n", "model", "params", "samples",
              "plain samp/s", "worker samp/s", "overhead", "pull/comp/pushpull ms", "target");
  struct Case {
    const char* model;
    uint32_t samples;
    bool has_target;
  };
  for (const Case& c : {Case{"lenet5", 64 * 200, true}, Case{"mlp", 64 * 500, false}}) {
    const TrainingJob job = Job(c.model);
    PlainLoop(job, train, 64 * 20);  // warm-up: allocator, OpenMP pool
    // Alternating rounds; the median of each, and of the per-round ratios.
    std::vector<double> plain, plain_compute_ms, worker, overheads;
    std::vector<WorkerRun> runs;
    for (int round = 0; round < kRounds; ++round) {
      const PlainRun plain_run = PlainLoop(job, train, c.samples);
      plain.push_back(plain_run.samples_per_second);
      plain_compute_ms.push_back(plain_run.compute_ms);
      runs.push_back(RunWorker(job, train, c.samples));
      worker.push_back(runs.back().samples_per_second);
      overheads.push_back(1.0 - worker.back() / plain.back());
    }
    std::unique_ptr<Model> model;
    Model::CreateBuiltin(c.model, ModelInput{1, 28, 28, 10}, 1, &model);
    const double overhead = Median(overheads);
    const WorkerRun& typical = runs[MedianIndex(worker)];
    char split[64];
    std::snprintf(split, sizeof(split), "%.2f / %.2f / %.2f", typical.pull_ms, typical.compute_ms,
                  typical.push_ms);
    std::printf("%-7s %8zu %9u %14.0f %15.0f %8.1f%%  %-24s %s\n", c.model, model->layout().size(),
                c.samples, Median(plain), Median(worker), 100 * overhead, split,
                c.has_target ? (overhead <= 0.15 ? "<= 15%: met" : "<= 15%: MISSED") : "-");
    std::printf("        per-round overheads:");
    for (double o : overheads) std::printf(" %.1f%%", 100 * o);
    std::printf("; network share of a step (pull + push) / (pull + compute + push): %.1f%%\n",
                100 * (typical.pull_ms + typical.push_ms) /
                    (typical.pull_ms + typical.compute_ms + typical.push_ms));
    // Whether the worker's gradients cost more than the loop's (caches the
    // transfer walked through, a busy neighbour) or only the network does.
    std::vector<double> worker_compute_ms;
    for (const WorkerRun& r : runs) worker_compute_ms.push_back(r.compute_ms);
    const double plain_ms = Median(plain_compute_ms), worker_ms = Median(worker_compute_ms);
    std::printf("        compute per batch (medians): plain %.2f ms, worker %.2f ms (%+.1f%%)\n",
                plain_ms, worker_ms, 100 * (worker_ms / plain_ms - 1));
  }
  ReadmeJobRow(train, workspace);
  std::printf("load average after: %s\n", LoadAverage().c_str());
  return 0;
}

}  // namespace
}  // namespace gaptrain

int main(int argc, char** argv) {
  gaptrain::UseTrainingHeapPolicy();  // as gaptrain-worker does, for both loops
  return gaptrain::Main(argc, argv);
}
