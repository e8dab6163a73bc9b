#include "operator/controller/fake_clock.h"

#include <algorithm>
#include <vector>

namespace gaptrain {
namespace controller {

namespace {
// 2026-11-23T06:00:00Z, the day ../shared/k8s/recorded was made.
constexpr std::chrono::seconds kWallStart{1795413600};
// Far from steady_clock's epoch, so code subtracting durations stays positive.
constexpr std::chrono::hours kSteadyStart{24 * 365};
}  // namespace

FakeClock::FakeClock()
    : now_(TimePoint(kSteadyStart)), wall_now_(std::chrono::system_clock::time_point(kWallStart)) {}

Clock::TimePoint FakeClock::Now() const {
  std::lock_guard<std::mutex> lock(mu_);
  return now_;
}

std::chrono::system_clock::time_point FakeClock::WallNow() const {
  std::lock_guard<std::mutex> lock(mu_);
  return wall_now_;
}

void FakeClock::WaitUntil(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
                          TimePoint deadline) {
  // Registering before waiting, with `lock` held, is what makes Advance()
  // unable to miss us: it notifies only after taking `lock`, i.e. once we
  // are inside cv.wait, or it moved the time before we looked at it.
  uint64_t id;
  {
    std::lock_guard<std::mutex> guard(mu_);
    if (now_ >= deadline) return;
    id = next_waiter_id_++;
    waiters_.emplace(id, Waiter{lock.mutex(), &cv, deadline});
    waiters_changed_.notify_all();
  }
  cv.wait(lock);
  std::lock_guard<std::mutex> guard(mu_);
  waiters_.erase(id);  // gone already if Advance() woke us
}

void FakeClock::Advance(Duration d) {
  std::vector<Waiter> due;
  {
    std::lock_guard<std::mutex> guard(mu_);
    now_ += d;
    wall_now_ += std::chrono::duration_cast<std::chrono::system_clock::duration>(d);
    for (auto it = waiters_.begin(); it != waiters_.end();) {
      if (it->second.deadline <= now_) {
        due.push_back(it->second);
        it = waiters_.erase(it);
      } else {
        ++it;
      }
    }
  }
  // Not under mu_: the waiters take their lock before mu_.
  for (const Waiter& w : due) {
    std::lock_guard<std::mutex> guard(*w.mu);
    w.cv->notify_all();
  }
}

size_t FakeClock::waiters() const {
  std::lock_guard<std::mutex> lock(mu_);
  return waiters_.size();
}

bool FakeClock::WaitForWaiters(size_t n, std::chrono::milliseconds timeout) const {
  std::unique_lock<std::mutex> lock(mu_);
  return waiters_changed_.wait_for(lock, timeout, [&] { return waiters_.size() >= n; });
}

Clock::TimePoint FakeClock::NextDeadline() const {
  std::lock_guard<std::mutex> lock(mu_);
  TimePoint next = kForever;
  for (const auto& [id, w] : waiters_) next = std::min(next, w.deadline);
  return next;
}

}  // namespace controller
}  // namespace gaptrain
