// `gaptrain run --chaos` end to end: while 4 trainers train LeNet-5 on the
// real MNIST with Gap-Aware, the launcher kills a random trainer every few
// seconds, SIGTERM and SIGKILL in turn, and restarts it; it also SIGKILLs
// the master once, which comes back from its newest checkpoint. The job
// still completes at 97.5% or better, every checkpoint on disk verifies,
// and the coordinator's counters match the kills: each SIGTERM is a
// preemption (the worker left cleanly), each SIGKILL a lease expiry.

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <memory>
#include <string>

#include "services/common/process.h"
#include "services/engine/parameter_store.h"
#include "services/master/checkpoint.h"
#include "services/testing/testdata_dir.h"
#include "tests/gaptrain_run_fixture.h"

namespace gaptrain {
namespace {

TEST(ChaosE2eTest, Lenet5OnMnistSurvivesKilledWorkersAndAKilledMaster) {
  std::string data;
  Status found = FindSharedDataDir(&data);
  ASSERT_TRUE(found.ok()) << found.ToString();
  const std::string dir = TestTempDir("chaos");
  E2eJob job;
  job.name = "mnist-chaos";
  job.checkpoint_seconds = 4;
  job.lease_seconds = 4;
  const std::string job_file = WriteJobFile(dir, job);
  const std::string run_dir = dir + "/run";
  std::unique_ptr<Process> run = StartGaptrain(
      {"run", "-f", job_file, "--run-dir", run_dir, "--chaos",
       "every=4s,restart=2s,master=14s,seed=7"},
      dir + "/gaptrain.out");
  ASSERT_NE(run, nullptr);
  ASSERT_TRUE(run->WaitExit(std::chrono::minutes(20)));
  const std::string out = ReadWholeFile(dir + "/gaptrain.out");
  ASSERT_TRUE(WIFEXITED(run->wait_status()) && WEXITSTATUS(run->wait_status()) == 0)
      << DescribeWaitStatus(run->wait_status()) << "\n" << out;

  std::printf("---- gaptrain run's output\n%s\n", out.c_str());  // for the test log
  const nlohmann::json summary = nlohmann::json::parse(ReadWholeFile(run_dir + "/summary.json"));
  EXPECT_EQ(summary["outcome"], "Succeeded") << summary.dump(2);
  EXPECT_GE(summary["accuracy"].get<double>(), 0.975) << summary.dump(2);

  // The faults happened, and the coordinator saw each one for what it was.
  const uint64_t sigterms = summary["chaos"]["trainerSigterms"];
  const uint64_t sigkills = summary["chaos"]["trainerSigkills"];
  EXPECT_GE(sigterms, 1u) << out;
  EXPECT_GE(sigkills, 1u) << out;
  EXPECT_EQ(summary["chaos"]["masterRestarts"], 1) << out;
  EXPECT_EQ(summary["workers"]["preempted"].get<uint64_t>(), sigterms) << summary.dump(2);
  EXPECT_EQ(summary["workers"]["leaseExpiries"].get<uint64_t>(), sigkills)
      << summary.dump(2) << "\ncoordinator log:\n" << ReadWholeFile(run_dir + "/logs/coordinator.log");
  EXPECT_EQ(summary["workers"]["failed"], 0) << summary.dump(2);
  EXPECT_EQ(summary["workerRestarts"], 0) << "a worker crashed:\n" << out;
  EXPECT_NE(ReadWholeFile(run_dir + "/logs/master.log").find("restored"), std::string::npos)
      << "the restarted master did not resume from a checkpoint";

  // No checkpoint lost: every file on disk verifies, and the newest holds
  // the final model.
  CheckpointDirectory checkpoints(run_dir + "/checkpoints", 1);
  const std::vector<std::string> files = checkpoints.List();
  ASSERT_FALSE(files.empty());
  uint64_t newest = 0;
  for (const std::string& path : files) {
    std::unique_ptr<ParameterStore> store;
    Status s = ReadCheckpoint(path, &store, nullptr);
    EXPECT_TRUE(s.ok()) << s.ToString();
    if (s.ok()) newest = std::max(newest, store->version());
  }
  EXPECT_EQ(newest, summary["version"].get<uint64_t>());
  EXPECT_EQ(summary["checkpoint"], files.back());
}

}  // namespace
}  // namespace gaptrain
