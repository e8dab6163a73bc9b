#include "operator/controller/clock.h"

namespace gaptrain {
namespace controller {

namespace {

class SystemClock : public Clock {
 public:
  TimePoint Now() const override { return std::chrono::steady_clock::now(); }
  std::chrono::system_clock::time_point WallNow() const override {
    return std::chrono::system_clock::now();
  }
  void WaitUntil(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
                 TimePoint deadline) override {
    if (deadline == kForever) {
      cv.wait(lock);
    } else {
      cv.wait_until(lock, deadline);
    }
  }
};

}  // namespace

Clock* RealClock() {
  static Clock* const clock = new SystemClock();
  return clock;
}

Clock::TimePoint AddSaturating(Clock::TimePoint t, Clock::Duration d) {
  if (d > Clock::Duration::zero() && t > Clock::kForever - d) return Clock::kForever;
  return t + d;
}

}  // namespace controller
}  // namespace gaptrain
