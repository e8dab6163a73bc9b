#include "services/coordinator/membership_feed.h"

#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>

namespace gaptrain {
namespace {

using std::chrono::milliseconds;

// A master stand-in that fails its first `failures` calls.
class FakeMaster {
 public:
  explicit FakeMaster(int failures) : failures_(failures) {}

  Status Send(const std::vector<WorkerId>& members) {
    std::lock_guard<std::mutex> lock(mu_);
    ++calls_;
    changed_.notify_all();
    if (failures_ > 0) {
      --failures_;
      return Status::Unavailable("connection refused");
    }
    members_ = members;
    return Status::OK();
  }
  void Health(bool ok, const std::string& error) {
    std::lock_guard<std::mutex> lock(mu_);
    health_.push_back(ok);
    if (!ok) last_error_ = error;
  }
  bool WaitForCalls(int n) {
    std::unique_lock<std::mutex> lock(mu_);
    return changed_.wait_for(lock, std::chrono::seconds(10), [&] { return calls_ >= n; });
  }
  std::vector<WorkerId> members() {
    std::lock_guard<std::mutex> lock(mu_);
    return members_;
  }
  std::vector<bool> health() {
    std::lock_guard<std::mutex> lock(mu_);
    return health_;
  }
  std::string last_error() {
    std::lock_guard<std::mutex> lock(mu_);
    return last_error_;
  }

 private:
  std::mutex mu_;
  std::condition_variable changed_;
  int failures_;
  int calls_ = 0;
  std::vector<WorkerId> members_;
  std::vector<bool> health_;
  std::string last_error_;
};

MembershipFeed::Options Fast(milliseconds resend = milliseconds(60000)) {
  MembershipFeed::Options o;
  o.initial_backoff = milliseconds(1);
  o.max_backoff = milliseconds(4);
  o.resend = resend;
  return o;
}

TEST(MembershipFeedTest, RetriesUntilTheMasterTakesTheNewestSet) {
  FakeMaster master(3);
  MembershipFeed feed([&](const auto& m) { return master.Send(m); },
                      [&](bool ok, const std::string& e) { master.Health(ok, e); }, Fast());
  feed.Offer(1, {1});
  feed.Offer(2, {1, 2});
  ASSERT_TRUE(feed.WaitAcknowledged(2, milliseconds(10000)));
  EXPECT_EQ(master.members(), (std::vector<WorkerId>{1, 2}));
  const std::vector<bool> health = master.health();
  ASSERT_GE(health.size(), 4u);
  EXPECT_FALSE(health[0]);
  EXPECT_FALSE(health[2]);
  EXPECT_TRUE(health.back());
  EXPECT_EQ(master.last_error(), "connection refused");
}

TEST(MembershipFeedTest, AnOlderGenerationIsIgnored) {
  FakeMaster master(0);
  MembershipFeed feed([&](const auto& m) { return master.Send(m); }, nullptr, Fast());
  feed.Offer(5, {1, 2, 3});
  feed.Offer(4, {1});  // arrived late
  ASSERT_TRUE(feed.WaitAcknowledged(5, milliseconds(10000)));
  feed.Stop();
  EXPECT_EQ(master.members(), (std::vector<WorkerId>{1, 2, 3}));
}

TEST(MembershipFeedTest, ResendsTheSetPeriodically) {
  FakeMaster master(0);
  MembershipFeed feed([&](const auto& m) { return master.Send(m); }, nullptr,
                      Fast(milliseconds(1)));
  feed.Offer(0, {});  // an empty set is a set too
  EXPECT_TRUE(master.WaitForCalls(5));
}

TEST(MembershipFeedTest, NothingIsSentBeforeTheFirstOffer) {
  FakeMaster master(0);
  {
    MembershipFeed feed([&](const auto& m) { return master.Send(m); }, nullptr, Fast());
    EXPECT_FALSE(feed.WaitAcknowledged(0, milliseconds(20)));
  }
  EXPECT_TRUE(master.health().empty());
}

// The coordinator runs one feed per master shard: a shard that is down
// holds up no other, and each converges on its own once it answers.
TEST(MembershipFeedTest, OneFeedPerShardConvergesIndependently) {
  FakeMaster up(0);
  FakeMaster down(1000000);
  MembershipFeed feed0([&](const auto& m) { return up.Send(m); },
                       [&](bool ok, const std::string& e) { up.Health(ok, e); }, Fast());
  MembershipFeed feed1([&](const auto& m) { return down.Send(m); },
                       [&](bool ok, const std::string& e) { down.Health(ok, e); }, Fast());
  for (MembershipFeed* feed : {&feed0, &feed1}) feed->Offer(3, {1, 2});
  ASSERT_TRUE(feed0.WaitAcknowledged(3, milliseconds(10000)));
  EXPECT_EQ(up.members(), (std::vector<WorkerId>{1, 2}));
  ASSERT_TRUE(down.WaitForCalls(3));
  EXPECT_FALSE(feed1.WaitAcknowledged(3, milliseconds(0)));
  EXPECT_TRUE(down.members().empty());
  const std::vector<bool> health = down.health();
  ASSERT_FALSE(health.empty());
  EXPECT_FALSE(health.back());
  for (bool ok : up.health()) EXPECT_TRUE(ok);
  // A newer set reaches the shard that is up while the other still fails.
  for (MembershipFeed* feed : {&feed0, &feed1}) feed->Offer(4, {1, 2, 5});
  ASSERT_TRUE(feed0.WaitAcknowledged(4, milliseconds(10000)));
  EXPECT_EQ(up.members(), (std::vector<WorkerId>{1, 2, 5}));
}

}  // namespace
}  // namespace gaptrain
