// ContainerProber: runs one probe of a container (its readinessProbe or
// livenessProbe) on a thread of its own, as the kubelet's prober does, and
// keeps the result.
//
// What callers may rely on:
//   - ParseProbe accepts httpGet (HTTP only; path, port by number or by the
//     name of a container port, host (default: the pod IP), httpHeaders)
//     and tcpSocket, with initialDelaySeconds (0), periodSeconds (10),
//     timeoutSeconds (1), successThreshold (1) and failureThreshold (3),
//     the API's defaults. exec and grpc probes, HTTPS and values out of
//     range are INVALID_ARGUMENT naming the field.
//   - An HTTP probe succeeds on a status from 200 to 399 within the
//     timeout; a TCP probe when the connection is accepted.
//   - result() starts at `initial_result` (readiness: false, liveness:
//     true), turns true after successThreshold consecutive successes and
//     false after failureThreshold consecutive failures; `on_change` runs
//     (on the prober's thread) each time it flips. The first probe runs
//     initialDelaySeconds after construction, then one every
//     periodSeconds.
//   - The destructor stops the thread (a probe in flight ends by its
//     timeout) and joins it; `on_change` must not block on anything its
//     caller holds.

#ifndef GAPTRAIN_OPERATOR_TESTING_CONTAINER_PROBER_H_
#define GAPTRAIN_OPERATOR_TESTING_CONTAINER_PROBER_H_

#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "services/base/status.h"

namespace gaptrain {
namespace kube_testing {

struct ProbeSpec {
  enum class Kind { kHttpGet, kTcpSocket };
  Kind kind = Kind::kHttpGet;
  std::string host;
  uint16_t port = 0;
  std::string path = "/";
  std::vector<std::pair<std::string, std::string>> headers;
  std::chrono::seconds initial_delay{0};
  std::chrono::seconds period{10};
  std::chrono::seconds timeout{1};
  int success_threshold = 1;
  int failure_threshold = 3;
};

// `field` names the probe in errors ("readinessProbe").
Status ParseProbe(const nlohmann::json& probe, const nlohmann::json& container,
                  const std::string& pod_ip, const std::string& field, ProbeSpec* spec);

class ContainerProber {
 public:
  ContainerProber(const ProbeSpec& spec, bool initial_result, std::function<void()> on_change);
  ~ContainerProber();
  ContainerProber(const ContainerProber&) = delete;
  ContainerProber& operator=(const ContainerProber&) = delete;

  bool result() const { return result_; }

 private:
  void Run();
  bool ProbeOnce() const;

  const ProbeSpec spec_;
  const std::function<void()> on_change_;
  std::atomic<bool> result_;
  std::mutex mu_;
  std::condition_variable stop_cv_;
  bool stopping_ = false;  // guarded by mu_
  std::thread thread_;
};

}  // namespace kube_testing
}  // namespace gaptrain

#endif  // GAPTRAIN_OPERATOR_TESTING_CONTAINER_PROBER_H_
