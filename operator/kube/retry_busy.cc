#include "operator/kube/retry_busy.h"

#include <thread>

#include "operator/kube/api_error.h"
#include "services/base/backoff.h"

namespace gaptrain {
namespace kube {

Status RetryWhileBusy(const std::function<Status()>& call, std::chrono::milliseconds patience) {
  Backoff::Options retry;
  retry.initial = std::chrono::milliseconds(250);
  retry.max = std::chrono::seconds(2);
  Backoff backoff(retry, /*seed=*/1);
  const auto deadline = std::chrono::steady_clock::now() + patience;
  for (;;) {
    Status s = call();
    if (s.ok() || !IsRetryable(s) || std::chrono::steady_clock::now() > deadline) return s;
    std::this_thread::sleep_for(backoff.Next());
  }
}

}  // namespace kube
}  // namespace gaptrain
