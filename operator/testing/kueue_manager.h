// KueueManager: Kueue's real controller manager (sigs.k8s.io/kueue, built
// by scripts/test-cluster.sh as the envtest assets' kueue-manager) running
// as a process against a test ControlPlane, with Kueue's own CRDs and its
// admission webhooks, so tests see Kueue admit, queue and suspend
// workloads as a cluster with Kueue does.
//
//   std::unique_ptr<kube_testing::KueueManager> kueue;
//   Status s = kube_testing::KueueManager::Start(cluster.get(), options, &kueue);
//   if (s.code() == Status::Code::kNotFound) GAPTRAIN_SKIP_OR_FAIL_IN_CI(s.message());
//
// How it differs from Kueue's own install, and why: the manager runs as a
// ContainerProcess on the host's network, not in a pod, with the control
// plane's admin kubeconfig (not its ServiceAccount and ClusterRole); its
// webhook configurations are Kueue's (config/components/webhook) with each
// service reference turned into a URL on 127.0.0.1 and a CA made here,
// since the API server reaches no Service here. So Kueue's own certificate
// management is off, and the certificates made here are mounted where
// Kueue then reads them (its metrics server's at /etc/kueue/metrics/certs,
// a path it fixes); leader election and the visibility API server
// (VisibilityOnDemand, an aggregated API) are off.
//
// What callers may rely on:
//   - Start() returns once Kueue's CRDs are Established, its webhook
//     configurations installed and /readyz answers 200 (the webhook server
//     serves); else an error with the tail of its log. NOT_FOUND: a binary
//     or Kueue's manifests are missing from the assets (it says which).
//   - Only the webhooks of Kueue's own kinds and of the enabled
//     `frameworks` are installed, so nothing else in the cluster is sent to
//     a webhook that Kueue does not serve.
//   - Stop() (and the destructor) stops the process and deletes the webhook
//     configurations; the CRDs stay. The log stays at log_file().
// Not thread-safe; call Start() from the main thread (process.h).

#ifndef GAPTRAIN_OPERATOR_TESTING_KUEUE_MANAGER_H_
#define GAPTRAIN_OPERATOR_TESTING_KUEUE_MANAGER_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "operator/envtest/control_plane.h"
#include "operator/kube/resource.h"
#include "operator/testing/container_process.h"
#include "services/base/status.h"

namespace gaptrain {
namespace kube_testing {

// Kueue's API (v1beta2, the version Kueue stores); Workloads and
// ResourceFlavors are kube's (the operator uses them).
using kube::kResourceFlavors;
using kube::kWorkloads;
inline constexpr kube::Resource kClusterQueues{"kueue.x-k8s.io", "v1beta2", "clusterqueues",
                                               "ClusterQueue", false, ""};
inline constexpr kube::Resource kLocalQueues{"kueue.x-k8s.io", "v1beta2", "localqueues",
                                             "LocalQueue", true, ""};

class KueueManager {
 public:
  struct Options {
    // Required: certificates, the configuration and the log.
    std::string work_dir;
    // Kueue's integrations.frameworks; supported here: "batch/job", "pod".
    std::vector<std::string> frameworks = {"batch/job"};
    // Kueue's integrations.externalFrameworks: kinds whose Workloads their
    // own controller makes ("TrainingJob.v1alpha1.gaptrain.io"), so Kueue
    // treats their pods as part of them.
    std::vector<std::string> external_frameworks;
  };

  static Status Start(envtest::ControlPlane* cluster, const Options& options,
                      std::unique_ptr<KueueManager>* out);
  ~KueueManager();
  KueueManager(const KueueManager&) = delete;
  KueueManager& operator=(const KueueManager&) = delete;

  // Idempotent.
  void Stop();

  const std::string& log_file() const { return log_file_; }
  pid_t pid() const { return process_ != nullptr ? process_->pid() : -1; }

 private:
  KueueManager(envtest::ControlPlane* cluster, Options options)
      : cluster_(cluster), options_(std::move(options)) {}

  Status Launch();
  Status InstallWebhooks(const std::string& manifests_file, const std::string& ca_pem);
  Status WaitReady();
  Status Failed(const std::string& why) const;

  envtest::ControlPlane* const cluster_;
  const Options options_;
  std::string log_file_;
  uint16_t webhook_port_ = 0;
  uint16_t probe_port_ = 0;
  std::vector<std::string> webhook_configurations_;  // "kind/name", to delete at Stop()
  std::unique_ptr<ContainerProcess> process_;
  // The process's wait status once it has exited, else -1 (guarded by the
  // ContainerProcess's exit callback running before its destructor returns).
  std::atomic<int> wait_status_{-1};
  bool stopped_ = false;
};

}  // namespace kube_testing
}  // namespace gaptrain

#endif  // GAPTRAIN_OPERATOR_TESTING_KUEUE_MANAGER_H_
