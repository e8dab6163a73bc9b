#include "services/worker/shard_calls.h"

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

namespace gaptrain {
namespace {

TEST(ShardCallsTest, EveryShardOnceShardZeroOnTheCaller) {
  ShardCalls calls(4);
  EXPECT_EQ(calls.shards(), 4u);
  for (int round = 0; round < 200; ++round) {
    std::vector<int> ran(4, 0);
    std::thread::id zero;
    calls.Run([&](size_t shard) {
      ++ran[shard];  // each index is touched by its own call only
      if (shard == 0) zero = std::this_thread::get_id();
    });
    EXPECT_EQ(ran, std::vector<int>(4, 1)) << "round " << round;
    EXPECT_EQ(zero, std::this_thread::get_id());
  }
}

TEST(ShardCallsTest, CallsRunAtOnce) {
  // Each call waits until all have started: it returns only if they run
  // at the same time (a Run that called them one by one would hang, so
  // the barrier gives up after a while and the test fails instead).
  ShardCalls calls(3);
  std::mutex mu;
  std::condition_variable all_in;
  int in = 0;
  std::atomic<int> met{0};
  calls.Run([&](size_t) {
    std::unique_lock<std::mutex> lock(mu);
    ++in;
    all_in.notify_all();
    if (all_in.wait_for(lock, std::chrono::seconds(10), [&] { return in == 3; })) ++met;
  });
  EXPECT_EQ(met.load(), 3);
}

TEST(ShardCallsTest, OneShardMakesNoThread) {
  ShardCalls calls(1);
  std::set<std::thread::id> threads;
  calls.Run([&](size_t shard) {
    EXPECT_EQ(shard, 0u);
    threads.insert(std::this_thread::get_id());
  });
  EXPECT_EQ(threads, std::set<std::thread::id>{std::this_thread::get_id()});
}

}  // namespace
}  // namespace gaptrain
