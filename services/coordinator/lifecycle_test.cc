#include "services/coordinator/lifecycle.h"

#include <gtest/gtest.h>

namespace gaptrain {
namespace {

TEST(LifecycleTest, StartsPendingWithACreatedCondition) {
  Lifecycle l(100);
  EXPECT_EQ(l.phase(), JobPhase::kPending);
  EXPECT_FALSE(l.finished());
  ASSERT_EQ(l.conditions().size(), 1u);
  EXPECT_EQ(l.current().type, "Pending");
  EXPECT_EQ(l.current().status, "True");
  EXPECT_EQ(l.current().reason, "Created");
  EXPECT_EQ(l.current().last_transition_time, 100);
}

TEST(LifecycleTest, OneConditionPerPhaseOnlyTheCurrentTrue) {
  Lifecycle l(0);
  EXPECT_TRUE(l.MoveTo(JobPhase::kRunning, "EnoughWorkers", "2 of 2", 10));
  EXPECT_FALSE(l.MoveTo(JobPhase::kRunning, "EnoughWorkers", "again", 11));
  EXPECT_TRUE(l.MoveTo(JobPhase::kPending, "NotEnoughWorkers", "1 of 2", 20));
  EXPECT_TRUE(l.MoveTo(JobPhase::kRunning, "EnoughWorkers", "2 of 2", 30));
  ASSERT_EQ(l.conditions().size(), 2u);
  EXPECT_EQ(l.conditions()[0].type, "Pending");
  EXPECT_EQ(l.conditions()[0].status, "False");
  EXPECT_EQ(l.conditions()[0].reason, "NotEnoughWorkers");
  EXPECT_EQ(l.conditions()[0].last_transition_time, 30);
  EXPECT_EQ(l.conditions()[1].type, "Running");
  EXPECT_EQ(l.conditions()[1].status, "True");
  EXPECT_EQ(l.conditions()[1].last_transition_time, 30);
}

TEST(LifecycleTest, TerminalPhasesAreSticky) {
  for (JobPhase end : {JobPhase::kSucceeded, JobPhase::kFailed}) {
    Lifecycle l(0);
    ASSERT_TRUE(l.MoveTo(end, "Reason", "message", 5));
    EXPECT_TRUE(l.finished());
    EXPECT_FALSE(l.MoveTo(JobPhase::kRunning, "EnoughWorkers", "", 6));
    EXPECT_FALSE(l.MoveTo(end == JobPhase::kFailed ? JobPhase::kSucceeded : JobPhase::kFailed,
                          "Other", "", 6));
    EXPECT_EQ(l.phase(), end);
    EXPECT_EQ(l.current().reason, "Reason");
  }
}

TEST(LifecycleTest, RestoreNeedsATrueConditionForThePhase) {
  Lifecycle l(0);
  EXPECT_EQ(l.Restore(JobPhase::kRunning, {{"Pending", "True", "Created", "", 0}}).code(),
            Status::Code::kDataLoss);
  EXPECT_TRUE(l.Restore(JobPhase::kRunning, {{"Pending", "False", "Created", "", 0},
                                             {"Running", "True", "EnoughWorkers", "", 5}})
                  .ok());
  EXPECT_EQ(l.phase(), JobPhase::kRunning);
  EXPECT_EQ(l.current().reason, "EnoughWorkers");
}

}  // namespace
}  // namespace gaptrain
