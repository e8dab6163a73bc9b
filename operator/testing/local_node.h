// LocalNode: a test "node" for the FakeApiServer: scheduler, storage
// provisioner and kubelet in one, running every pod's container as a local
// process, so that the operator's end-to-end test sees pods run, become
// ready, fail, get preempted and go away as they would in a cluster.
//
//   LocalNode::Options options;
//   options.work_dir = TestDir("node");
//   options.binaries = {{"gaptrain-master", runfiles_path_of_master}, ...};
//   std::unique_ptr<LocalNode> node;
//   Status started = LocalNode::Start(server.get(), options, &node);
//   if (started.code() == Status::Code::kPermissionDenied) GTEST_SKIP() << started.message();
//
// What it does, as far as the API can tell:
//   - Scheduling: every pod without spec.nodeName (and with the default
//     scheduler) is bound to this node (spec.nodeName, PodScheduled True)
//     once the claims it mounts exist; until then PodScheduled is False,
//     reason Unschedulable. Node selectors, affinity and taints are not
//     considered: there is one node.
//   - Storage: every claim that is not Bound is bound at once
//     (spec.volumeName "pvc-UID", status Bound with the requested
//     capacity and access modes) to a host directory of its own under
//     claims_dir, which outlives the pods that use it.
//   - Networking: each pod gets its own network namespace, connected to a
//     bridge the node owns, and an address of the node's private /24 (a pod
//     name keeps its address for the node's lifetime; see pod_network.h).
//     status.hostIP is the bridge's address. The root namespace, where the
//     operator and the test run, reaches every pod IP.
//   - DNS: each pod's /etc/hosts (see cluster_hosts.h) maps every Service
//     name (SVC, SVC.NS, SVC.NS.svc, SVC.NS.svc.cluster.local) to the
//     addresses of the pods it selects, rewritten in place whenever pods or
//     Services change, so a name that did not resolve when the process
//     started resolves once its pod runs (glibc and gRPC's c-ares resolver
//     both read it). Its /etc/resolv.conf names no reachable server, so
//     other names fail at once rather than after a DNS timeout.
//   - Containers: the pod must have exactly one container, no init
//     containers and restartPolicy Never (the operator's pods); others wait
//     with CreateContainerConfigError saying so. The container needs a
//     command (there are no images). Its command + args are expanded and
//     its environment resolved as the kubelet does (see container_env.h);
//     the process also gets HOSTNAME (the pod name), HOME=/root,
//     Options::extra_env, and a PATH whose first directory holds
//     Options::binaries under their command names, so "gaptrain-master"
//     resolves to the test's binary (a bare command is looked up on the
//     host's file system, before the volumes are mounted). It runs in the
//     pod's network namespace, with the pod name as hostname and the
//     volumes bind-mounted at their mountPaths in a private mount namespace
//     (see pod_volumes.h and container_process.h; missing mountpoints, such
//     as /etc/gaptrain, are created as empty directories on the host and
//     left there). stdout and stderr go to LogPath(), like `kubectl logs`.
//   - Status (see pod_status.h), through the store, as the kubelet writes
//     it: Pending (waiting ContainerCreating while volumes or the network
//     are not ready; CreateContainerConfigError for env and command errors
//     such as a missing secret, retried as the API objects change), Running
//     when the process starts, Succeeded or Failed when it exits (a command
//     that cannot be executed ends Failed with exit code 128, reason
//     StartError). Ready follows the readinessProbe (httpGet or tcpSocket),
//     or is True while running when there is none. A livenessProbe that
//     fails kills the container (grace: terminationGracePeriodSeconds) and
//     the pod ends Failed. startupProbe, exec and grpc probes are refused
//     (CreateContainerConfigError).
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
// How it talks to the API: through the FakeApiServer's C++ hooks (Update,
// Delete, WaitFor), not over HTTP, so its writes stay out of the request
// log and CountWriteRequests(), and InjectFault, DropAllConnections and
// CloseAllWatches affect the operator only. It reacts to every write to
// the store. `server` must outlive the node.
//
// Processes and cleanup: containers are started from the node's own thread
// with PR_SET_PDEATHSIG, so their main processes die with the test process
// even when it crashes (their children then outlive it, unless they die of
// losing their parent); each leads its own process group, which is
// SIGKILLed when the main process exits. Stop() (and the destructor) kills every container,
// removes every namespace, veth and the bridge, and the node's pod
// directories (hosts files, secret, configMap and emptyDir volumes); it
// keeps log_dir and claims_dir. Names are per process (see
// pod_network.h) and leftovers of crashed runs are removed by the next
// Start().
//
// Start() fails with PERMISSION_DENIED when namespaces cannot be made (not
// root, no CAP_NET_ADMIN/CAP_SYS_ADMIN): tests report it with GTEST_SKIP.
// Bazel's linux-sandbox is such a place: tag the test "no-sandbox" (the
// node's names also rely on the host's pid namespace).
// Only one LocalNode should serve a FakeApiServer (there is no scheduler to
// choose between two).
//
// Thread-safe.

#ifndef GAPTRAIN_OPERATOR_TESTING_LOCAL_NODE_H_
#define GAPTRAIN_OPERATOR_TESTING_LOCAL_NODE_H_

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

#include "operator/testing/cluster_snapshot.h"
#include "operator/testing/container_env.h"
#include "operator/testing/fake_api_server.h"
#include "operator/testing/pod_network.h"
#include "services/common/status.h"

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

  static Status Start(FakeApiServer* server, const Options& options,
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

  LocalNode(FakeApiServer* server, Options options);

  // Copies the store after every write and wakes the node thread.
  void WatchStore();
  // The node thread: a Pass() after every wake-up and at kill deadlines.
  void Run();
  void Wake();

  // Everything below runs with mu_ held.
  void Pass(const ClusterSnapshot& snapshot);
  void BindClaims(const ClusterSnapshot& snapshot);
  void Schedule(const ClusterSnapshot& snapshot);
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

  FakeApiServer* const server_;
  const Options options_;
  std::string bin_dir_;
  std::string pods_dir_;
  std::string host_ip_;
  std::string subnet_;
  std::string name_prefix_;

  std::mutex stop_mu_;  // serialises Stop()
  std::thread watcher_;
  std::thread runner_;

  // Lock order: mu_ before wake_mu_.
  std::mutex wake_mu_;
  std::condition_variable wake_cv_;
  bool wake_ = false;                                  // guarded by wake_mu_
  bool stopping_ = false;                              // guarded by wake_mu_
  std::shared_ptr<const ClusterSnapshot> latest_;      // guarded by wake_mu_

  mutable std::mutex mu_;
  std::unique_ptr<PodNetwork> network_;                  // guarded by mu_
  std::map<std::string, std::unique_ptr<PodRuntime>> pods_;  // by uid; guarded by mu_
  std::map<std::string, std::string> log_paths_;         // "ns/name" -> newest log; guarded by mu_
  bool stopped_ = false;                                 // guarded by mu_
};

}  // namespace kube_testing
}  // namespace gaptrain

#endif  // GAPTRAIN_OPERATOR_TESTING_LOCAL_NODE_H_
