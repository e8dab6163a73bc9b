// RunningOperator: the real gaptrain-operator binary, started by a test as
// a process with a kubeconfig (for a real control plane, operator/envtest;
// tests/cluster/test_install.h gives the operator ServiceAccount's), on
// ephemeral ports, with its log kept; and what a test asks of it over
// HTTP: /metrics as numbers, /healthz, /readyz. Tests only (Bazel
// testonly); declare //operator:gaptrain-operator as data.
//
// What callers may rely on:
//   - Start() returns once the operator has written its ports file (its
//     endpoints listen), or fails with the tail of its log.
//   - Call Start() from the test's main thread: the child dies with the
//     thread that started it (services/base/process.h).
//   - The destructor SIGKILLs an operator still running.

#ifndef GAPTRAIN_TESTS_CLUSTER_RUNNING_OPERATOR_H_
#define GAPTRAIN_TESTS_CLUSTER_RUNNING_OPERATOR_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "services/base/process.h"
#include "services/base/status.h"
#include "services/net/http_client.h"
#include "services/net/metrics_text.h"

namespace gaptrain {

class RunningOperator {
 public:
  // Writes `kubeconfig` (YAML) under `dir` and starts the operator with
  // --kubeconfig, --pod-name `name`, ephemeral ports, a ports file and
  // `args` (e.g. short lease durations), and `env` added to its
  // environment (e.g. POD_NAME and POD_NAMESPACE, as the downward API
  // gives them in a cluster); its log is dir/NAME.log. `binary` is the
  // operator's path (runfiles-relative by default; a benchmark may compare
  // another build).
  static Status Start(const std::string& dir, const std::string& name,
                      const std::string& kubeconfig, const std::vector<std::string>& args,
                      std::unique_ptr<RunningOperator>* out,
                      const std::vector<std::pair<std::string, std::string>>& env = {},
                      const std::string& binary = "operator/gaptrain-operator");

  const std::string& name() const { return name_; }
  Process* process() { return process_.get(); }
  uint16_t metrics_port() const { return metrics_port_; }
  uint16_t health_port() const { return health_port_; }

  // GET `path` on the health port (/healthz, /readyz) or the metrics port.
  Status GetHealth(const std::string& path, HttpClientResponse* response) const;
  // /metrics parsed; empty when it cannot be read.
  MetricsSample Metrics() const;
  // One series of /metrics, or `absent`.
  double Metric(const std::string& series, double absent = 0) const;
  std::string Log() const;

 private:
  RunningOperator() = default;

  std::string name_;
  std::string log_file_;
  std::unique_ptr<Process> process_;
  uint16_t metrics_port_ = 0;
  uint16_t health_port_ = 0;
};

}  // namespace gaptrain

#endif  // GAPTRAIN_TESTS_CLUSTER_RUNNING_OPERATOR_H_
