#include "services/engine/helping_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

namespace gaptrain {
namespace {

TEST(HelpingPoolTest, EveryUnitRunsExactlyOnce) {
  HelpingPool pool;
  for (int helpers : {0, 1, 3}) {
    for (size_t n : {size_t{0}, size_t{1}, size_t{2}, size_t{1000}}) {
      std::vector<std::atomic<int>> calls(n);
      pool.Run(n, helpers, [&](size_t i) { calls[i].fetch_add(1); });
      for (size_t i = 0; i < n; ++i) {
        ASSERT_EQ(calls[i].load(), 1) << "unit " << i << " of " << n << ", helpers " << helpers;
      }
    }
  }
  EXPECT_EQ(pool.num_threads(), 3);
}

TEST(HelpingPoolTest, NoHelpersRunsEverythingOnTheCaller) {
  HelpingPool pool;
  const std::thread::id caller = std::this_thread::get_id();
  bool all_on_caller = true;
  pool.Run(100, 0, [&](size_t) {
    all_on_caller = all_on_caller && std::this_thread::get_id() == caller;
  });
  EXPECT_TRUE(all_on_caller);
  EXPECT_EQ(pool.num_threads(), 0);
}

// A helper does take units: unit 0 blocks until some other unit has run on
// another thread, which can only be a helper (the caller is inside unit 0
// or has claimed it).
TEST(HelpingPoolTest, AFreeHelperTakesUnits) {
  HelpingPool pool;
  const std::thread::id caller = std::this_thread::get_id();
  std::mutex mu;
  std::condition_variable cv;
  bool helped = false;
  std::atomic<int> on_caller{0};
  pool.Run(64, 1, [&](size_t i) {
    if (std::this_thread::get_id() == caller) {
      on_caller.fetch_add(1);
      if (i == 0) {
        std::unique_lock<std::mutex> lock(mu);
        cv.wait(lock, [&] { return helped; });
      }
      return;
    }
    std::lock_guard<std::mutex> lock(mu);
    helped = true;
    cv.notify_all();
  });
  EXPECT_TRUE(helped);
  EXPECT_LT(on_caller.load(), 64);
}

// The caller never waits for a helper that has not started: with the only
// helper stuck in another caller's unit, a second caller finishes its own
// loop alone.
TEST(HelpingPoolTest, ACallerFinishesAloneWhenHelpersAreBusy) {
  HelpingPool pool;
  std::mutex mu;
  std::condition_variable cv;
  bool helper_inside = false, release = false;
  std::thread first([&] {
    const std::thread::id me = std::this_thread::get_id();
    pool.Run(2, 1, [&](size_t) {
      std::unique_lock<std::mutex> lock(mu);
      if (std::this_thread::get_id() != me) {
        helper_inside = true;
        cv.notify_all();
      }
      // Both units wait for the release, so the helper is surely held.
      cv.wait(lock, [&] { return release; });
    });
  });
  {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return helper_inside; });
  }
  const std::thread::id caller = std::this_thread::get_id();
  std::set<std::thread::id> runners;
  pool.Run(50, 1, [&](size_t) {
    std::lock_guard<std::mutex> lock(mu);
    runners.insert(std::this_thread::get_id());
  });
  EXPECT_EQ(runners, std::set<std::thread::id>{caller});
  {
    std::lock_guard<std::mutex> lock(mu);
    release = true;
  }
  cv.notify_all();
  first.join();
}

TEST(HelpingPoolTest, ConcurrentCallersShareTheThreads) {
  HelpingPool pool;
  constexpr int kCallers = 4;
  constexpr size_t kUnits = 2000;
  std::vector<std::vector<std::atomic<int>>> calls(kCallers);
  for (auto& c : calls) c = std::vector<std::atomic<int>>(kUnits);
  std::vector<std::thread> callers;
  for (int c = 0; c < kCallers; ++c) {
    callers.emplace_back([&, c] {
      for (int round = 0; round < 20; ++round) {
        pool.Run(kUnits, 2, [&](size_t i) { calls[c][i].fetch_add(1); });
      }
    });
  }
  for (std::thread& t : callers) t.join();
  for (int c = 0; c < kCallers; ++c) {
    for (size_t i = 0; i < kUnits; ++i) ASSERT_EQ(calls[c][i].load(), 20);
  }
  EXPECT_EQ(pool.num_threads(), 2);
}

}  // namespace
}  // namespace gaptrain
