// RetryWhileBusy: one API call repeated while the server answers what it
// may not answer again (IsRetryable: 429, 5xx, timeouts, a dropped
// connection), for a component that must ask once at start-up (the
// operator reading its own pod, discovery) and would rather wait out a
// restarting API server than fail its start.
//
// What callers may rely on: `call` runs at least once; a success or an
// error that is not retryable returns at once; retries back off from
// 250 ms to 2 s and stop once `patience` has passed, returning the last
// status.

#ifndef GAPTRAIN_OPERATOR_KUBE_RETRY_BUSY_H_
#define GAPTRAIN_OPERATOR_KUBE_RETRY_BUSY_H_

#include <chrono>
#include <functional>

#include "services/base/status.h"

namespace gaptrain {
namespace kube {

Status RetryWhileBusy(const std::function<Status()>& call, std::chrono::milliseconds patience);

}  // namespace kube
}  // namespace gaptrain

#endif  // GAPTRAIN_OPERATOR_KUBE_RETRY_BUSY_H_
