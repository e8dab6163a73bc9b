#include "services/jobplan/restart_rule.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>

namespace gaptrain {
namespace {

ProcessEnd End(JobProcess process, std::optional<int64_t> exit_code, bool preempted = false) {
  ProcessEnd end;
  end.process = process;
  end.exit_code = exit_code;
  end.preempted = preempted;
  return end;
}

TEST(RestartRuleTest, PreemptionIsReplacedAndNoFailureUnderEveryPolicy) {
  for (const char* policy : {"Always", "OnFailure", "Never", "ExitCode"}) {
    for (JobProcess p : {JobProcess::kMaster, JobProcess::kCoordinator, JobProcess::kEvaluator,
                         JobProcess::kTrainer}) {
      const RestartDecision d = DecideRestart(End(p, 143, /*preempted=*/true), policy);
      EXPECT_TRUE(d.replace) << policy;
      EXPECT_FALSE(d.counts_as_failure) << policy;
    }
  }
}

TEST(RestartRuleTest, MasterAndCoordinatorAreAlwaysReplacedAndCounted) {
  for (const char* policy : {"Always", "OnFailure", "Never", "ExitCode"}) {
    for (JobProcess p : {JobProcess::kMaster, JobProcess::kCoordinator}) {
      const RestartDecision d = DecideRestart(End(p, 1), policy);
      EXPECT_TRUE(d.replace) << policy;
      EXPECT_TRUE(d.counts_as_failure) << policy;
    }
  }
}

TEST(RestartRuleTest, WorkersFollowRestartPolicy) {
  for (JobProcess p : {JobProcess::kTrainer, JobProcess::kEvaluator}) {
    EXPECT_TRUE(DecideRestart(End(p, 1), "OnFailure").replace);
    EXPECT_TRUE(DecideRestart(End(p, 1), "Always").replace);
    const RestartDecision never = DecideRestart(End(p, 137), "Never");
    EXPECT_FALSE(never.replace);
    EXPECT_TRUE(never.counts_as_failure);
    EXPECT_EQ(never.not_replaced_because, "restartPolicy Never");
  }
}

TEST(RestartRuleTest, ExitCodeSeparatesGivingUpFromBeingKilled) {
  for (int64_t code : {1, 3, 127}) {
    const RestartDecision d = DecideRestart(End(JobProcess::kTrainer, code), "ExitCode");
    EXPECT_FALSE(d.replace) << code;
    EXPECT_TRUE(d.counts_as_failure) << code;
    EXPECT_EQ(d.not_replaced_because, "exit code " + std::to_string(code) +
                                          " is permanent under restartPolicy ExitCode (1-127)");
  }
  for (std::optional<int64_t> code : {std::optional<int64_t>(128), std::optional<int64_t>(137),
                                      std::optional<int64_t>(255), std::optional<int64_t>()}) {
    const RestartDecision d = DecideRestart(End(JobProcess::kTrainer, code), "ExitCode");
    EXPECT_TRUE(d.replace) << code.value_or(-1);
    EXPECT_TRUE(d.counts_as_failure);
  }
}

TEST(RestartRuleTest, UnknownPolicyReadsAsTheDefault) {
  EXPECT_TRUE(DecideRestart(End(JobProcess::kTrainer, 2), "").replace);
}

TEST(RestartRuleTest, TheJobFailsPastBackoffLimitOrBelowMinReplicas) {
  RestartLimits limits;
  limits.backoff_limit = 3;
  limits.replicas = 4;
  limits.min_trainers = 2;
  limits.restart_policy = "ExitCode";
  EXPECT_FALSE(FailureAfterLosses(3, 2, limits).has_value());
  const std::optional<LossFailure> spent = FailureAfterLosses(4, 0, limits);
  ASSERT_TRUE(spent.has_value());
  EXPECT_EQ(spent->reason, "BackoffLimitExceeded");
  EXPECT_EQ(spent->message, "4 failures exceed backoffLimit (3)");
  const std::optional<LossFailure> too_few = FailureAfterLosses(3, 3, limits);
  ASSERT_TRUE(too_few.has_value());
  EXPECT_EQ(too_few->reason, "TrainingJobFailed");
  EXPECT_EQ(too_few->message,
            "3 trainers failed permanently (restartPolicy ExitCode): fewer than minReplicas (2) "
            "can run");
  limits.backoff_limit = 0;
  EXPECT_EQ(FailureAfterLosses(1, 0, limits)->reason, "BackoffLimitExceeded");
}

}  // namespace
}  // namespace gaptrain
