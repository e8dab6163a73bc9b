// ClusterTestbed: gaptrain on Kubernetes on one machine, set up as a user
// sets it up, for the end-to-end test and the cluster benchmark: a real
// control plane (operator/envtest: kube-apiserver with RBAC and the audit
// log, kube-controller-manager, kube-scheduler), a test node
// (operator/testing's LocalNode) running pods as local processes, gaptrain
// installed from deploy/ (`kubectl apply -k deploy/`: the operator as the
// Deployment's two in-cluster pods) or from the Helm chart (`helm install`,
// with values a user tunes: workers, lease timings, extra args and env),
// and a namespace for jobs that enforces PodSecurity `restricted`, with
// the datasets' claims from examples/k8s/datasets.yaml filled with MNIST
// (and Fashion-MNIST, when given) as the example's `kubectl cp` would, and the models' claim
// (examples/k8s/models.yaml) their spec.output writes to. Tests and benchmarks only (testonly);
// declare //operator:cluster_testbed_data as data.
//
// What callers may rely on:
//   - Start() returns once both operator pods are Ready and one holds the
//     Lease, and the datasets are in their claim; NOT_FOUND when an envtest
//     binary is missing, PERMISSION_DENIED when namespaces cannot be made
//     (not root): callers skip (or fail in CI) on those.
//   - Start() is called from the main thread (the processes die with the
//     thread that started them). Stop() (and the destructor) stops the node
//     and the control plane.

#ifndef GAPTRAIN_TESTS_CLUSTER_CLUSTER_TESTBED_H_
#define GAPTRAIN_TESTS_CLUSTER_CLUSTER_TESTBED_H_

#include <sys/types.h>

#include <map>
#include <memory>
#include <set>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "operator/envtest/control_plane.h"
#include "operator/testing/kueue_manager.h"
#include "operator/testing/local_node.h"
#include "services/base/status.h"
#include "services/net/metrics_text.h"

namespace gaptrain {

class ClusterTestbed {
 public:
  enum class Install { kDeploy, kChart };

  struct Options {
    std::string work_dir;
    Install install = Install::kDeploy;
    // The namespace of the jobs and the datasets.
    std::string job_namespace = "research";
    // Required: the directory of MNIST's four *-ubyte.gz files, which go
    // into the claim mnist-data.
    std::string mnist_dir;
    // Optional: Fashion-MNIST's four files, for the claim
    // fashion-mnist-data (examples/python/job-cluster.yaml's); "" leaves
    // that claim empty.
    std::string fashion_mnist_dir;
    // Kueue's controller (operator/testing's KueueManager, with
    // TrainingJob as an external framework) runs beside the control plane,
    // and the operator admits queued jobs through it (the chart's
    // kueue.enabled). Only with Install::kChart.
    bool kueue = false;
  };

  // Command name -> runfiles path of the binaries the node runs.
  static const std::map<std::string, std::string>& Binaries();

  static Status Start(const Options& options, std::unique_ptr<ClusterTestbed>* out);
  ~ClusterTestbed();
  void Stop();

  envtest::ControlPlane* cluster() const { return cluster_.get(); }
  kube_testing::LocalNode* node() const { return node_.get(); }
  kube::Client* admin() const { return cluster_->admin(); }
  const std::string& job_namespace() const { return options_.job_namespace; }

  // An example TrainingJob (a runfiles path such as
  // "examples/k8s/mnist-gap-aware-dana.yaml") as kubectl would send it, in
  // the job namespace.
  Status ReadJob(const std::string& file, nlohmann::json* job) const;

  // The object, or null when it cannot be read.
  nlohmann::json Get(const kube::Resource& resource, const std::string& ns,
                     const std::string& name) const;
  std::vector<nlohmann::json> Pods(const std::string& ns, const std::string& selector) const;
  // The operator pod holding the Lease; null when none.
  nlohmann::json Leader() const;
  // The leading operator's /metrics, read by pod IP as Prometheus does;
  // empty when it cannot be read.
  MetricsSample LeaderMetrics() const;
  // A job pod's /metrics (its container port named "metrics").
  MetricsSample PodMetrics(const std::string& ns, const std::string& pod) const;
  // Every operator pod's log, each headed by its name.
  std::string OperatorLogs() const;

 private:
  explicit ClusterTestbed(Options options) : options_(std::move(options)) {}
  Status InstallGaptrain();
  Status FillDatasets();

  const Options options_;
  std::unique_ptr<envtest::ControlPlane> cluster_;
  std::unique_ptr<kube_testing::LocalNode> node_;
  std::unique_ptr<kube_testing::KueueManager> kueue_;
};

// True when the pod's Ready condition is True.
bool PodReady(const nlohmann::json& pod);
// status.podIP, "" when none.
std::string PodIp(const nlohmann::json& pod);
// The first container's port named `name`; 0 when none.
uint16_t NamedPort(const nlohmann::json& pod, const std::string& name);

// Pids of live processes whose executable is one of `executables`
// (resolved paths): what a node still runs.
std::vector<pid_t> ProcessesRunning(const std::set<std::string>& executables);

}  // namespace gaptrain

#endif  // GAPTRAIN_TESTS_CLUSTER_CLUSTER_TESTBED_H_
