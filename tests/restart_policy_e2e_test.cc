// restartPolicy and backoffLimit under `gaptrain run`, on real processes:
// the cases of tests/restart_cases.h (Python trainers whose first
// incarnation ends after one update, by exit code 3 or SIGKILL). The
// launcher decides with the restart rules the operator uses
// (services/jobplan); operator/operator_e2e_test.cc runs the same cases,
// trainer and manifest on the real control plane and expects the same
// ends.

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "services/testing/testdata_dir.h"
#include "tests/gaptrain_run_fixture.h"
#include "tests/restart_cases.h"

namespace gaptrain {
namespace {

class RestartPolicyE2eTest : public ::testing::TestWithParam<RestartCase> {};

TEST_P(RestartPolicyE2eTest, EndsTheJobAsTheOperatorDoes) {
  const RestartCase& c = GetParam();
  std::string data;
  const Status found = FindSharedDataDir(&data);
  ASSERT_TRUE(found.ok()) << found.ToString();
  // The checkout: python/ is there, with its generated protocol modules.
  std::string workspace;
  const Status checkout = FindWorkspaceDir(&workspace);
  ASSERT_TRUE(checkout.ok()) << checkout.ToString();
  ASSERT_EQ(::access((workspace + "/python/gaptrain/__init__.py").c_str(), R_OK), 0) << workspace;
  ASSERT_EQ(::access("/usr/bin/python3", X_OK), 0);

  const std::string dir = TestTempDir(c.Name());
  std::ofstream(dir + "/trainer.py") << CrashOnceTrainerScript();
  const std::string job_file = dir + "/job.yaml";
  std::ofstream(job_file) << RestartJobYaml(
      c, "restarts", "trainer.py",
      workspace + "/python:" + workspace + "/python/examples:" + workspace + "/examples/python",
      "{format: mnist-idx, path: " + data + "/fashion-mnist, shuffleSeed: 1}");
  std::string out;
  const int status = RunGaptrain({"run", "-f", job_file, "--run-dir", dir + "/run"}, &out,
                                 std::chrono::seconds(300));
  std::printf("---- %s\n%s\n", c.Name().c_str(), out.c_str());
  const nlohmann::json summary =
      nlohmann::json::parse(ReadRaw(dir + "/run/summary.json"), nullptr, false);
  ASSERT_TRUE(summary.is_object()) << out;
  EXPECT_EQ(summary["outcome"], c.outcome) << summary.dump(2);
  EXPECT_EQ(summary["reason"], c.reason) << summary.dump(2);
  EXPECT_NE(summary["message"].get<std::string>().find(c.message), std::string::npos)
      << summary.dump(2);
  const bool succeeded = c.outcome == "Succeeded";
  EXPECT_TRUE(status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == (succeeded ? 0 : 1))
      << out;
  // Each trainer's crash is decided on once.
  for (const std::string trainer : {"trainer-0", "trainer-1"}) {
    const std::string once = trainer + " is not restarted";
    const size_t first = out.find(once);
    EXPECT_TRUE(first == std::string::npos || out.find(once, first + 1) == std::string::npos)
        << out;
  }
  // A crash before registering is said to be one, and decided as any.
  if (c.first_end.rfind("startup", 0) == 0) {
    EXPECT_NE(out.find("during start-up"), std::string::npos) << out;
  }
  // Trained on after the crashes to exactly maxUpdates (the master
  // discards later pushes); a failed job stopped at them.
  if (succeeded) {
    EXPECT_EQ(summary["version"].get<double>(), 150) << summary.dump(2);
  } else {
    EXPECT_LT(summary["version"].get<double>(), 150) << summary.dump(2);
  }
}

INSTANTIATE_TEST_SUITE_P(Policies, RestartPolicyE2eTest, ::testing::ValuesIn(RestartCases()),
                         [](const ::testing::TestParamInfo<RestartCase>& info) {
                           return info.param.Name();
                         });

}  // namespace
}  // namespace gaptrain
