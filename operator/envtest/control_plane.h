// ControlPlane: a real Kubernetes control plane for tests (the release
// scripts/test-cluster.sh builds: docs/operator.md), as
// controller-runtime's envtest gives one: etcd and kube-apiserver (and,
// when asked, kube-controller-manager and kube-scheduler) started as
// processes from the envtest assets (envtest_assets.h) on free ports, with
// throwaway certificates and tokens, and RBAC enforced. There is no
// kubelet: pods stay Pending unless a test node (operator/testing's
// LocalNode) runs them.
//
//   envtest::ControlPlane::Options options;
//   options.work_dir = TestDir("cluster");
//   std::unique_ptr<envtest::ControlPlane> cluster;
//   Status s = envtest::ControlPlane::Start(options, &cluster);
//   if (s.code() == Status::Code::kNotFound) GAPTRAIN_SKIP_OR_FAIL_IN_CI(s.message());
//   cluster->admin()->Create(kube::kConfigMaps, "default", ...);
//
// Start one per test binary (SetUpTestSuite), not one per test: it takes
// about 2 s, and 4 s more with the controller manager. Call Start() from the
// main thread (the processes die with the thread that started them,
// services/base/process.h).
//
// What callers may rely on:
//   - Start() returns once /readyz answers ok, the CRDs are Established
//     (and, with the controller manager, once the namespace "default" has
//     its ServiceAccount), or
//     fails with the tail of the failing component's log. NOT_FOUND means a
//     binary is missing (the message says which and how to get it).
//   - The API server listens on every interface (0.0.0.0) at port(), so
//     pods in network namespaces can reach it; its certificate names
//     127.0.0.1, localhost, the `kubernetes` Service's cluster IP
//     (kServiceIp, 10.96.0.1) and the names kubernetes.default.svc and
//     kubernetes.default.svc.cluster.local, as a cluster's does.
//   - Users: the admin token (group system:masters, every permission);
//     ServiceAccount tokens from the TokenRequest API, which get exactly the
//     roles bound to the ServiceAccount.
//   - With Options::audit, every request is in the audit log (AuditLog()),
//     the real server's record of who did what, and with which answer.
//   - Stop() (and the destructor) stops every process and removes etcd's
//     data and the certificates; the components' logs stay under work_dir.
// Thread-safe after Start(), except Stop().

#ifndef GAPTRAIN_OPERATOR_ENVTEST_CONTROL_PLANE_H_
#define GAPTRAIN_OPERATOR_ENVTEST_CONTROL_PLANE_H_

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "operator/kube/client.h"
#include "operator/kube/cluster_config.h"
#include "services/base/process.h"
#include "services/base/status.h"

namespace gaptrain {
namespace envtest {

// The `kubernetes` Service's cluster IP: the first of --service-cluster-ip-range.
inline constexpr char kServiceIp[] = "10.96.0.1";

// One request as kube-apiserver's audit log records it.
struct AuditRecord {
  std::string user;         // "system:serviceaccount:gaptrain-system:gaptrain-operator"
  std::string verb;         // the RBAC verb: "get", "list", "watch", "create", "patch", ...
  std::string group;        // "" for the core group
  std::string resource;     // "pods"
  std::string subresource;  // "", "status", ...
  std::string ns;
  std::string name;
  std::string uri;  // "/api/v1/namespaces/default/pods?..."
  int code = 0;     // the response's HTTP status
  // When the API server received the request (requestReceivedTimestamp).
  std::chrono::system_clock::time_point received;
};

class ControlPlane {
 public:
  struct Options {
    // Required: certificates, etcd's data (removed by Stop()) and logs/.
    std::string work_dir;
    // Garbage collection (ownerReferences), ServiceAccounts and their
    // default ones, kube-root-ca.crt in every namespace, PersistentVolume
    // binding, Deployments and ReplicaSets, the namespace controller.
    bool controller_manager = false;
    // Binds pods to Nodes (tolerations, affinity, resources).
    bool scheduler = false;
    // kube-apiserver logs every request (metadata only) for AuditLog().
    bool audit = false;
    // Admission plugins enabled besides kube-apiserver's defaults
    // (--enable-admission-plugins), e.g. "OwnerReferencesPermissionEnforcement",
    // which OpenShift enables: setting an ownerReference's
    // blockOwnerDeletion then needs `update` on the owner's finalizers.
    std::vector<std::string> admission_plugins;
    // CustomResourceDefinition manifests applied, and Established, before
    // the controller manager starts (its garbage collector would otherwise
    // notice a new kind only at its next discovery, up to 30 s later), as
    // envtest's CRDInstallOptions.
    std::vector<std::string> crd_files;
    // Built-in resources, as kube-apiserver's --watch-cache-sizes names them
    // ("secrets", "leases.coordination.k8s.io"), whose watch cache is off:
    // their watches are served by etcd itself, so after CompactEtcd() a
    // watch from an older resourceVersion meets a real 410 Expired (an ERROR
    // event), as one whose resourceVersion fell out of a watch cache's
    // window does. (kube-apiserver sizes its watch caches by itself,
    // growing them while events are younger than 75 s: only a size of 0 is
    // honoured, so a small window cannot be asked for.) Not for CRDs.
    std::vector<std::string> uncached_resources;
    // etcd and the kube-apiserver of the oldest Kubernetes release gaptrain
    // supports (the assets' minimum/: kMinimumKubernetesVersion in
    // operator/crd/trainingjob_crd.h) instead of the current one. No
    // controller manager or scheduler is built for it.
    bool minimum_supported_release = false;
  };

  static Status Start(const Options& options, std::unique_ptr<ControlPlane>* out);
  ~ControlPlane();
  ControlPlane(const ControlPlane&) = delete;
  ControlPlane& operator=(const ControlPlane&) = delete;

  // Idempotent.
  void Stop();

  // "https://127.0.0.1:PORT".
  const std::string& url() const { return url_; }
  uint16_t port() const { return port_; }
  const std::string& ca_file() const { return ca_file_; }
  const std::string& ca_pem() const { return ca_pem_; }
  const std::string& admin_token() const { return admin_token_; }
  // A kubeconfig file holding the admin token (for kubectl and the
  // controllers).
  const std::string& admin_kubeconfig_file() const { return admin_kubeconfig_file_; }

  // A kubeconfig (YAML text) for `token` against url(), default namespace `ns`.
  std::string Kubeconfig(const std::string& token, const std::string& ns = "default") const;

  // A client with the admin token (field manager "envtest").
  kube::Client* admin() const { return admin_.get(); }
  // A client with `token` (e.g. a ServiceAccount's).
  Status NewClient(const std::string& token, std::unique_ptr<kube::Client>* client) const;

  // Runs kubectl with the admin kubeconfig; *output is its stdout and
  // stderr. A non-zero exit is an error holding the output.
  Status Kubectl(const std::vector<std::string>& args, std::string* output = nullptr) const;

  // Applies the CustomResourceDefinitions in `paths` (files or
  // directories, server-side) and waits until every CRD is Established.
  Status ApplyCrds(const std::vector<std::string>& paths) const;

  // Creates namespace `name` (ALREADY_EXISTS is fine) and, without the
  // controller manager, its "default" ServiceAccount, which the API's
  // admission requires before it accepts a pod there.
  Status CreateNamespace(const std::string& name) const;

  // A token for ServiceAccount ns/name (TokenRequest; valid for an hour).
  Status ServiceAccountToken(const std::string& ns, const std::string& name,
                             std::string* token) const;

  // Compacts etcd to its current revision, as kube-apiserver itself does
  // every 5 minutes (--etcd-compaction-interval), and sets *revision (when
  // given) to it. Every older resourceVersion is then gone for what etcd
  // serves: watches of Options::uncached_resources answer it with a 410
  // Expired ERROR event (watches served by a watch cache are unaffected),
  // and list continue tokens from before it expire (410).
  Status CompactEtcd(int64_t* revision = nullptr) const;

  // Every request logged so far (Options::audit), in order.
  Status AuditLog(std::vector<AuditRecord>* records) const;

  // The pid of each component running: "etcd", "kube-apiserver", and
  // "kube-controller-manager" and "kube-scheduler" when started.
  std::map<std::string, pid_t> ComponentPids() const;

  // The log file of "etcd", "kube-apiserver", "kube-controller-manager" or
  // "kube-scheduler".
  std::string LogFile(const std::string& component) const;

 private:
  explicit ControlPlane(Options options) : options_(std::move(options)) {}

  Status Launch();
  kube::ClusterConfig ConfigFor(const std::string& token) const;
  Status MakeCertificates();
  Status StartComponent(const std::string& component, const std::vector<std::string>& args);
  Status WaitReady();
  Status WaitCrdsEstablished() const;
  // What went wrong with `component`, with its log's tail.
  Status ComponentFailed(const std::string& component, const std::string& why) const;

  const Options options_;
  std::string assets_;
  std::string pki_dir_;
  std::string etcd_dir_;
  std::string logs_dir_;
  std::string ca_file_;
  std::string ca_pem_;
  std::string admin_token_;
  std::string admin_kubeconfig_file_;
  std::string audit_file_;
  // The audit log as read so far: bytes consumed and their records.
  mutable std::mutex audit_mu_;
  mutable uint64_t audit_read_ = 0;                 // guarded by audit_mu_
  mutable std::vector<AuditRecord> audit_records_;  // guarded by audit_mu_
  std::string url_;
  std::string etcd_url_;  // "http://127.0.0.1:PORT"
  uint16_t port_ = 0;
  std::unique_ptr<kube::Client> admin_;
  // In start order; stopped in reverse.
  std::vector<std::pair<std::string, std::unique_ptr<Process>>> processes_;
  bool stopped_ = false;
};

}  // namespace envtest
}  // namespace gaptrain

#endif  // GAPTRAIN_OPERATOR_ENVTEST_CONTROL_PLANE_H_
