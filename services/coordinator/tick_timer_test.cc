#include "services/coordinator/tick_timer.h"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <mutex>

namespace gaptrain {
namespace {

TEST(TickTimerTest, TicksRepeatedlyUntilStopped) {
  std::mutex mu;
  std::condition_variable cv;
  int ticks = 0;
  std::atomic<bool> inside{false};
  std::atomic<bool> overlapped{false};
  TickTimer timer(std::chrono::milliseconds(1), [&] {
    if (inside.exchange(true)) overlapped = true;
    {
      std::lock_guard<std::mutex> lock(mu);
      ++ticks;
    }
    cv.notify_all();
    inside = false;
  });
  timer.Start();
  {
    std::unique_lock<std::mutex> lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(10), [&] { return ticks >= 5; }));
  }
  timer.Stop();
  int after_stop;
  {
    std::lock_guard<std::mutex> lock(mu);
    after_stop = ticks;
  }
  timer.Stop();  // idempotent
  EXPECT_FALSE(inside.load());
  EXPECT_FALSE(overlapped.load());
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_EQ(ticks, after_stop);  // Stop joined: no tick runs after it
}

TEST(TickTimerTest, StopWithoutStartAndDestructionAreSafe) {
  int ticks = 0;
  {
    TickTimer timer(std::chrono::milliseconds(1), [&] { ++ticks; });
    timer.Stop();
  }
  {
    TickTimer timer(std::chrono::hours(1), [&] { ++ticks; });
    timer.Start();
  }  // the destructor stops a timer that never fired
  EXPECT_EQ(ticks, 0);
}

}  // namespace
}  // namespace gaptrain
