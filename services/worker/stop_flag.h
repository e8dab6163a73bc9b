// StopFlag: tells a worker's loops to wind down, and why. It is set once:
// by the signal thread on SIGTERM (the node is being reclaimed) or when the
// coordinator says the job has ended; the first reason wins. The loops
// check it between batches, and their waits (backoff, "retry after") sleep
// on it, so they end as soon as it is set.
//
// Thread-safe.

#ifndef GAPTRAIN_SERVICES_WORKER_STOP_FLAG_H_
#define GAPTRAIN_SERVICES_WORKER_STOP_FLAG_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>

namespace gaptrain {

enum class StopReason {
  kNone,
  kPreempted,  // SIGTERM or SIGINT: finish or abandon the batch, Leave(PREEMPTED)
  kJobEnded,   // the coordinator says the job succeeded or failed: Leave(FINISHED)
};

class StopFlag {
 public:
  using Clock = std::chrono::steady_clock;

  // Sets the flag (the first reason wins) and wakes every waiter.
  void Stop(StopReason reason);

  bool stopped() const { return stopped_.load(std::memory_order_acquire); }
  StopReason reason() const;
  // When Stop was first called; meaningless before.
  Clock::time_point stop_time() const;

  // Sleeps for `duration` unless the flag is or becomes set; returns true
  // when the whole time passed, false when it returned early because of a
  // stop.
  bool SleepFor(std::chrono::milliseconds duration);
  // Waits until the flag is set or `deadline` passes; returns stopped().
  bool WaitUntil(Clock::time_point deadline);

 private:
  std::atomic<bool> stopped_{false};
  mutable std::mutex mu_;
  std::condition_variable cv_;
  StopReason reason_ = StopReason::kNone;
  Clock::time_point stop_time_;
};

// How long a preempted worker tries to Leave once its loop has ended.
constexpr double kLeaveSeconds = 1.0;

// When a preempted worker stops trying to Leave: kLeaveSeconds from now, or
// the end of the grace period less a margin (a tenth of it, at most 1 s)
// when that comes first, so that it exits on its own before the
// SignalWatcher's deadline. Never before now. A coordinator that is there
// answers in milliseconds; retrying one that is not only holds up the
// node's reclaim (issue 28: trainers retried for their whole 25 s grace),
// and its lease takes the task back anyway.
StopFlag::Clock::time_point LeaveDeadline(const StopFlag& stop, double grace_seconds);

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_WORKER_STOP_FLAG_H_
