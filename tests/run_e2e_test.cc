// `gaptrain run` end to end, as a user runs it: the launcher starts the
// coordinator, the master, the evaluator and 4 trainers as real processes
// on loopback and trains LeNet-5 on the real MNIST with Gap-Aware to at
// least 98% test accuracy. Meanwhile a real Prometheus server scrapes every
// service through the launcher's file_sd targets file, and the staleness
// and Gap series are read back through Prometheus's HTTP API; `gaptrain
// status` reports the running job. At the end: the summary, the final
// checkpoint (readable, at the final version), and no process left.
// Also: Ctrl-C stops the job with a checkpoint and --resume finishes it; a
// killed launcher takes its children along; spec.workers.autoscale grows a
// job from 1 trainer to 4.

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "services/base/process.h"
#include "services/coordinator/coordinator_client.h"
#include "services/engine/parameter_store.h"
#include "services/master/checkpoint.h"
#include "services/testing/plain_pytorch_score.h"
#include "services/testing/prometheus_test_server.h"
#include "services/testing/testdata_dir.h"
#include "tests/gaptrain_run_fixture.h"

namespace gaptrain {
namespace {

bool ExitedWith(int status, int code) {
  return status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == code;
}

// The coordinator's status of the job running in `run_dir`.
bool JobStatus(const std::string& run_dir, proto::CoordinatorStatusResponse* status) {
  const nlohmann::json endpoints = WaitForEndpoints(run_dir, std::chrono::seconds(0));
  if (!endpoints.is_object()) return false;
  std::string token = ReadRaw(run_dir + "/token");
  while (!token.empty() && token.back() == '\n') token.pop_back();
  CoordinatorClient::Options options;
  options.token = token;
  options.deadline_seconds = 5;
  CoordinatorClient client(grpc::CreateChannel(endpoints["coordinator"].get<std::string>(),
                                               grpc::InsecureChannelCredentials()),
                           options);
  return client.GetStatus(status).ok();
}

// Every checkpoint file verifies; returns the versions, oldest first.
std::vector<uint64_t> VerifyCheckpoints(const std::string& dir) {
  std::vector<uint64_t> versions;
  CheckpointDirectory checkpoints(dir, 1);
  for (const std::string& path : checkpoints.List()) {
    std::unique_ptr<ParameterStore> store;
    Status s = ReadCheckpoint(path, &store, nullptr);
    EXPECT_TRUE(s.ok()) << s.ToString();
    if (s.ok()) versions.push_back(store->version());
  }
  return versions;
}

// The sum of N over the lines of `log` that say "N <what>".
int CountFileCounts(const std::string& log, const std::string& what) {
  int total = 0;
  for (size_t at = log.find(what); at != std::string::npos; at = log.find(what, at + 1)) {
    size_t begin = at - 1;  // the space before `what`
    while (begin > 0 && std::isdigit(static_cast<unsigned char>(log[begin - 1]))) --begin;
    total += std::atoi(log.c_str() + begin);
  }
  return total;
}

// `gaptrain run -f job_file` started in the background, once its services
// are up (endpoints.json written).
struct RunningJob {
  std::unique_ptr<Process> launcher;
  nlohmann::json endpoints;
  std::string run_dir;
  std::string output;  // the launcher's stdout and stderr
};

void StartRun(const std::string& dir, const std::string& job_file, const std::string& output,
              RunningJob* job, const std::vector<std::string>& more_args = {}) {
  job->run_dir = dir + "/run";
  job->output = dir + "/" + output;
  std::vector<std::string> args = {"run", "-f", job_file, "--run-dir", job->run_dir};
  args.insert(args.end(), more_args.begin(), more_args.end());
  job->launcher = StartGaptrain(args, job->output);
  ASSERT_NE(job->launcher, nullptr);
  job->endpoints = WaitForEndpoints(job->run_dir, std::chrono::seconds(180));
  ASSERT_TRUE(job->endpoints.is_object()) << ReadRaw(job->output);
}

TEST(RunE2eTest, FourWorkersTrainLenet5OnMnistToNinetyEightPercentWithGapAware) {
  std::string data;
  Status found = FindSharedDataDir(&data);
  ASSERT_TRUE(found.ok()) << found.ToString();
  const std::string dir = TestTempDir("gap-aware");
  E2eJob job;
  job.name = "mnist-e2e";
  // 4 epochs ended between 97.9% and 99.0% over six runs (the low one with
  // the rest of the test suite on the same 2 cores); a fifth keeps the
  // 98% bar clear of that spread.
  job.epochs = 5;
  RunningJob running;
  const std::string data_cache = dir + "/data-cache";  // empty: the workers fill it
  ASSERT_NO_FATAL_FAILURE(StartRun(dir, WriteJobFile(dir, job), "gaptrain.out", &running,
                                   {"--data-cache", data_cache}));
  Process* run = running.launcher.get();
  const std::string& run_dir = running.run_dir;
  const std::map<std::string, pid_t> pids = ServicePids(running.endpoints);
  EXPECT_EQ(pids.size(), 7u) << running.endpoints.dump();  // master, coordinator, evaluator, 4 trainers
  // Every service starts without OpenBLAS's load-time thread pool
  // (services/base/blas_environment.h); /proc/PID/environ holds
  // NUL-terminated entries.
  for (const auto& [service, pid] : pids) {
    const std::string environ =
        '\0' + ReadRaw("/proc/" + std::to_string(pid) + "/environ");
    const std::string entry = std::string(1, '\0') + "OPENBLAS_NUM_THREADS=1" + '\0';
    EXPECT_NE(environ.find(entry), std::string::npos) << service;
  }

  // A real Prometheus scrapes every service the launcher lists.
  std::unique_ptr<PrometheusTestServer> prometheus;
  Status s = PrometheusTestServer::StartWithFileTargets(run_dir + "/prometheus-targets.json",
                                                        0.5, &prometheus);
  ASSERT_TRUE(s.ok()) << s.ToString();

  // Staleness and Gap, read back through Prometheus's query API.
  double staleness_pushes = 0, mean_gap = 0, samples = 0, live = 0;
  s = prometheus->WaitForSeries("gaptrain_master_staleness_count{job=\"gaptrain-master\"} > 50",
                                120, &staleness_pushes);
  EXPECT_TRUE(s.ok()) << s.ToString() << "\n" << prometheus->LogTail();
  EXPECT_GT(staleness_pushes, 50);

  // `gaptrain status` from another process, once the trainers are
  // training (they start in parallel; some may still be loading before).
  std::string status_text;
  const int status_exit = RunGaptrain({"status", "--run-dir", run_dir}, &status_text);
  EXPECT_TRUE(ExitedWith(status_exit, 0)) << status_text;
  EXPECT_NE(status_text.find("job mnist-e2e:"), std::string::npos) << status_text;
  EXPECT_NE(status_text.find("trainer-"), std::string::npos) << status_text;
  s = prometheus->WaitForSeries(
      "gaptrain_master_gap_sum{job=\"gaptrain-master\"} / "
      "gaptrain_master_gap_count{job=\"gaptrain-master\"}",
      60, &mean_gap);
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(std::isfinite(mean_gap) && mean_gap >= 1.0) << mean_gap;  // G = max(1, ...)
  s = prometheus->WaitForSeries("sum(gaptrain_worker_samples_total{job=\"gaptrain-worker\"}) > 0",
                                60, &samples);
  EXPECT_TRUE(s.ok()) << s.ToString();
  s = prometheus->WaitForSeries("gaptrain_coordinator_live_workers{job=\"gaptrain-coordinator\"}",
                                60, &live);
  EXPECT_TRUE(s.ok()) << s.ToString();

  ASSERT_TRUE(run->WaitExit(std::chrono::minutes(15))) << ReadRaw(running.output);
  const std::string out = ReadRaw(running.output);
  EXPECT_TRUE(ExitedWith(run->wait_status(), 0)) << DescribeWaitStatus(run->wait_status()) << "\n"
                                                  << out;
  EXPECT_NE(out.find("test accuracy"), std::string::npos) << out;
  std::printf("---- gaptrain run's output\n%s\n", out.c_str());  // for the test log

  const nlohmann::json summary = nlohmann::json::parse(ReadRaw(run_dir + "/summary.json"));
  EXPECT_EQ(summary["outcome"], "Succeeded") << summary.dump(2);
  ASSERT_TRUE(summary["accuracy"].is_number()) << summary.dump(2);
  EXPECT_GE(summary["accuracy"].get<double>(), 0.98) << summary.dump(2);
  EXPECT_GT(summary["version"].get<uint64_t>(), 1000u);
  EXPECT_GE(summary["meanGap"].get<double>(), 1.0);
  EXPECT_GT(summary["meanStaleness"].get<double>(), 0.0);  // 4 asynchronous workers

  // The final checkpoint holds the final model.
  const std::string checkpoint = summary["checkpoint"];
  std::unique_ptr<ParameterStore> store;
  s = ReadCheckpoint(checkpoint, &store, nullptr);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(store->version(), summary["version"].get<uint64_t>());
  EXPECT_FALSE(VerifyCheckpoints(run_dir + "/checkpoints").empty());

  // `gaptrain export` (handed to gaptrain-torch, which loads LibTorch) writes
  // the final model as a torch.save zip archive.
  std::string export_text;
  const int exported =
      RunGaptrain({"export", "--run-dir", run_dir, "-o", dir + "/model.pt"}, &export_text);
  EXPECT_TRUE(ExitedWith(exported, 0)) << export_text;
  EXPECT_EQ(ReadRaw(dir + "/model.pt").substr(0, 2), "PK") << export_text;

  for (const auto& [service, pid] : pids) {
    EXPECT_TRUE(ProcessGone(pid)) << service << " (pid " << pid << ") outlived the launcher";
  }

  // The workers inflated each image file once (train, and t10k for the
  // evaluator) and read the copies otherwise: 4 trainers and the evaluator
  // (whose normalisation needs the train images) made 6 reads.
  int inflated = 0, from_cache = 0;
  std::string worker_logs;
  for (const std::string& name :
       {"evaluator", "trainer-0", "trainer-1", "trainer-2", "trainer-3"}) {
    const std::string log = ReadRaw(run_dir + "/logs/" + name + ".log");
    worker_logs += log;
    inflated += CountFileCounts(log, "file(s) inflated into the data cache");
    from_cache += CountFileCounts(log, "file(s) from the data cache");
  }
  EXPECT_EQ(inflated, 2) << worker_logs;
  EXPECT_EQ(from_cache, 4) << worker_logs;
  EXPECT_EQ(worker_logs.find("--data-cache not used"), std::string::npos) << worker_logs;
}

// A small, quick job for the lifecycle tests: the MLP with 2 trainers.
E2eJob SmallJob(const std::string& name) {
  E2eJob job;
  job.name = name;
  job.model = "mlp";
  job.replicas = 2;
  job.epochs = 3;
  job.checkpoint_seconds = 3600;  // only the final checkpoints
  return job;
}

TEST(RunE2eTest, CtrlCStopsEverythingWithACheckpointAndResumeFinishesTheJob) {
  const std::string dir = TestTempDir("interrupt");
  const std::string job_file = WriteJobFile(dir, SmallJob("mnist-interrupt"));
  RunningJob running;
  ASSERT_NO_FATAL_FAILURE(StartRun(dir, job_file, "first.out", &running));
  Process* run = running.launcher.get();
  const std::string& run_dir = running.run_dir;
  const nlohmann::json& endpoints = running.endpoints;
  proto::CoordinatorStatusResponse status;
  ASSERT_TRUE(Eventually(
      [&] { return JobStatus(run_dir, &status) && status.master_version() >= 200; },
      std::chrono::seconds(180)))
      << ReadRaw(running.output);
  ASSERT_NE(status.phase(), proto::JOB_PHASE_SUCCEEDED) << "the job ended before Ctrl-C";

  run->Signal(SIGINT);
  ASSERT_TRUE(run->WaitExit(std::chrono::minutes(2)));
  const std::string first = ReadRaw(running.output);
  EXPECT_TRUE(ExitedWith(run->wait_status(), 130)) << DescribeWaitStatus(run->wait_status())
                                                    << "\n" << first;
  for (const auto& [service, pid] : ServicePids(endpoints)) {
    EXPECT_TRUE(ProcessGone(pid)) << service << " outlived the launcher";
  }
  const nlohmann::json stopped = nlohmann::json::parse(ReadRaw(run_dir + "/summary.json"));
  EXPECT_EQ(stopped["outcome"], "Interrupted") << stopped.dump(2);
  const uint64_t stopped_version = stopped["version"];
  EXPECT_GE(stopped_version, 200u);
  std::unique_ptr<ParameterStore> store;
  Status s = ReadCheckpoint(stopped["checkpoint"].get<std::string>(), &store, nullptr);
  ASSERT_TRUE(s.ok()) << s.ToString() << "\n" << first;
  EXPECT_EQ(store->version(), stopped_version);

  // --resume continues from the checkpoint and the coordinator's state.
  std::string second;
  const int resumed = RunGaptrain({"run", "-f", job_file, "--run-dir", run_dir, "--resume"},
                                  &second, std::chrono::seconds(600));
  EXPECT_TRUE(ExitedWith(resumed, 0)) << second;
  const nlohmann::json finished = nlohmann::json::parse(ReadRaw(run_dir + "/summary.json"));
  EXPECT_EQ(finished["outcome"], "Succeeded") << finished.dump(2);
  EXPECT_GT(finished["version"].get<uint64_t>(), stopped_version);
  EXPECT_GE(finished["accuracy"].get<double>(), 0.95) << finished.dump(2);
  EXPECT_NE(ReadRaw(run_dir + "/logs/master.log").find("restored"), std::string::npos);
}

TEST(RunE2eTest, SyncWithABackupWorkerTrainsTheMlp) {
  const std::string dir = TestTempDir("sync");
  E2eJob job = SmallJob("mnist-sync");
  job.mode = "sync";
  job.replicas = 3;
  job.backup_workers = 1;
  job.epochs = 2;
  job.learning_rate = 0.1;
  const std::string job_file = WriteJobFile(dir, job);
  std::string out;
  const int status = RunGaptrain({"run", "-f", job_file, "--run-dir", dir + "/run"}, &out,
                                 std::chrono::seconds(600));
  EXPECT_TRUE(ExitedWith(status, 0)) << out;
  const nlohmann::json summary = nlohmann::json::parse(ReadRaw(dir + "/run/summary.json"));
  EXPECT_EQ(summary["outcome"], "Succeeded") << summary.dump(2);
  EXPECT_GE(summary["accuracy"].get<double>(), 0.95) << summary.dump(2);
  // A step averages the first (members - 1) gradients: at most 2 of the 3
  // (the backup's late one is discarded, not accepted); fewer while a
  // trainer is still starting or waits for an epoch's last tasks.
  const double steps = summary["version"].get<double>();
  const double pushes = summary["pushesAccepted"].get<double>();
  EXPECT_LE(pushes / steps, 2.0 + 1e-9) << summary.dump(2);
  EXPECT_GT(pushes / steps, 1.1) << summary.dump(2);
  EXPECT_EQ(summary["meanGap"], nullptr) << "sync mode computes no Gap";
}

// spec.master.shards: 2 and 4: θ over two and four master processes, the
// same job as with one. Each shard checkpoints its own part; trainers push and pull
// both at once; the job's accuracy is one master's (async training orders
// pushes differently from run to run, so within a point, not to the bit);
// `gaptrain export` joins the shards' checkpoints into a LeNet-5 that
// loads strictly in plain PyTorch and scores what the job reported.
TEST(RunE2eTest, TwoAndFourMasterShardsTrainLenet5AsOneMasterDoes) {
  std::map<uint32_t, double> accuracy;
  for (uint32_t shards : {1u, 2u, 4u}) {
    SCOPED_TRACE("shards " + std::to_string(shards));
    const std::string dir = TestTempDir("shards-" + std::to_string(shards));
    E2eJob job = SmallJob("mnist-shards");
    job.model = "lenet5";
    job.master_shards = shards;
    job.epochs = 1;
    job.learning_rate = 0.03;
    const std::string job_file = WriteJobFile(dir, job);
    std::string out;
    const int status = RunGaptrain({"run", "-f", job_file, "--run-dir", dir + "/run"}, &out,
                                   std::chrono::seconds(600));
    ASSERT_TRUE(ExitedWith(status, 0)) << out;
    const nlohmann::json summary = nlohmann::json::parse(ReadRaw(dir + "/run/summary.json"));
    ASSERT_EQ(summary["outcome"], "Succeeded") << summary.dump(2);
    accuracy[shards] = summary["accuracy"].get<double>();
    std::printf("FIGURE shards %u: accuracy %.4f, version %.0f\n", shards, accuracy[shards],
                summary["version"].get<double>());
    if (shards != 2) continue;
    EXPECT_NE(out.find("master-1"), std::string::npos) << out;
    // Each shard's final checkpoint holds its part of θ, the parts all of it.
    size_t parameters = 0;
    for (int i = 0; i < 2; ++i) {
      const std::string shard_dir = dir + "/run/checkpoints/shard-" + std::to_string(i);
      const std::vector<uint64_t> versions = VerifyCheckpoints(shard_dir);
      ASSERT_FALSE(versions.empty()) << shard_dir;
      std::unique_ptr<ParameterStore> store;
      CheckpointMeta meta;
      ASSERT_TRUE(
          ReadCheckpoint(CheckpointDirectory(shard_dir, 1).List().back(), &store, &meta).ok());
      EXPECT_EQ(meta.shard.index, static_cast<uint32_t>(i));
      EXPECT_EQ(meta.shard.count, 2u);
      parameters += store->size();
    }
    EXPECT_EQ(parameters, 61706u);  // LeNet-5
    // The export joins them; plain PyTorch scores it as the job did.
    const std::string model = dir + "/model.pt";
    ASSERT_EQ(RunGaptrain({"export", "--run-dir", dir + "/run", "-o", model, "--card",
                           dir + "/model.json"},
                          &out),
              0)
        << out;
    EXPECT_NE(out.find("61706 parameters"), std::string::npos) << out;
    const nlohmann::json card = nlohmann::json::parse(ReadRaw(dir + "/model.json"));
    EXPECT_EQ(card["checkpoints"].size(), 2u) << card.dump(2);
    std::string data;
    ASSERT_TRUE(FindSharedDataDir(&data).ok());
    const PlainPytorchScore scored = ScoreStateDict(model, data + "/mnist");
    ASSERT_EQ(scored.exit_code, 0) << scored.output;
    const double plain = scored.accuracy;
    std::printf("FIGURE shards 2: exported model scores %.4f in plain PyTorch\n", plain);
    EXPECT_NEAR(plain, accuracy[2], 0.003) << scored.output;
  }
  for (uint32_t shards : {2u, 4u}) {
    EXPECT_GE(accuracy[shards], 0.95) << shards;
    EXPECT_NEAR(accuracy[shards], accuracy[1], 0.01) << shards;
  }
}

// spec.workers.autoscale with a Gap bound that never binds: the launcher
// doubles the trainers while each growth adds updates/s, 1 -> 2 -> 4,
// starting trainer-1, then trainer-2 and trainer-3. The second growth
// needs 2 trainers to give more updates/s than 1 did, which the machine
// decides, not the launcher: minGain 0 keeps a growth unless it lowered
// them (2 trainers measured 1.0-1.65 times one on a 2-core machine busy
// with other work, often under the default minGain's 1.5; services/autoscale
// tests the thresholds), batches of 256 make the trainers' compute, not
// the master, the bottleneck, and 2 s windows average out bursts of other
// work. Even so, a machine loaded by other work (load average 5-8 on 2
// cores) inverted the comparison in about 1 run of 5; this test is
// exclusive. Growing to 4 on 2 cores may well not pay: the launcher then
// stops the highest-numbered trainers with SIGTERM, and they leave
// gracefully. 25-35 s.
// The first decision is the deterministic one: from two trainers with room
// under maxGap it doubles to maxReplicas, whatever the rates measured (a
// later one compares rates, which a loaded machine makes noisy: a growth
// whose rate fell may be undone, which the assertions below allow).
TEST(RunE2eTest, AutoscaleGrowsTheTrainersFromTwoToFour) {
  const std::string dir = TestTempDir("autoscale");
  E2eJob job;
  job.name = "mnist-autoscale";
  job.replicas = 2;
  job.min_replicas = 1;
  job.max_replicas = 4;
  job.autoscale = "{enabled: true, maxGap: 1000, minGain: 0, intervalSeconds: 2}";
  job.batch_size = 256;
  job.epochs = 3;            // 20-35 s: the fourth trainer registers after about 11
  job.eval_every = 1000000;  // the final evaluation only: no evaluation in a window
  job.checkpoint_seconds = 3600;
  std::string out;
  const int status = RunGaptrain({"run", "-f", WriteJobFile(dir, job), "--run-dir", dir + "/run"},
                                 &out, std::chrono::seconds(300));
  std::printf("---- gaptrain run's output\n%s\n", out.c_str());  // for the test log
  EXPECT_TRUE(ExitedWith(status, 0)) << out;
  const nlohmann::json summary = nlohmann::json::parse(ReadRaw(dir + "/run/summary.json"));
  EXPECT_EQ(summary["outcome"], "Succeeded") << summary.dump(2);
  ASSERT_TRUE(summary["accuracy"].is_number()) << summary.dump(2);
  // It learned: 3 epochs of batches of 256 (703 updates, short of
  // converging) on 2-4 trainers whose number changes twice, as fast as the
  // machine lets four trainers push: 90.78-97.41% measured over sessions
  // (a rate of 0.06 gave 85.58-96.63%: no steadier). The bound is that
  // it learned (an untrained LeNet-5 scores about 10%), not how well:
  // accuracy is the other tests' subject, growth this one's.
  EXPECT_GE(summary["accuracy"].get<double>(), 0.85) << summary.dump(2);

  const nlohmann::json& autoscale = summary["autoscale"];
  ASSERT_TRUE(autoscale.is_object()) << summary.dump(2);
  const nlohmann::json& decisions = autoscale["decisions"];
  ASSERT_GE(decisions.size(), 1u) << summary.dump(2);
  EXPECT_EQ(decisions[0]["reason"], "ScaledUp") << summary.dump(2);
  EXPECT_EQ(decisions[0]["from"], 2) << summary.dump(2);
  EXPECT_EQ(decisions[0]["to"], 4) << summary.dump(2);
  // The coordinator listed all 4 at once.
  EXPECT_EQ(autoscale["maxLiveTrainers"], 4) << summary.dump(2);
  EXPECT_GE(summary["workers"]["joined"].get<uint64_t>(), 5u) << summary.dump(2);  // + evaluator

  // Trainers stopped by a shrink left as preempted workers do: no failure,
  // no lease expiry, no restart.
  uint64_t stopped = 0;
  for (const nlohmann::json& d : decisions) {
    if (d["reason"] == "ScaledDown") stopped += d["from"].get<uint64_t>() - d["to"].get<uint64_t>();
  }
  EXPECT_EQ(summary["workers"]["failed"], 0) << summary.dump(2);
  EXPECT_EQ(summary["workers"]["leaseExpiries"], 0) << summary.dump(2);
  EXPECT_LE(summary["workers"]["preempted"].get<uint64_t>(), stopped) << summary.dump(2);
  EXPECT_EQ(summary["workerRestarts"], 0) << summary.dump(2);

  // What the user saw: each change as it happened, N in the progress line,
  // the decisions in the summary.
  EXPECT_NE(out.find("\nautoscale: ScaledUp: "), std::string::npos) << out;
  EXPECT_NE(out.find(": 2 -> 4 trainers\n"), std::string::npos) << out;
  EXPECT_NE(out.find("(autoscale 1-4)"), std::string::npos) << out;
  EXPECT_NE(out.find("  autoscale: 2 -> "), std::string::npos) << out;
  EXPECT_EQ(out.find("restarted trainer"), std::string::npos) << out;
}

TEST(RunE2eTest, AKilledLauncherTakesItsChildrenAlong) {
  const std::string dir = TestTempDir("launcher-killed");
  RunningJob running;
  ASSERT_NO_FATAL_FAILURE(
      StartRun(dir, WriteJobFile(dir, SmallJob("mnist-orphans")), "gaptrain.out", &running));
  Process* run = running.launcher.get();
  const std::map<std::string, pid_t> pids = ServicePids(running.endpoints);
  ASSERT_EQ(pids.size(), 5u) << running.endpoints.dump();

  run->Signal(SIGKILL);
  ASSERT_TRUE(run->WaitExit(std::chrono::seconds(10)));
  for (const auto& [service, pid] : pids) {
    EXPECT_TRUE(Eventually([pid = pid] { return ProcessGone(pid); }, std::chrono::seconds(10)))
        << service << " (pid " << pid << ") outlived a SIGKILLed launcher";
  }
}

}  // namespace
}  // namespace gaptrain
