#include "services/worker/stop_flag.h"

#include <algorithm>

namespace gaptrain {

void StopFlag::Stop(StopReason reason) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (reason_ != StopReason::kNone) return;
    reason_ = reason;
    stop_time_ = Clock::now();
    stopped_.store(true, std::memory_order_release);
  }
  cv_.notify_all();
}

StopReason StopFlag::reason() const {
  std::lock_guard<std::mutex> lock(mu_);
  return reason_;
}

StopFlag::Clock::time_point StopFlag::stop_time() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stop_time_;
}

bool StopFlag::SleepFor(std::chrono::milliseconds duration) {
  std::unique_lock<std::mutex> lock(mu_);
  return !cv_.wait_for(lock, duration, [this] { return reason_ != StopReason::kNone; });
}

bool StopFlag::WaitUntil(Clock::time_point deadline) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_until(lock, deadline, [this] { return reason_ != StopReason::kNone; });
}

StopFlag::Clock::time_point LeaveDeadline(const StopFlag& stop, double grace_seconds) {
  const double margin = std::min(1.0, grace_seconds / 10);
  const auto end = stop.stop_time() + std::chrono::duration_cast<StopFlag::Clock::duration>(
                                          std::chrono::duration<double>(grace_seconds - margin));
  const auto now = StopFlag::Clock::now();
  const auto budget = now + std::chrono::duration_cast<StopFlag::Clock::duration>(
                                std::chrono::duration<double>(kLeaveSeconds));
  return std::max(std::min(end, budget), now);
}

}  // namespace gaptrain
