// gaptrain-worker as real processes on loopback, beside a real
// gaptrain-master and gaptrain-coordinator (all started from runfiles):
// two trainers and the evaluator train the mlp on the real MNIST
// (../shared/data; missing data fails the test) to at least 95%; SIGTERM
// mid-step makes a trainer leave cleanly and its task goes back to the
// queue; the master killed with SIGKILL and restarted from its checkpoint
// mid-run, and the coordinator restarted likewise: the workers reconnect
// and training completes; a trainer whose coordinator (then master too) is
// gone exits within 2 s of SIGTERM and says what it handed back; bad flags
// exit 2.

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include "services/coordinator/coordinator_client.h"
#include "services/master/master_client.h"
#include "services/net/http_client.h"
#include "services/testing/test_files.h"
#include "services/testing/test_processes.h"
#include "services/testing/testdata_dir.h"

namespace gaptrain {
namespace {

constexpr char kToken[] = "worker-process-token";
constexpr char kMaster[] = "services/master/gaptrain-master";
constexpr char kCoordinator[] = "services/coordinator/gaptrain-coordinator";
constexpr char kWorker[] = "services/worker/gaptrain-worker";

struct JobSpec {
  std::string name = "worker-test";
  std::string rule = "{rule: gap-aware}";
  double epochs = 2;
  double target_accuracy = 0;
  uint64_t eval_every = 300;
  uint32_t replicas = 2;
  uint32_t lease_seconds = 6;
  std::string model = "{builtin: mlp}";
  uint64_t max_updates = 0;  // instead of epochs when set
  uint32_t batch_size = 64;
};

std::string WriteJob(const std::string& dir, const JobSpec& spec) {
  std::string data;
  Status s = FindSharedDataDir(&data);
  EXPECT_TRUE(s.ok()) << s.ToString();
  const std::string path = dir + "/job.yaml";
  std::ofstream(path) << "apiVersion: gaptrain.io/v1alpha1\n"
                      << "kind: TrainingJob\n"
                      << "metadata: {name: " << spec.name << "}\n"
                      << "spec:\n"
                      << "  model: " << spec.model << "\n"
                      << "  data: {format: mnist-idx, path: " << data << "/mnist, shuffleSeed: 7}\n"
                      << "  training:\n"
                      << "    batchSize: " << spec.batch_size << "\n"
                      << (spec.max_updates > 0
                              ? "    maxUpdates: " + std::to_string(spec.max_updates) + "\n"
                              : "    epochs: " + std::to_string(spec.epochs) + "\n")
                      << "    targetAccuracy: " << spec.target_accuracy << "\n"
                      << "    evalEveryUpdates: " << spec.eval_every << "\n"
                      << "    optimizer: {learningRate: 0.05, momentum: 0.9, weightDecay: 1.0e-4}\n"
                      << "    staleness: " << spec.rule << "\n"
                      << "  workers: {replicas: " << spec.replicas << "}\n"
                      << "  master:\n"
                      << "    checkpoint: {intervalSeconds: 3600, keep: 2, path: " << dir
                      << "/ckpt}\n"
                      << "  coordinator: {leaseSeconds: " << spec.lease_seconds << "}\n";
  return path;
}

// A job's processes, with their logs in the test's directory.
class Job {
 public:
  Job(const std::string& name, const JobSpec& spec) : dir_(TestTempDir(name)) {
    job_ = WriteJob(dir_, spec);
  }

  void StartMaster(const std::string& listen = "127.0.0.1:0") {
    master_ = std::make_unique<ChildProcess>(
        kMaster,
        std::vector<std::string>{"--job", job_, "--listen", listen, "--http-address", "127.0.0.1",
                                 "--http-port", "0", "--train-samples", "60000"},
        dir_ + "/master.ports", dir_ + "/master.log", kToken, 2);
    ASSERT_TRUE(master_->started()) << ReadRaw(dir_ + "/master.log");
  }

  void StartCoordinator(uint32_t task_batches, const std::string& listen = "127.0.0.1:0") {
    coordinator_ = std::make_unique<ChildProcess>(
        kCoordinator,
        std::vector<std::string>{"--job", job_, "--listen", listen, "--http-address", "127.0.0.1",
                                 "--http-port", "0", "--train-samples", "60000", "--task-batches",
                                 std::to_string(task_batches), "--state-dir", dir_ + "/state",
                                 "--master", master_->address()},
        dir_ + "/coordinator.ports", dir_ + "/coordinator.log", kToken, 2);
    ASSERT_TRUE(coordinator_->started()) << ReadRaw(dir_ + "/coordinator.log");
  }

  // A trainer or the evaluator, one compute thread each (a 2-core machine).
  ChildProcess* StartWorker(const std::string& host, bool evaluator = false) {
    std::vector<std::string> args = {
        "--job",           job_, "--coordinator",  coordinator_->address(),
        "--threads",       "1",  "--http-address", "127.0.0.1",
        "--http-port",     "0",  "--host-name",    host,
        "--grace-seconds", "10"};
    if (evaluator) args.insert(args.end(), {"--role", "evaluator"});
    workers_.push_back(std::make_unique<ChildProcess>(kWorker, args, dir_ + "/" + host + ".ports",
                                                      dir_ + "/" + host + ".log", kToken, 1));
    EXPECT_TRUE(workers_.back()->started()) << ReadRaw(dir_ + "/" + host + ".log");
    return workers_.back().get();
  }

  CoordinatorClient Coordinator() {
    CoordinatorClient::Options o;
    o.token = kToken;
    return CoordinatorClient(
        grpc::CreateChannel(coordinator_->address(), grpc::InsecureChannelCredentials()), o);
  }
  MasterClient Master() {
    MasterClient::Options o;
    o.token = kToken;
    o.deadline_seconds = 5;
    return MasterClient(grpc::CreateChannel(master_->address(), grpc::InsecureChannelCredentials()),
                        o);
  }
  proto::CoordinatorStatusResponse Status() {
    proto::CoordinatorStatusResponse st;
    Coordinator().GetStatus(&st);
    return st;
  }
  uint64_t MasterVersion() {
    proto::DescribeResponse d;
    return Master().Describe(&d).ok() ? d.version() : 0;
  }

  // Waits for every worker to exit; returns their wait statuses.
  std::vector<int> WaitWorkers(std::chrono::seconds timeout) {
    std::vector<int> statuses;
    for (auto& w : workers_) {
      int status = -1;
      EXPECT_TRUE(w->WaitExit(timeout, &status)) << "a worker did not exit; see " << w->log_file();
      statuses.push_back(status);
    }
    return statuses;
  }

  // A worker's metric value from /metrics (first series starting with
  // `series`), or -1.
  static double Metric(ChildProcess* worker, const std::string& series) {
    HttpClientResponse r;
    if (!HttpGet("127.0.0.1", worker->port(0), "/metrics", 10, &r).ok()) return -1;
    const size_t at = r.body.find("\n" + series + " ");
    if (at == std::string::npos) return -1;
    return std::strtod(r.body.c_str() + at + series.size() + 2, nullptr);
  }

  void PrintLogs() {
    for (const char* name : {"master", "coordinator"}) {
      std::printf("---- %s.log (tail)\n%s\n", name,
                  Tail(ReadRaw(dir_ + "/" + name + ".log")).c_str());
    }
    for (auto& w : workers_) {
      std::printf("---- %s (tail)\n%s\n", w->log_file().c_str(),
                  Tail(ReadRaw(w->log_file())).c_str());
    }
  }

  const std::string& dir() const { return dir_; }
  std::unique_ptr<ChildProcess>& master() { return master_; }
  std::unique_ptr<ChildProcess>& coordinator() { return coordinator_; }

 private:
  static std::string Tail(const std::string& text) {
    return text.size() > 3000 ? text.substr(text.size() - 3000) : text;
  }

  std::string dir_;
  std::string job_;
  std::unique_ptr<ChildProcess> master_;
  std::unique_ptr<ChildProcess> coordinator_;
  std::vector<std::unique_ptr<ChildProcess>> workers_;
};

bool ExitedWith(int status, int code) { return WIFEXITED(status) && WEXITSTATUS(status) == code; }

double Seconds(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

TEST(WorkerProcessTest, TwoTrainersAndTheEvaluatorTrainMlpOnMnistToNinetyFivePercent) {
  const auto start = std::chrono::steady_clock::now();
  JobSpec spec;
  spec.name = "mnist-e2e";
  Job job("e2e", spec);
  ASSERT_NO_FATAL_FAILURE(job.StartMaster());
  ASSERT_NO_FATAL_FAILURE(job.StartCoordinator(/*task_batches=*/20));
  ChildProcess* a = job.StartWorker("trainer-a");
  ChildProcess* b = job.StartWorker("trainer-b");
  ChildProcess* evaluator = job.StartWorker("evaluator", /*evaluator=*/true);

  // While training: the step phases and samples show up on /metrics.
  EXPECT_TRUE(Eventually([&] { return Job::Metric(a, "gaptrain_worker_samples_total") > 0; }));
  const double pulls =
      Job::Metric(a, "gaptrain_worker_step_duration_seconds_count{phase=\"pull\"}");
  EXPECT_GT(pulls, 0);
  HttpClientResponse health;
  ASSERT_TRUE(HttpGet("127.0.0.1", b->port(0), "/healthz", 10, &health).ok());
  EXPECT_EQ(health.status, 200);

  const std::vector<int> exits = job.WaitWorkers(std::chrono::seconds(240));
  for (int status : exits) EXPECT_TRUE(ExitedWith(status, 0)) << status;
  const proto::CoordinatorStatusResponse st = job.Status();
  std::printf("e2e: %s (%s) in %.1f s, master version %llu, accuracy %.4f at version %llu\n",
              proto::JobPhase_Name(st.phase()).c_str(), st.reason().c_str(), Seconds(start),
              static_cast<unsigned long long>(job.MasterVersion()), st.last_accuracy(),
              static_cast<unsigned long long>(st.last_eval_version()));
  EXPECT_EQ(st.phase(), proto::JOB_PHASE_SUCCEEDED);
  EXPECT_EQ(st.reason(), "EpochsCompleted");
  ASSERT_TRUE(st.has_last_accuracy());
  EXPECT_GE(st.last_accuracy(), 0.95);
  // The evaluator evaluated the final model: its last version is the master's.
  EXPECT_EQ(st.last_eval_version(), job.MasterVersion());
  EXPECT_EQ(st.left(), 3u);  // all FINISHED
  EXPECT_EQ(st.preempted() + st.failed() + st.expired(), 0u);
  (void)evaluator;
  if (HasFailure()) job.PrintLogs();
}

// A BatchNorm model (the built-in resnet20): the trainer sends its running
// statistics every 16 pushes and when a task ends, and the master folds
// them in (what the evaluator and the export read).
TEST(WorkerProcessTest, ATrainerSendsItsBatchNormStatisticsToTheMaster) {
  JobSpec spec;
  spec.name = "batchnorm";
  spec.model = "{builtin: resnet20}";
  spec.max_updates = 40;
  spec.batch_size = 16;
  spec.replicas = 1;
  spec.eval_every = 100000;
  Job job("batchnorm", spec);
  ASSERT_NO_FATAL_FAILURE(job.StartMaster());
  ASSERT_NO_FATAL_FAILURE(job.StartCoordinator(/*task_batches=*/10));
  proto::PullBuffersResponse before;
  ASSERT_TRUE(job.Master().PullBuffers(&before).ok());
  EXPECT_EQ(before.merges(), 0u);
  job.StartWorker("trainer");
  const std::vector<int> exits = job.WaitWorkers(std::chrono::seconds(240));
  ASSERT_TRUE(ExitedWith(exits[0], 0)) << exits[0];
  proto::DescribeResponse d;
  ASSERT_TRUE(job.Master().Describe(&d).ok());
  ASSERT_EQ(d.layout().buffers_size(), 57);  // 19 BatchNorms
  EXPECT_EQ(d.layout().buffers(2).name(), "bn1.num_batches_tracked");
  proto::PullBuffersResponse after;
  ASSERT_TRUE(job.Master().PullBuffers(&after).ok());
  // Every task of 10 batches ends with a send, and every 16th push.
  EXPECT_GE(after.merges(), 4u);
  // bn1: 16 running means, 16 variances, then the int64 count.
  float mean0 = 0, var0 = 0;
  int64_t count = 0;
  std::memcpy(&mean0, after.values().data(), 4);
  std::memcpy(&var0, after.values().data() + 64, 4);
  std::memcpy(&count, after.values().data() + 128, 8);
  EXPECT_NE(mean0, 0.0f);
  EXPECT_NE(var0, 1.0f);
  EXPECT_GE(count, 40);
  if (HasFailure()) job.PrintLogs();
}

// An evaluator that starts only after the job ended (a slow start, or a
// restart near the end) still scores the final model: the coordinator lets
// it join a finished job, and it evaluates at once and leaves.
TEST(WorkerProcessTest, AnEvaluatorStartedAfterTheJobEndedScoresTheFinalModel) {
  JobSpec spec;
  spec.name = "late-evaluator";
  spec.max_updates = 30;
  spec.replicas = 1;
  spec.eval_every = 100000;
  Job job("late-evaluator", spec);
  ASSERT_NO_FATAL_FAILURE(job.StartMaster());
  ASSERT_NO_FATAL_FAILURE(job.StartCoordinator(/*task_batches=*/10));
  job.StartWorker("trainer");
  std::vector<int> exits = job.WaitWorkers(std::chrono::seconds(240));
  ASSERT_TRUE(ExitedWith(exits[0], 0)) << exits[0];
  ASSERT_EQ(job.Status().phase(), proto::JOB_PHASE_SUCCEEDED);
  ASSERT_FALSE(job.Status().has_last_accuracy());

  job.StartWorker("evaluator", /*evaluator=*/true);
  exits = job.WaitWorkers(std::chrono::seconds(120));
  EXPECT_TRUE(ExitedWith(exits[1], 0)) << exits[1];
  const proto::CoordinatorStatusResponse st = job.Status();
  EXPECT_EQ(st.reason(), "MaxUpdatesReached");
  ASSERT_TRUE(st.has_last_accuracy());
  EXPECT_GT(st.last_accuracy(), 0.5);
  EXPECT_EQ(st.last_eval_version(), job.MasterVersion());
  if (HasFailure()) job.PrintLogs();
}

TEST(WorkerProcessTest, SigtermMidStepLeavesCleanlyAndTheTaskGoesBackToTheQueue) {
  JobSpec spec;
  spec.name = "sigterm";
  spec.rule = "{rule: dana-slim}";
  spec.epochs = 1;
  spec.replicas = 1;
  Job job("sigterm", spec);
  ASSERT_NO_FATAL_FAILURE(job.StartMaster());
  // One trainer: it holds one task at a time (of 8 per epoch).
  ASSERT_NO_FATAL_FAILURE(job.StartCoordinator(/*task_batches=*/1000));
  ChildProcess* doomed = job.StartWorker("spot-a");
  ASSERT_TRUE(Eventually([&] { return Job::Metric(doomed, "gaptrain_worker_samples_total") > 0; }));
  const proto::CoordinatorStatusResponse before = job.Status();
  ASSERT_EQ(before.tasks_in_flight(), 1u);

  doomed->Signal(SIGTERM);
  int status = -1;
  ASSERT_TRUE(doomed->WaitExit(std::chrono::seconds(15), &status));
  EXPECT_TRUE(ExitedWith(status, 0)) << status;
  proto::CoordinatorStatusResponse st = job.Status();
  EXPECT_EQ(st.preempted(), 1u);
  EXPECT_EQ(st.failed(), 0u);
  EXPECT_EQ(st.live_workers(), 0u);
  EXPECT_EQ(st.tasks_reassigned(), 1u);
  EXPECT_EQ(st.tasks_queued(), st.tasks_total() - st.tasks_done());  // its task is back
  EXPECT_EQ(st.tasks_in_flight(), 0u);
  const std::string log = ReadRaw(doomed->log_file());
  EXPECT_NE(log.find("LEAVE_REASON_PREEMPTED"), std::string::npos);
  EXPECT_NE(log.find("handed back task "), std::string::npos);

  // A replacement takes the task back and finishes the job.
  ChildProcess* replacement = job.StartWorker("spot-b");
  int replacement_status = -1;
  ASSERT_TRUE(replacement->WaitExit(std::chrono::seconds(180), &replacement_status));
  EXPECT_TRUE(ExitedWith(replacement_status, 0)) << replacement_status;
  st = job.Status();
  EXPECT_EQ(st.phase(), proto::JOB_PHASE_SUCCEEDED);
  EXPECT_EQ(st.reason(), "EpochsCompleted");
  EXPECT_EQ(st.left(), 1u);
  if (HasFailure()) job.PrintLogs();
}

// A preempted trainer whose peers are gone must not spend its grace period
// retrying them (issue 28: 24 s on a cluster): it leaves within 2 s and
// says what it handed back, or that it could not.
TEST(WorkerProcessTest, SigtermWithTheCoordinatorOrMasterGoneExitsWithinTwoSeconds) {
  JobSpec spec;
  spec.name = "peers-gone";
  spec.epochs = 50;  // never ends while the test runs
  Job job("peers-gone", spec);
  ASSERT_NO_FATAL_FAILURE(job.StartMaster());
  ASSERT_NO_FATAL_FAILURE(job.StartCoordinator(/*task_batches=*/20));
  ChildProcess* a = job.StartWorker("alone-a");
  ChildProcess* b = job.StartWorker("alone-b");
  ASSERT_TRUE(Eventually([&] {
    return Job::Metric(a, "gaptrain_worker_samples_total") > 0 &&
           Job::Metric(b, "gaptrain_worker_samples_total") > 0;
  }));
  auto preempt = [](ChildProcess* worker, const char* what) {
    const auto start = std::chrono::steady_clock::now();
    worker->Signal(SIGTERM);
    int status = -1;
    EXPECT_TRUE(worker->WaitExit(std::chrono::seconds(30), &status));
    const double seconds = Seconds(start);
    std::printf("FIGURE SIGTERM with %s: exited %.2f s later\n", what, seconds);
    EXPECT_TRUE(ExitedWith(status, 0)) << status;
    EXPECT_LT(seconds, 2.0) << what;
    const std::string log = ReadRaw(worker->log_file());
    EXPECT_NE(log.find("could not reach the coordinator to leave"), std::string::npos) << what;
    EXPECT_NE(log.find("goes back to the queue when"), std::string::npos) << what;
  };

  // The coordinator is gone; the master still serves.
  job.coordinator()->Kill(SIGKILL);
  preempt(a, "the coordinator gone");
  // Both are gone.
  job.master()->Kill(SIGKILL);
  preempt(b, "the coordinator and the master gone");
  if (HasFailure()) job.PrintLogs();
}

TEST(WorkerProcessTest, MasterAndCoordinatorRestartsMidRunAndTrainingCompletes) {
  const auto start = std::chrono::steady_clock::now();
  JobSpec spec;
  spec.name = "restarts";
  // GA+DANA with the echoed bf16 copy: after a restart no snapshot is needed.
  spec.rule = "{rule: gap-aware-dana, gapSource: echo, gapPrecision: bf16}";
  spec.epochs = 2;
  Job job("restarts", spec);
  ASSERT_NO_FATAL_FAILURE(job.StartMaster());
  ASSERT_NO_FATAL_FAILURE(job.StartCoordinator(/*task_batches=*/20));
  ChildProcess* a = job.StartWorker("trainer-a");
  ChildProcess* b = job.StartWorker("trainer-b");
  job.StartWorker("evaluator", /*evaluator=*/true);

  // A checkpoint mid-run, more training, then SIGKILL: what came after
  // the checkpoint is lost.
  ASSERT_TRUE(Eventually([&] { return job.MasterVersion() >= 200; }));
  proto::CheckpointResponse checkpoint;
  ASSERT_TRUE(job.Master().Checkpoint(&checkpoint).ok());
  ASSERT_TRUE(Eventually([&] { return job.MasterVersion() >= checkpoint.version() + 100; }));
  const std::string master_address = job.master()->address();
  job.master()->Kill(SIGKILL);
  ASSERT_NO_FATAL_FAILURE(job.StartMaster(master_address));  // same port, same directory
  EXPECT_NE(ReadRaw(job.dir() + "/master.log")
                .find("at version " + std::to_string(checkpoint.version()) + " with"),
            std::string::npos)
      << "the master did not restore the checkpoint of version " << checkpoint.version();

  // Both trainers reconnect to the master and push again.
  EXPECT_TRUE(Eventually([&] {
    return Job::Metric(a, "gaptrain_worker_reconnects_total{service=\"master\"}") >= 1 &&
           Job::Metric(b, "gaptrain_worker_reconnects_total{service=\"master\"}") >= 1;
  }));
  const double samples_a = Job::Metric(a, "gaptrain_worker_samples_total");
  EXPECT_TRUE(
      Eventually([&] { return Job::Metric(a, "gaptrain_worker_samples_total") > samples_a; }));

  // The coordinator too: SIGKILL, restart from its state file on the same
  // port; the workers' leases restart and they carry on.
  const std::string coordinator_address = job.coordinator()->address();
  job.coordinator()->Kill(SIGKILL);
  ASSERT_NO_FATAL_FAILURE(job.StartCoordinator(20, coordinator_address));

  const std::vector<int> exits = job.WaitWorkers(std::chrono::seconds(240));
  for (int status : exits) EXPECT_TRUE(ExitedWith(status, 0)) << status;
  const proto::CoordinatorStatusResponse st = job.Status();
  std::printf(
      "restarts: %s (%s) in %.1f s, checkpoint at %llu, final version %llu, accuracy "
      "%.4f\n",
      proto::JobPhase_Name(st.phase()).c_str(), st.reason().c_str(), Seconds(start),
      static_cast<unsigned long long>(checkpoint.version()),
      static_cast<unsigned long long>(job.MasterVersion()), st.last_accuracy());
  EXPECT_EQ(st.phase(), proto::JOB_PHASE_SUCCEEDED);
  EXPECT_EQ(st.reason(), "EpochsCompleted");
  EXPECT_EQ(st.failed(), 0u);
  ASSERT_TRUE(st.has_last_accuracy());
  EXPECT_GE(st.last_accuracy(), 0.95);
  if (HasFailure()) job.PrintLogs();
}

TEST(WorkerProcessTest, BadFlagsAndJobFailFast) {
  const std::string dir = TestTempDir("bad");
  auto run = [](const std::string& args) {
    std::string cmd = std::string(kWorker) + " " + args + " >/dev/null 2>&1";
    int status = std::system(cmd.c_str());
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  };
  const std::string job = WriteJob(dir, JobSpec());
  EXPECT_EQ(run(""), 2);
  EXPECT_EQ(run("--job " + job + " --insecure-no-token"), 2);  // --coordinator missing
  EXPECT_EQ(run("--job " + job + " --coordinator c:1 --role boss --insecure-no-token"), 2);
  EXPECT_EQ(run("--job /nonexistent.yaml --coordinator c:1 --insecure-no-token"), 2);
  EXPECT_EQ(run("--job " + job + " --coordinator c:1"), 2);  // no token anywhere
  // A dataset that is not there: exit 1 with the file named.
  EXPECT_EQ(run("--job " + job +
                " --coordinator 127.0.0.1:1 --insecure-no-token --http-port 0 "
                "--data-dir " +
                dir + "/nowhere"),
            1);
}

}  // namespace
}  // namespace gaptrain
