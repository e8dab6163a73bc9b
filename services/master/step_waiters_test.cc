#include "services/master/step_waiters.h"

#include <gtest/gtest.h>

#include <string>

namespace gaptrain {
namespace {

TEST(StepWaitersTest, ReleasesOnlyThoseWhoseStepIsOut) {
  StepWaiters waiters;
  EXPECT_TRUE(waiters.empty());
  std::string resumed;
  waiters.Add(7, [&] { resumed += "a"; });
  EXPECT_FALSE(waiters.empty());
  waiters.Add(8, [&] { resumed += "b"; });
  waiters.Add(7, [&] { resumed += "c"; });
  waiters.Release(7);  // the version they saw: no step taken yet
  EXPECT_EQ(resumed, "");
  waiters.Release(8);
  EXPECT_EQ(resumed, "ac");  // in the order they came
  EXPECT_EQ(waiters.size(), 1u);
  waiters.Release(8);
  EXPECT_EQ(resumed, "ac");  // each resumed once
  waiters.Release(9);
  EXPECT_EQ(resumed, "acb");
  EXPECT_EQ(waiters.size(), 0u);
  EXPECT_TRUE(waiters.empty());
}

TEST(StepWaitersTest, ATakenBackWaiterIsNeverResumedAndViceVersa) {
  StepWaiters waiters;
  int resumed = 0;
  const uint64_t timed_out = waiters.Add(3, [&] { ++resumed; });
  const uint64_t released = waiters.Add(3, [&] { ++resumed; });
  EXPECT_NE(timed_out, 0u);
  EXPECT_NE(timed_out, released);
  EXPECT_TRUE(waiters.Remove(timed_out));
  EXPECT_FALSE(waiters.Remove(timed_out));
  waiters.Release(4);
  EXPECT_EQ(resumed, 1);
  EXPECT_FALSE(waiters.Remove(released));  // Release took it first
  EXPECT_FALSE(waiters.Remove(0));
}

TEST(StepWaitersTest, AResumeMayAddAnotherWaiter) {
  StepWaiters waiters;
  int resumed = 0;
  waiters.Add(1, [&] {
    ++resumed;
    waiters.Add(2, [&] { ++resumed; });  // runs outside the lock
  });
  waiters.Release(2);
  EXPECT_EQ(resumed, 1);
  waiters.Release(3);
  EXPECT_EQ(resumed, 2);
}

}  // namespace
}  // namespace gaptrain
