#include "services/worker/stop_flag.h"

#include <gtest/gtest.h>

#include <chrono>

namespace gaptrain {
namespace {

using Clock = StopFlag::Clock;

double SecondsFrom(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

TEST(StopFlagTest, LeavingGetsASecondWhateverTheGracePeriod) {
  StopFlag stop;
  stop.Stop(StopReason::kPreempted);
  const Clock::time_point before = Clock::now();
  const Clock::time_point deadline = LeaveDeadline(stop, /*grace_seconds=*/25);
  const Clock::time_point after = Clock::now();
  // kLeaveSeconds from the call, not the 24 s left of the grace period.
  EXPECT_GE(SecondsFrom(before, deadline), kLeaveSeconds);
  EXPECT_LE(SecondsFrom(after, deadline), kLeaveSeconds);
}

TEST(StopFlagTest, AShortGracePeriodEndsLeavingSooner) {
  StopFlag stop;
  stop.Stop(StopReason::kPreempted);
  // A 1 s grace period less its tenth ends 0.9 s after the stop, before
  // the second to leave would (unless this thread slept 0.9 s meanwhile).
  const Clock::time_point deadline = LeaveDeadline(stop, /*grace_seconds=*/1.0);
  EXPECT_NEAR(SecondsFrom(stop.stop_time(), deadline), 0.9, 1e-6);
}

TEST(StopFlagTest, ThePastIsNow) {
  StopFlag stop;
  stop.Stop(StopReason::kPreempted);
  const Clock::time_point before = Clock::now();
  EXPECT_GE(LeaveDeadline(stop, /*grace_seconds=*/0), before);
}

}  // namespace
}  // namespace gaptrain
