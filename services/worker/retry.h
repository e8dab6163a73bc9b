// Retrying failed calls: which failures are worth another attempt, and a
// loop that spaces the attempts with a Backoff. Every RPC a worker makes
// goes through one (trainer.h, coordinator_session.h, evaluation_loop.h).
//
// What callers may rely on:
//   - IsTransient is true for what a restart, a network fault or a
//     truncated stream produce (UNAVAILABLE, DEADLINE_EXCEEDED, CANCELLED,
//     ABORTED, DATA_LOSS, UNKNOWN, INTERNAL), false for answers about the
//     request itself (INVALID_ARGUMENT, NOT_FOUND, FAILED_PRECONDITION,
//     UNAUTHENTICATED, ...), which callers handle one by one.
//   - RetryLoop::Wait sleeps the next backoff delay, cut short by the stop
//     flag or the deadline, and says whether to try again; it never
//     throws, and gives up after max_attempts consecutive failures (0: no
//     limit), at the deadline, or (unless the loop ignores it) on stop.

#ifndef GAPTRAIN_SERVICES_WORKER_RETRY_H_
#define GAPTRAIN_SERVICES_WORKER_RETRY_H_

#include <chrono>
#include <cstdint>
#include <functional>

#include "services/base/backoff.h"
#include "services/base/status.h"
#include "services/worker/stop_flag.h"

namespace gaptrain {

bool IsTransient(const Status& status);

struct RetryPolicy {
  Backoff::Options backoff;
  int max_attempts = 0;  // consecutive failures before giving up; 0: no limit
};

class RetryLoop {
 public:
  using Clock = std::chrono::steady_clock;

  // `stop` (optional) ends the loop when set; `deadline` bounds it.
  RetryLoop(const RetryPolicy& policy, uint64_t seed, StopFlag* stop,
            Clock::time_point deadline = Clock::time_point::max());

  // After a failure: counts it and sleeps the backoff delay. False, having
  // slept at most until the deadline, when the caller should give up.
  bool Wait();
  void Reset() { backoff_.Reset(); }
  int failures() const { return backoff_.failures(); }

 private:
  const RetryPolicy policy_;
  Backoff backoff_;
  StopFlag* const stop_;
  const Clock::time_point deadline_;
};

// Calls `call` until it succeeds or fails with an error `retryable` says
// no to (default: IsTransient), or the loop gives up; returns the last
// status. `on_failure` (optional) sees every failed attempt's status.
Status CallWithRetry(RetryLoop* loop, const std::function<Status()>& call,
                     const std::function<void(const Status&)>& on_failure = nullptr,
                     const std::function<bool(const Status&)>& retryable = IsTransient);

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_WORKER_RETRY_H_
