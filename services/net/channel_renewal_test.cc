#include "services/net/channel_renewal.h"

#include <gtest/gtest.h>

namespace gaptrain {
namespace {

using std::chrono::milliseconds;
using Clock = ChannelRenewal::Clock;

const Status kDown = Status::Unavailable("failed to connect to all addresses");
const Status kCancelled(Status::Code::kCancelled, "leaving");

TEST(ChannelRenewalTest, RenewsOnceAnIntervalIntoAnOutageAndEveryIntervalAfter) {
  ChannelRenewal r(milliseconds(1000));
  const Clock::time_point t0;
  EXPECT_FALSE(r.Renew(kDown, t0));  // the outage begins
  EXPECT_TRUE(r.failing());
  EXPECT_FALSE(r.Renew(kDown, t0 + milliseconds(300)));
  EXPECT_FALSE(r.Renew(Status(Status::Code::kDeadlineExceeded, "slow"), t0 + milliseconds(999)));
  EXPECT_TRUE(r.Renew(kDown, t0 + milliseconds(1000)));
  // The new channel gets an interval of its own.
  EXPECT_FALSE(r.Renew(kDown, t0 + milliseconds(1500)));
  EXPECT_TRUE(r.Renew(kDown, t0 + milliseconds(2000)));
  EXPECT_FALSE(r.Renew(kDown, t0 + milliseconds(2001)));
}

TEST(ChannelRenewalTest, AnAnswerFromTheServerEndsTheOutage) {
  ChannelRenewal r(milliseconds(1000));
  const Clock::time_point t0;
  EXPECT_FALSE(r.Renew(kDown, t0));
  // NOT_FOUND is an answer: the channel works.
  EXPECT_FALSE(r.Renew(Status::NotFound("not a member"), t0 + milliseconds(900)));
  EXPECT_FALSE(r.failing());
  EXPECT_FALSE(r.Renew(kDown, t0 + milliseconds(1100)));  // a new outage begins
  EXPECT_FALSE(r.Renew(Status::OK(), t0 + milliseconds(2000)));
  EXPECT_FALSE(r.Renew(kDown, t0 + milliseconds(2500)));
  EXPECT_FALSE(r.Renew(kDown, t0 + milliseconds(3000)));
  EXPECT_TRUE(r.Renew(kDown, t0 + milliseconds(3500)));
}

TEST(ChannelRenewalTest, CancelledCallsChangeNothing) {
  ChannelRenewal r(milliseconds(1000));
  const Clock::time_point t0;
  EXPECT_FALSE(r.Renew(kCancelled, t0));
  EXPECT_FALSE(r.failing());
  EXPECT_FALSE(r.Renew(kDown, t0));
  EXPECT_FALSE(r.Renew(kCancelled, t0 + milliseconds(2000)));
  EXPECT_TRUE(r.failing());
  EXPECT_TRUE(r.Renew(kDown, t0 + milliseconds(2000)));
}

}  // namespace
}  // namespace gaptrain
