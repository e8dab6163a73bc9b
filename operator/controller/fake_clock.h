// FakeClock: a Clock for tests that moves only when the test calls
// Advance(), waking every thread waiting on it whose deadline has come.
// With it, tests of delays, backoff and lease expiry run in microseconds and
// never depend on the machine's speed.
//
// What callers may rely on:
//   - Now() and WallNow() start at fixed points (WallNow: 2026-11-23T06:00:00Z)
//     and move together, only by Advance().
//   - After Advance() returns, every WaitUntil whose deadline has passed has
//     been woken (its caller re-checks its condition under its own lock).
//   - WaitForWaiters(n, timeout) lets a test wait (in real time, bounded)
//     until n threads block in WaitUntil, i.e. until the code under test has
//     reached its next timer, before advancing.
//   - The mutex and condition variable a thread waits with must outlive any
//     Advance() that runs while it waits (as they do when they belong to the
//     object under test).

#ifndef GAPTRAIN_OPERATOR_CONTROLLER_FAKE_CLOCK_H_
#define GAPTRAIN_OPERATOR_CONTROLLER_FAKE_CLOCK_H_

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>

#include "operator/controller/clock.h"

namespace gaptrain {
namespace controller {

class FakeClock : public Clock {
 public:
  FakeClock();

  TimePoint Now() const override;
  std::chrono::system_clock::time_point WallNow() const override;
  void WaitUntil(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
                 TimePoint deadline) override;

  void Advance(Duration d);

  // Threads blocked in WaitUntil and not yet woken by Advance(). (One
  // woken by its condition variable counts until it has re-taken its lock.)
  size_t waiters() const;
  // Waits until at least `n` threads block in WaitUntil; false after
  // `timeout` of real time.
  bool WaitForWaiters(size_t n, std::chrono::milliseconds timeout) const;
  // The earliest deadline of the threads waiting (kForever when none has one).
  TimePoint NextDeadline() const;

 private:
  struct Waiter {
    std::mutex* mu;
    std::condition_variable* cv;
    TimePoint deadline;
  };

  mutable std::mutex mu_;
  mutable std::condition_variable waiters_changed_;
  TimePoint now_;
  std::chrono::system_clock::time_point wall_now_;
  uint64_t next_waiter_id_ = 1;
  std::map<uint64_t, Waiter> waiters_;
};

}  // namespace controller
}  // namespace gaptrain

#endif  // GAPTRAIN_OPERATOR_CONTROLLER_FAKE_CLOCK_H_
