// The API server's times (metav1.Time and MicroTime, RFC 3339) written
// and read: Events' eventTime, Leases' renewTime, the job's
// status.autoscale window.

#ifndef GAPTRAIN_OPERATOR_KUBE_API_TIME_H_
#define GAPTRAIN_OPERATOR_KUBE_API_TIME_H_

#include <chrono>
#include <string>

namespace gaptrain {
namespace kube {

// "2026-11-23T06:06:00.000000Z" (UTC, microseconds).
std::string FormatMicroTime(std::chrono::system_clock::time_point time);

// RFC 3339 as the API server writes Time and MicroTime:
// "2026-11-23T06:00:00Z", "2026-11-23T06:00:00.123456Z", or with a
// "+02:00"-style offset. False for anything else.
bool ParseRfc3339(const std::string& text, std::chrono::system_clock::time_point* out);

}  // namespace kube
}  // namespace gaptrain

#endif  // GAPTRAIN_OPERATOR_KUBE_API_TIME_H_
