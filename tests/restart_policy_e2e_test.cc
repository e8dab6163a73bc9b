// restartPolicy and backoffLimit under `gaptrain run`, on real processes:
// Python trainers (the user's own loop, gaptrain.Trainer) whose first
// incarnation on each host ends after its first update, by an exit code
// or by SIGKILL. The launcher decides with the restart rules the operator
// uses (services/jobplan): the same manifest ends the same way locally and
// on a cluster (operator/trainingjob/reconcile_test.cc runs these cases
// through the operator's reconcile).

#include <gtest/gtest.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "services/testing/testdata_dir.h"
#include "tests/gaptrain_run_fixture.h"

namespace gaptrain {
namespace {

// The trainer: builtin mlp's layout (python/examples/fashion_mnist_mlp.py),
// Fashion-MNIST, the user's own loop. argv[1] is how its first incarnation
// on a host ends: an exit code, or "kill" for SIGKILL (exit code 137, as a
// kubelet reports it). A marker file per host remembers the incarnation.
constexpr char kTrainerScript[] = R"(import os, signal, sys
from torch import nn
import gaptrain
from dataset import FashionMNIST
from fashion_mnist_mlp import MLP

how = sys.argv[1]
marker = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                      "crashed-" + os.environ["GAPTRAIN_HOST_NAME"])
first = not os.path.exists(marker)
open(marker, "a").close()
options = gaptrain.parse_options([])
model = MLP()
loss_fn = nn.CrossEntropyLoss()
with gaptrain.Trainer(model, FashionMNIST(options.data_path, train=True), options=options) as t:
    for inputs, targets in t.batches():
        loss = loss_fn(model(inputs), targets)
        loss.backward()
        t.step(loss)
        if first:
            if how == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            os._exit(int(how))
)";

// The workspace (the runfile README.md links into it): python/ is there,
// with its generated protocol modules.
std::string Workspace() {
  char buf[PATH_MAX];
  if (::realpath("README.md", buf) == nullptr) return "";
  const std::string path = buf;
  return path.substr(0, path.rfind('/'));
}

struct Case {
  const char* policy;
  const char* first_end;  // the trainers' first incarnation: exit code or "kill"
  int backoff_limit;
  const char* outcome;   // summary.json's
  const char* reason;    // summary.json's
  const char* message;   // part of summary.json's message
};

class RestartPolicyE2eTest : public ::testing::TestWithParam<Case> {};

TEST_P(RestartPolicyE2eTest, EndsTheJobAsTheOperatorWould) {
  const Case& c = GetParam();
  std::string data;
  const Status found = FindSharedDataDir(&data);
  ASSERT_TRUE(found.ok()) << found.ToString();
  const std::string workspace = Workspace();
  ASSERT_EQ(::access((workspace + "/python/gaptrain/__init__.py").c_str(), R_OK), 0) << workspace;
  ASSERT_EQ(::access("/usr/bin/python3", X_OK), 0);

  const std::string dir = TestTempDir(std::string(c.policy) + "-" + c.first_end + "-" +
                                      std::to_string(c.backoff_limit));
  std::ofstream(dir + "/trainer.py") << kTrainerScript;
  const std::string job_file = dir + "/job.yaml";
  std::ofstream(job_file)
      << "apiVersion: gaptrain.io/v1alpha1\n"
         "kind: TrainingJob\n"
         "metadata: {name: restarts}\n"
         "spec:\n"
         "  model: {builtin: mlp}\n"
         "  data: {format: mnist-idx, path: " << data << "/fashion-mnist, shuffleSeed: 1}\n"
         "  training:\n"
         "    batchSize: 64\n"
         "    maxUpdates: 150\n"
         "    evalEveryUpdates: 100000\n"
         "    optimizer: {learningRate: 0.05, momentum: 0.9}\n"
         "    staleness: {rule: gap-aware}\n"
         "  runPolicy: {backoffLimit: " << c.backoff_limit << "}\n"
         "  workers:\n"
         "    replicas: 2\n"
         "    minReplicas: 1\n"
         "    restartPolicy: " << c.policy << "\n"
         "    template:\n"
         "      spec:\n"
         "        containers:\n"
         "        - command: [/usr/bin/python3, trainer.py, '" << c.first_end << "']\n"
         "          env:\n"
         "          - {name: PYTHONPATH, value: '" << workspace << "/python:" << workspace
      << "/python/examples:" << workspace << "/examples/python'}\n"
         "  coordinator: {leaseSeconds: 3}\n";
  std::string out;
  const int status = RunGaptrain({"run", "-f", job_file, "--run-dir", dir + "/run"}, &out,
                                 std::chrono::seconds(300));
  std::printf("---- %s, first incarnation %s, backoffLimit %d\n%s\n", c.policy, c.first_end,
              c.backoff_limit, out.c_str());
  const nlohmann::json summary =
      nlohmann::json::parse(ReadRaw(dir + "/run/summary.json"), nullptr, false);
  ASSERT_TRUE(summary.is_object()) << out;
  EXPECT_EQ(summary["outcome"], c.outcome) << summary.dump(2);
  EXPECT_EQ(summary["reason"], c.reason) << summary.dump(2);
  EXPECT_NE(summary["message"].get<std::string>().find(c.message), std::string::npos)
      << summary.dump(2);
  const bool succeeded = std::string(c.outcome) == "Succeeded";
  EXPECT_TRUE(status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == (succeeded ? 0 : 1))
      << out;
  // Each trainer's crash is decided on once.
  for (const std::string trainer : {"trainer-0", "trainer-1"}) {
    const std::string once = trainer + " is not restarted";
    const size_t first = out.find(once);
    EXPECT_TRUE(first == std::string::npos || out.find(once, first + 1) == std::string::npos)
        << out;
  }
  // Trained on after the crashes to exactly maxUpdates (the master
  // discards later pushes); a failed job stopped at them.
  if (succeeded) {
    EXPECT_EQ(summary["version"].get<double>(), 150) << summary.dump(2);
  } else {
    EXPECT_LT(summary["version"].get<double>(), 150) << summary.dump(2);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Policies, RestartPolicyE2eTest,
    ::testing::Values(
        // Both trainers crash once and come back; 2 failures within 3.
        Case{"OnFailure", "3", 3, "Succeeded", "MaxUpdatesReached", ""},
        // The same 2 failures past backoffLimit 1.
        Case{"OnFailure", "3", 1, "Failed", "BackoffLimitExceeded",
             "2 failures exceed backoffLimit (1)"},
        // Exit code 3: the program gave up; neither comes back.
        Case{"ExitCode", "3", 3, "Failed", "TrainingJobFailed",
             "2 trainers failed permanently (restartPolicy ExitCode): fewer than minReplicas (1) "
             "can run"},
        // SIGKILL (137): retryable under ExitCode.
        Case{"ExitCode", "kill", 3, "Succeeded", "MaxUpdatesReached", ""},
        Case{"Never", "kill", 3, "Failed", "TrainingJobFailed",
             "2 trainers failed permanently (restartPolicy Never)"}),
    [](const ::testing::TestParamInfo<Case>& info) {
      return std::string(info.param.policy) + "_" +
             (std::string(info.param.first_end) == "kill" ? "Killed" : "Exit3") +
             "_BackoffLimit" + std::to_string(info.param.backoff_limit);
    });

}  // namespace
}  // namespace gaptrain
