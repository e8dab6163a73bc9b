// OperatorProcess: a running gaptrain-operator. It wires the parts
// together: the cluster config (--kubeconfig, else $KUBECONFIG,
// ~/.kube/config, in-cluster), informers for TrainingJobs and for their
// children (Pods, Services, ConfigMaps, PVCs and, unless --network-policy
// is false, NetworkPolicies labelled gaptrain.io/job-name, indexed by it;
// no Secrets: the operator creates the job's token, never reads one) in one
// namespace or all, the
// Controller whose workers run JobReconciler, Lease leader election, and
// the HTTP endpoints: /metrics (operator_metrics.h) on the metrics port,
// /healthz and /readyz on the health port.
//
// What callers may rely on:
//   - Start() returns once the endpoints listen (and the ports file is
//     written); the informers fill their caches in the background, so
//     standbys are warm. Errors (a cluster config that cannot be resolved,
//     a port in use, the operator's own pod unreadable when the job pods'
//     image is to be its container's: job_image.h) name their source.
//   - Only the leader reconciles: with leader election (the default) the
//     Controller starts when this replica acquires the Lease; without it,
//     at once. Either way it first waits for every informer to sync.
//   - /healthz answers 200 while the process runs. /readyz answers 200 once
//     every informer has synced (standbys too, as controller-runtime's
//     readiness does), else 503 naming those still syncing.
//   - Losing the Lease stops reconciling at once (the reconciles in flight
//     finish) and WaitForFailure() reports it: the process must exit
//     non-zero and be restarted, as controller-runtime's managers do. An
//     informer that never syncs (no CRD installed, no permission) is
//     reported the same way after two minutes.
//   - Shutdown() (SIGTERM) lets the reconciles in flight finish, starts no
//     new one, releases the Lease (a standby takes over at its next retry
//     instead of after the lease duration), then stops the informers and
//     the endpoints. Idempotent; the destructor calls it.

#ifndef GAPTRAIN_OPERATOR_OPERATOR_PROCESS_H_
#define GAPTRAIN_OPERATOR_OPERATOR_PROCESS_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "operator/controller/controller.h"
#include "operator/controller/informer.h"
#include "operator/controller/leader_election.h"
#include "operator/job_reconciler.h"
#include "operator/kube/client.h"
#include "operator/operator_metrics.h"
#include "operator/operator_options.h"
#include "operator/progress_reader.h"
#include "services/base/status.h"
#include "services/net/http_server.h"

namespace gaptrain {

// How the operator's log begins a warning the API server sent it (a
// deprecated API or field, a value it ignores), once per distinct text.
inline constexpr char kApiServerWarningLog[] = "the API server warns: ";

class OperatorProcess {
 public:
  static Status Start(const OperatorOptions& options, std::unique_ptr<OperatorProcess>* process);
  ~OperatorProcess();

  OperatorProcess(const OperatorProcess&) = delete;
  OperatorProcess& operator=(const OperatorProcess&) = delete;

  uint16_t metrics_port() const { return metrics_port_; }
  uint16_t health_port() const { return health_port_; }

  // Waits up to `timeout` for the process to fail on its own (leadership
  // lost, the controller unable to start): true with *why set then.
  bool WaitForFailure(std::chrono::milliseconds timeout, Status* why);

  void Shutdown();

 private:
  explicit OperatorProcess(const OperatorOptions& options);

  Status Wire(const kube::ClusterConfig& config);
  Status ServeEndpoints();
  Status StartLeaderElection();
  // The supervisor thread: starts the Controller once leading, stops it
  // when the Lease is lost.
  void Supervise();
  void Fail(const Status& why);
  std::string SyncingInformers() const;

  const OperatorOptions options_;
  std::unique_ptr<kube::Client> cache_client_;  // informers' lists and watches
  std::unique_ptr<kube::Client> api_client_;    // the reconciles' writes
  std::unique_ptr<kube::Client> lease_client_;  // the elector's (short timeout)
  std::shared_ptr<OperatorMetrics> metrics_;
  std::unique_ptr<ProgressReader> progress_;
  std::vector<std::unique_ptr<controller::Informer>> informers_;
  controller::Informer* jobs_ = nullptr;  // the TrainingJobs, one of informers_
  std::unique_ptr<JobReconciler> reconciler_;
  std::unique_ptr<controller::Controller> controller_;
  std::unique_ptr<controller::LeaderElector> elector_;
  std::unique_ptr<HttpServer> metrics_server_;
  std::unique_ptr<HttpServer> health_server_;  // null when the metrics server serves health too
  uint16_t metrics_port_ = 0;
  uint16_t health_port_ = 0;
  std::thread elector_thread_;
  std::thread supervisor_;

  mutable std::mutex mu_;
  std::condition_variable changed_;
  bool leading_ = false;   // holds the Lease (or no election)
  bool lost_ = false;      // the Lease was lost
  bool stopping_ = false;  // Shutdown() began
  bool shut_down_ = false;
  Status failure_;         // set once the process must end on its own
};

}  // namespace gaptrain

#endif  // GAPTRAIN_OPERATOR_OPERATOR_PROCESS_H_
