#include "services/worker/retry.h"

#include <gtest/gtest.h>

#include <thread>

namespace gaptrain {
namespace {

RetryPolicy Fast(int max_attempts = 0) {
  RetryPolicy p;
  p.backoff.initial = std::chrono::milliseconds(1);
  p.backoff.max = std::chrono::milliseconds(2);
  p.max_attempts = max_attempts;
  return p;
}

TEST(RetryTest, TransientCodes) {
  EXPECT_TRUE(IsTransient(Status::Unavailable("down")));
  EXPECT_TRUE(IsTransient(Status::DataLoss("torn stream")));
  EXPECT_TRUE(IsTransient(Status(Status::Code::kDeadlineExceeded, "")));
  EXPECT_FALSE(IsTransient(Status::OK()));
  EXPECT_FALSE(IsTransient(Status::InvalidArgument("bug")));
  EXPECT_FALSE(IsTransient(Status::NotFound("not a member")));
  EXPECT_FALSE(IsTransient(Status::FailedPrecondition("stale")));
  EXPECT_FALSE(IsTransient(Status::Unauthenticated("token")));
}

TEST(RetryTest, RetriesTransientFailuresUntilSuccess) {
  RetryLoop loop(Fast(), 1, nullptr);
  int calls = 0, failures = 0;
  Status s = CallWithRetry(
      &loop, [&] { return ++calls < 4 ? Status::Unavailable("down") : Status::OK(); },
      [&](const Status&) { ++failures; });
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(calls, 4);
  EXPECT_EQ(failures, 3);
  EXPECT_EQ(loop.failures(), 0);  // reset by the success
}

TEST(RetryTest, StopsAtAPermanentErrorOrTheAttemptLimit) {
  RetryLoop loop(Fast(), 1, nullptr);
  int calls = 0;
  Status s = CallWithRetry(&loop, [&] {
    ++calls;
    return Status::InvalidArgument("bad");
  });
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(calls, 1);

  RetryLoop limited(Fast(3), 1, nullptr);
  calls = 0;
  s = CallWithRetry(&limited, [&] {
    ++calls;
    return Status::Unavailable("down");
  });
  EXPECT_EQ(s.code(), Status::Code::kUnavailable);
  EXPECT_EQ(calls, 3);
}

TEST(RetryTest, TheStopFlagEndsALongWait) {
  RetryPolicy slow;
  slow.backoff.initial = std::chrono::milliseconds(60000);
  slow.backoff.max = std::chrono::milliseconds(60000);
  StopFlag stop;
  RetryLoop loop(slow, 1, &stop);
  std::thread stopper([&] { stop.Stop(StopReason::kPreempted); });
  const auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(loop.Wait());
  stopper.join();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
  EXPECT_EQ(stop.reason(), StopReason::kPreempted);
  stop.Stop(StopReason::kJobEnded);  // the first reason wins
  EXPECT_EQ(stop.reason(), StopReason::kPreempted);
}

TEST(RetryTest, TheDeadlineBoundsTheLoop) {
  RetryPolicy slow;
  slow.backoff.initial = std::chrono::milliseconds(60000);
  slow.backoff.max = std::chrono::milliseconds(60000);
  RetryLoop loop(slow, 1, nullptr,
                 std::chrono::steady_clock::now() + std::chrono::milliseconds(50));
  const auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(loop.Wait());
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
}

}  // namespace
}  // namespace gaptrain
