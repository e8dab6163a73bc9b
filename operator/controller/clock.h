// Clock: the time the controller machinery schedules by (work-queue delays
// and backoff, reconcile durations, leader-election renewals and Lease
// timestamps). Production code uses RealClock(); tests pass a FakeClock
// (fake_clock.h) and advance it, so no test waits on wall time.
//
// What callers may rely on:
//   - Now() is monotonic (steady_clock's epoch); WallNow() is the calendar
//     time written into API objects (a Lease's renewTime).
//   - WaitUntil(lock, cv, deadline) is condition_variable::wait_until on
//     this clock: the caller holds `lock` (the mutex `cv` is used with); it
//     returns when `cv` is notified, when Now() reaches `deadline`, or
//     spuriously, always with `lock` held again. Callers loop on their
//     condition. Clock::kForever waits for a notification only.
//   - Thread-safe.

#ifndef GAPTRAIN_OPERATOR_CONTROLLER_CLOCK_H_
#define GAPTRAIN_OPERATOR_CONTROLLER_CLOCK_H_

#include <chrono>
#include <condition_variable>
#include <mutex>

namespace gaptrain {
namespace controller {

class Clock {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;
  using Duration = std::chrono::steady_clock::duration;
  static constexpr TimePoint kForever = TimePoint::max();

  virtual ~Clock() = default;

  virtual TimePoint Now() const = 0;
  virtual std::chrono::system_clock::time_point WallNow() const = 0;
  virtual void WaitUntil(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
                         TimePoint deadline) = 0;
};

// The process's steady and system clocks. Never destroyed.
Clock* RealClock();

// t + d, saturating at kForever instead of overflowing.
Clock::TimePoint AddSaturating(Clock::TimePoint t, Clock::Duration d);

}  // namespace controller
}  // namespace gaptrain

#endif  // GAPTRAIN_OPERATOR_CONTROLLER_CLOCK_H_
