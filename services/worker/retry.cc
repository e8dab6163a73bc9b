#include "services/worker/retry.h"

#include <thread>

namespace gaptrain {

bool IsTransient(const Status& status) {
  switch (status.code()) {
    case Status::Code::kUnavailable:
    case Status::Code::kDeadlineExceeded:
    case Status::Code::kCancelled:
    case Status::Code::kAborted:
    case Status::Code::kDataLoss:
    case Status::Code::kUnknown:
    case Status::Code::kInternal:
      return true;
    default:
      return false;
  }
}

RetryLoop::RetryLoop(const RetryPolicy& policy, uint64_t seed, StopFlag* stop,
                     Clock::time_point deadline)
    : policy_(policy), backoff_(policy.backoff, seed), stop_(stop), deadline_(deadline) {}

bool RetryLoop::Wait() {
  const std::chrono::milliseconds delay = backoff_.Next();
  if (policy_.max_attempts > 0 && backoff_.failures() >= policy_.max_attempts) return false;
  if (stop_ != nullptr && stop_->stopped()) return false;
  const Clock::time_point now = Clock::now();
  if (now >= deadline_) return false;
  // The deadline comes first: wait for it, then give up.
  const bool past_deadline = deadline_ - now <= delay;
  const Clock::time_point until = past_deadline ? deadline_ : now + delay;
  if (stop_ != nullptr) {
    if (stop_->WaitUntil(until)) return false;
  } else {
    std::this_thread::sleep_until(until);
  }
  return !past_deadline;
}

Status CallWithRetry(RetryLoop* loop, const std::function<Status()>& call,
                     const std::function<void(const Status&)>& on_failure,
                     const std::function<bool(const Status&)>& retryable) {
  while (true) {
    Status s = call();
    if (s.ok()) {
      loop->Reset();
      return s;
    }
    if (on_failure) on_failure(s);
    if (!retryable(s) || !loop->Wait()) return s;
  }
}

}  // namespace gaptrain
