#include "operator/trainingjob/gang_release.h"

#include <gtest/gtest.h>

namespace gaptrain {
namespace trainingjob {
namespace {

using Clock = std::chrono::system_clock;
using std::chrono::seconds;

const Clock::time_point kT0 = Clock::time_point(seconds(1'800'000'000));

// A job that keeps waiting, holding pods: waits out the timeout, releases,
// holds off for the backoff (the timeout and its jitter), waits anew.
TEST(GangReleaseTest, AJobWaitingTooLongReleasesThenWaitsAgainAfterItsBackoff) {
  GangStatus s;
  GangDecision d = DecideGangRelease(600, kT0, true, true, 0.5, s);
  EXPECT_FALSE(d.release);
  EXPECT_FALSE(d.hold_trainers);
  ASSERT_TRUE(d.status.waiting_since.has_value());
  EXPECT_EQ(*d.status.waiting_since, kT0);
  EXPECT_EQ(d.wake_after, Clock::duration(seconds(600)));

  d = DecideGangRelease(600, kT0 + seconds(599), true, true, 0.5, d.status);
  EXPECT_FALSE(d.release);
  EXPECT_EQ(d.wake_after, Clock::duration(seconds(1)));

  d = DecideGangRelease(600, kT0 + seconds(600), true, true, 0.5, d.status);
  EXPECT_TRUE(d.release);
  EXPECT_TRUE(d.hold_trainers);
  EXPECT_EQ(d.backoff, seconds(750));  // 600 and a quarter: jitter 0.5 stretches by up to half
  EXPECT_EQ(d.status.releases, 1u);
  EXPECT_EQ(d.status.released_at, kT0 + seconds(600));
  EXPECT_FALSE(d.status.waiting_since.has_value());

  // Backing off: no trainers made, whatever is observed; nothing released.
  const GangStatus released = d.status;
  d = DecideGangRelease(600, kT0 + seconds(1000), true, false, 0.5, released);
  EXPECT_FALSE(d.release);
  EXPECT_TRUE(d.hold_trainers);
  EXPECT_EQ(d.wake_after, Clock::duration(seconds(350)));
  EXPECT_EQ(d.status.ToJson(), released.ToJson());  // nothing to write

  // After it: made again, waiting from now.
  d = DecideGangRelease(600, kT0 + seconds(1350), true, false, 0.5, released);
  EXPECT_FALSE(d.hold_trainers);
  EXPECT_EQ(d.status.waiting_since, kT0 + seconds(1350));
  EXPECT_EQ(d.status.releases, 1u);
}

// Nothing placed yet: nothing to give back, so it waits on; a job with
// enough ready trainers, or without a timeout, is not waiting.
TEST(GangReleaseTest, NothingHeldNothingReleasedAndReadyJobsDoNotWait) {
  GangStatus s;
  GangDecision d = DecideGangRelease(60, kT0, true, false, 0, s);
  d = DecideGangRelease(60, kT0 + seconds(61), true, false, 0, d.status);
  EXPECT_FALSE(d.release);
  EXPECT_FALSE(d.hold_trainers);

  d = DecideGangRelease(60, kT0 + seconds(62), false, true, 0, d.status);
  EXPECT_FALSE(d.status.waiting_since.has_value());
  EXPECT_TRUE(d.status.ToJson().empty());

  d = DecideGangRelease(0, kT0, true, true, 0, s);
  EXPECT_FALSE(d.release);
  EXPECT_FALSE(d.wake_after.has_value());
}

TEST(GangReleaseTest, StatusRoundTripsAndJitterIsTheJobsOwn) {
  GangStatus s;
  s.waiting_since = kT0;
  s.released_at = kT0 - seconds(30);
  s.releases = 2;
  const nlohmann::json j = s.ToJson();
  EXPECT_EQ(j["waitingSince"], "2027-01-15T08:00:00Z");
  const GangStatus back = GangStatus::FromJson(j);
  EXPECT_EQ(back.waiting_since, s.waiting_since);
  EXPECT_EQ(back.released_at, s.released_at);
  EXPECT_EQ(back.releases, 2u);
  EXPECT_EQ(GangStatus::FromJson(nlohmann::json("junk")).ToJson(), nlohmann::json::object());

  const double a = JitterOf("0d1c6a4e-8f3b-4b1e-9d7a-5c2e4f6a8b90");
  EXPECT_GE(a, 0);
  EXPECT_LT(a, 1);
  EXPECT_EQ(a, JitterOf("0d1c6a4e-8f3b-4b1e-9d7a-5c2e4f6a8b90"));
  EXPECT_NE(a, JitterOf("0d1c6a4e-8f3b-4b1e-9d7a-5c2e4f6a8b91"));
}

}  // namespace
}  // namespace trainingjob
}  // namespace gaptrain
