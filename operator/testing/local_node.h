// LocalNode: a test node that does a kubelet's part through the API, over
// HTTPS like a kubelet, for a real control plane (operator/envtest) with
// its scheduler and controller manager: it registers a Node, runs the
// containers of the pods bound to it as local processes, writes their
// status, and provisions volumes, so that the operator's end-to-end test
// sees pods run, become ready, fail, get preempted and go away as they
// would in a cluster.
//
//   LocalNode::Options options;
//   options.work_dir = TestDir("node");
//   options.binaries = {{"gaptrain-master", runfiles_path_of_master}, ...};
//   options.api_service_host = envtest::kServiceIp;
//   options.api_service_port = cluster->port();
//   std::unique_ptr<LocalNode> node;
//   Status started = LocalNode::Start(cluster_config, options, &node);
//   if (started.code() == Status::Code::kPermissionDenied) GAPTRAIN_SKIP_OR_FAIL_IN_CI(...);
//
// What it does, as far as the API can tell:
//   - The Node: created (or found, when a node of the same name ran
//     before) with the labels kubernetes.io/hostname, kubernetes.io/os and
//     Options::labels, status Ready with Options' allocatable resources and
//     the bridge's address as InternalIP; the not-ready taint the admission
//     puts on a new Node is removed (the node lifecycle controller, which
//     would, does not run without heartbeats). It sends no heartbeats.
//   - Scheduling is kube-scheduler's: the node runs what is bound to it.
//   - Storage: for every claim that is Pending and not yet provided for,
//     a PersistentVolume "pvc-UID" (hostPath: a directory of its own under
//     claims_dir, which outlives the pods and the claim; capacity, access
//     modes and storage class as requested; claimRef set), which the
//     controller manager's binder binds. A PersistentVolume it made that is
//     Released (its claim deleted) is deleted.
//   - Networking: each pod gets its own network namespace, connected to a
//     bridge the node owns, and an address of the node's private /24; a
//     new pod gets a new address, also when it replaces one of the same
//     name (see pod_network.h). status.hostIP is the bridge's address. The
//     root namespace, where the control plane, the test and the operator
//     run, reaches every pod IP. With Options::api_service_host, that
//     address is also put on the bridge and every container gets
//     KUBERNETES_SERVICE_HOST/PORT (the port: api_service_port), so
//     in-cluster clients reach the API server as on a cluster (the node
//     plays kube-proxy's part for the `kubernetes` Service only; the API
//     server must listen on every interface, as envtest's does).
//   - DNS: the node runs the cluster's DNS on its bridge (cluster_dns.h:
//     A records for SVC.NS.svc.cluster.local, NXDOMAIN at once for other
//     names), and each pod's /etc/resolv.conf is the kubelet's for
//     ClusterFirst (search NS.svc.cluster.local svc.cluster.local
//     cluster.local, ndots:5) naming it. Each pod's /etc/hosts (see
//     cluster_hosts.h) also maps every Service name (SVC, SVC.NS,
//     SVC.NS.svc, SVC.NS.svc.cluster.local) to the addresses of the pods
//     it selects; both are rewritten whenever pods or Services change, so
//     a name that did not resolve when the process started resolves once
//     its pod runs, and a replaced pod's new address at once.
//   - Containers: the pod must have exactly one container and no init
//     containers; others wait with CreateContainerConfigError saying so.
//     Every container runs once: under restartPolicy Always or OnFailure
//     too, one that exits ends its pod as under Never (Succeeded or
//     Failed; a ReplicaSet then replaces the pod) where a kubelet would
//     restart it in place. The container needs a command
//     (there are no images). Its command + args are expanded and its
//     environment resolved as the kubelet does (see container_env.h); the
//     process also gets HOSTNAME (the pod name), HOME=/root,
//     Options::extra_env, and a PATH whose first directory holds
//     Options::binaries under their command names, so "gaptrain-master"
//     resolves to the test's binary (a bare command is looked up on the
//     host's file system, before the volumes are mounted). It runs in the
//     pod's network namespace, with the pod name as hostname and the
//     volumes (projected ServiceAccount tokens from the TokenRequest API
//     included) bind-mounted at their mountPaths in a private mount
//     namespace (see pod_volumes.h and container_process.h; missing
//     mountpoints, such as /etc/gaptrain, are created as empty directories
//     on the host and left there). stdout and stderr go to LogPath(), like
//     `kubectl logs`. The securityContext is not applied (the processes run
//     as the test's user).
//   - Status (see pod_status.h), written to pods/status as the kubelet
//     writes it: Pending (waiting ContainerCreating while volumes or the
//     network are not ready; CreateContainerConfigError for env and
//     command errors such as a missing secret, retried as the API objects
//     change), Running when the process starts, Succeeded or Failed when it
//     exits (a command that cannot be executed ends Failed with exit code
//     128, reason StartError). Ready follows the readinessProbe (httpGet or
//     tcpSocket), or is True while running when there is none. A
//     livenessProbe that fails kills the container (grace:
//     terminationGracePeriodSeconds) and the pod ends Failed. startupProbe,
//     exec and grpc probes are refused (CreateContainerConfigError).
//   - Deletion: a pod given a deletionTimestamp gets SIGTERM on its process
//     group, SIGKILL after deletionGracePeriodSeconds (at once when 0); its
//     terminated state is written, then the node confirms the delete
//     (gracePeriodSeconds=0, with a uid precondition). A pod removed from
//     the API outright loses its process at once (SIGKILL). Evictions arrive
//     this way too.
//   - When the container exits, its network namespace is removed (as the
//     kubelet stops a finished pod's sandbox); its status keeps the pod IP.
//   - A node started again on the same API server (same node_name) finds
//     the containers of pods that were Running gone: they end Failed, exit
//     code 137, reason ContainerStatusUnknown. Stop() itself writes nothing:
//     pods stay as they were, like those of a node that vanished.
//
// How it talks to the API: a kube::Client with the credentials of
// `config` (field manager "local-node"), informers on pods, Services,
// Secrets, ConfigMaps, claims and PersistentVolumes in every namespace; it
// acts after every change they bring, on a snapshot of their caches.
//
// Processes and cleanup: containers are started from the node's own thread
// with PR_SET_PDEATHSIG, so their main processes die with the test process
// even when it crashes (their children then outlive it, unless they die of
// losing their parent); each leads its own process group, which is
// SIGKILLed when the main process exits. Stop() (and the destructor) kills
// every container, removes every namespace, veth and the bridge, and the
// node's pod directories (hosts files, secret, configMap, projected and
// emptyDir volumes); it keeps log_dir and claims_dir. Names are per process
// (see pod_network.h) and leftovers of crashed runs are removed by the
// next Start().
//
// Start() fails with PERMISSION_DENIED when namespaces cannot be made (not
// root, no CAP_NET_ADMIN/CAP_SYS_ADMIN): tests report it with
// GAPTRAIN_SKIP_OR_FAIL_IN_CI. Bazel's linux-sandbox is such a place: tag
// the test "no-sandbox" (the node's names also rely on the host's pid
// namespace).
//
// Thread-safe.

#ifndef GAPTRAIN_OPERATOR_TESTING_LOCAL_NODE_H_
#define GAPTRAIN_OPERATOR_TESTING_LOCAL_NODE_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "operator/controller/informer.h"
#include "operator/kube/client.h"
#include "operator/kube/cluster_config.h"
#include "operator/kube/transport.h"
#include "operator/testing/cluster_dns.h"
#include "operator/testing/cluster_snapshot.h"
#include "operator/testing/container_env.h"
#include "operator/testing/pod_network.h"
#include "services/base/status.h"

namespace gaptrain {
namespace kube_testing {

class LocalNode {
 public:
  struct Options {
    std::string node_name = "local-node";
    // Required: the node's files. Pods' directories go under
    // work_dir/pods (removed by Stop()).
    std::string work_dir;
    // Pods' logs, NAMESPACE_NAME_UID.log; kept. Default work_dir/logs.
    std::string log_dir;
    // Claims' directories, NAMESPACE/NAME-UID; kept. Default work_dir/claims.
    std::string claims_dir;
    // Command name -> the binary to run for it (an existing executable;
    // relative paths are taken from the current directory, e.g. runfiles).
    std::map<std::string, std::string> binaries;
    // Given to every container before its own env (which may override it).
    EnvironmentList extra_env;
    // The `kubernetes` Service as pods see it (KUBERNETES_SERVICE_HOST and
    // _PORT); "" gives pods no way to the API server.
    std::string api_service_host;
    uint16_t api_service_port = 0;
    // The Node's labels besides kubernetes.io/hostname and kubernetes.io/os.
    std::map<std::string, std::string> labels;
    // What the Node offers the scheduler: more than this machine has by
    // default, so that a job sized for a cluster fits on one test node.
    std::string allocatable_cpu = "32";
    std::string allocatable_memory = "128Gi";
  };

  // How Preempt() takes a pod away.
  enum class Disruption {
    // A spot node's reclaim: DisruptionTarget True, reason
    // TerminationByKubelet, SIGTERM, the pod's terminationGracePeriodSeconds,
    // then the pod ends Failed with status.reason "Terminated" and is deleted
    // (as the pod garbage collector deletes pods of a node that is gone).
    kNodeShutdown,
    // The scheduler's preemption: DisruptionTarget True, reason
    // PreemptionByScheduler, then a graceful delete with the pod's
    // terminationGracePeriodSeconds.
    kSchedulerPreemption,
  };

  // `config`: how the node reaches the API server, with the rights of a
  // kubelet (an admin's will do).
  static Status Start(const kube::ClusterConfig& config, const Options& options,
                      std::unique_ptr<LocalNode>* node);
  ~LocalNode();
  LocalNode(const LocalNode&) = delete;
  LocalNode& operator=(const LocalNode&) = delete;

  // Idempotent; see the file comment. The node writes nothing afterwards.
  void Stop();

  const std::string& node_name() const { return options_.node_name; }
  // The bridge's address: pods' status.hostIP and default gateway.
  const std::string& host_ip() const { return host_ip_; }
  const std::string& subnet() const { return subnet_; }
  // Every network namespace and link of this node starts with it.
  const std::string& name_prefix() const { return name_prefix_; }

  // ---- Faults. Each acts on the running container of pod ns/name
  // (NOT_FOUND when there is none) and returns at once; the status
  // follows as the process ends.

  // Sends `signal` to the container's main process: a crash (SIGSEGV,
  // SIGKILL, ...). Exit code 128+signal, reason Error, when it kills it.
  Status KillContainer(const std::string& ns, const std::string& name, int signal);
  // The kernel's OOM killer: SIGKILL, reason OOMKilled, exit code 137.
  Status OutOfMemory(const std::string& ns, const std::string& name);
  Status Preempt(const std::string& ns, const std::string& name,
                 Disruption disruption = Disruption::kNodeShutdown);

  // ---- Logs of the newest pod named ns/name this node ran.
  // "" when none ran.
  std::string LogPath(const std::string& ns, const std::string& name) const;
  // NOT_FOUND when no pod of that name ran here.
  Status Logs(const std::string& ns, const std::string& name, std::string* text) const;

  // The host directory of claim ns/name (NOT_FOUND when it does not exist).
  Status ClaimPath(const std::string& ns, const std::string& name, std::string* path) const;

 private:
  struct PodRuntime;
  struct StartPlan;

  explicit LocalNode(Options options);

  Status Register();
  Status StartInformers();
  // The informers' caches as one snapshot.
  ClusterSnapshot Snapshot() const;
  // The node thread: a Pass() after every change and at kill deadlines.
  void Run();
  void Wake();
  // TokenRequest for the pod's ServiceAccount (pod_volumes.h's TokenSource).
  Status IssueToken(const nlohmann::json& pod, const std::string& audience,
                    int64_t expiration_seconds, std::string* token);
  // RFC 3339, seconds, UTC: API timestamps.
  static std::string Now();

  // Everything below runs with mu_ held.
  void Pass(const ClusterSnapshot& snapshot);
  void ProvisionVolumes(const ClusterSnapshot& snapshot);
  void Admit(const nlohmann::json& pod);
  void Advance(PodRuntime* pod, const nlohmann::json& object, const ClusterSnapshot& snapshot);
  void TryStart(PodRuntime* pod, const nlohmann::json& object, const ClusterSnapshot& snapshot);
  // What it takes to start the pod's container; on error, the waiting
  // reason (ContainerCreating, CreateContainerConfigError).
  Status PlanStart(PodRuntime* pod, const nlohmann::json& object, const ClusterSnapshot& snapshot,
                   StartPlan* plan, std::string* waiting_reason);
  void BeginTermination(PodRuntime* pod, int64_t grace_seconds);
  void WriteStatus(PodRuntime* pod, const nlohmann::json& object);
  void ConfirmDeletion(PodRuntime* pod);
  void UpdateHosts(PodRuntime* pod, const ClusterSnapshot& snapshot);
  void ReleaseNetwork(PodRuntime* pod);
  void Remove(PodRuntime* pod);
  PodRuntime* RunningPod(const std::string& ns, const std::string& name);
  std::chrono::steady_clock::time_point NextDeadline() const;

  const Options options_;
  std::unique_ptr<kube::Client> client_;
  std::unique_ptr<kube::Transport> transport_;  // for TokenRequests
  // pods, services, secrets, configmaps, persistentvolumeclaims,
  // persistentvolumes; ClusterSnapshot::Resources() in that order, then PVs.
  std::vector<std::unique_ptr<controller::Informer>> informers_;
  std::atomic<uint64_t> changes_{0};
  std::string bin_dir_;
  std::string pods_dir_;
  std::string host_ip_;
  std::string subnet_;
  std::string name_prefix_;

  std::mutex stop_mu_;  // serialises Stop()
  std::thread runner_;

  // Lock order: mu_ before wake_mu_.
  std::mutex wake_mu_;
  std::condition_variable wake_cv_;
  bool wake_ = false;                                  // guarded by wake_mu_
  bool stopping_ = false;                              // guarded by wake_mu_

  mutable std::mutex mu_;
  std::unique_ptr<PodNetwork> network_;                  // guarded by mu_
  std::unique_ptr<ClusterDns> dns_;
  DnsRecords service_records_;  // of the latest pass; guarded by mu_
  std::map<std::string, std::unique_ptr<PodRuntime>> pods_;  // by uid; guarded by mu_
  std::map<std::string, std::string> log_paths_;         // "ns/name" -> newest log; guarded by mu_
  bool stopped_ = false;                                 // guarded by mu_
};

}  // namespace kube_testing
}  // namespace gaptrain

#endif  // GAPTRAIN_OPERATOR_TESTING_LOCAL_NODE_H_
