// JobReconciler: the reconcile function gaptrain-operator's Controller runs
// for one TrainingJob key ("namespace/name"): it reads the job and the
// children labelled gaptrain.io/job-name=NAME from the informers' caches,
// reads the running job's progress (progress_reader.h), plans the
// reconcile (trainingjob::PlanReconcile, a pure function), carries the plan
// out (trainingjob::ExecutePlan) and tells the Controller when to come
// back.
//
// What callers may rely on:
//   - A key whose job is not in the cache (deleted) is done: nothing is
//     written, its progress baseline is forgotten.
//   - A job the operator cannot read (a spec that does not parse, a bad
//     template) is not an error: the plan sets Failed/FailedValidation with
//     the parser's message. Nothing here throws on odd objects.
//   - An API error is returned as a controller::Result error whose reason
//     names it for metrics (Conflict, NotFound, Invalid, Forbidden,
//     Unauthorized, AlreadyExists, Timeout, TooManyRequests, Unavailable,
//     else the status code's name); the Controller retries with backoff.
//     Events that could not be recorded are logged, not retried.
//   - Every log line names the job: "job=NS/NAME ...".
//   - Reconcile() may run concurrently for different keys.

#ifndef GAPTRAIN_OPERATOR_JOB_RECONCILER_H_
#define GAPTRAIN_OPERATOR_JOB_RECONCILER_H_

#include <string>

#include "operator/controller/controller.h"
#include "operator/controller/informer.h"
#include "operator/kube/client.h"
#include "operator/operator_metrics.h"
#include "operator/progress_reader.h"
#include "operator/trainingjob/operator_config.h"
#include "services/base/status.h"

namespace gaptrain {

// The informers a reconcile reads; children are indexed by the
// gaptrain.io/job-name label. None for Secrets: the operator reads none
// (trainingjob/reconcile.h). network_policies is null when jobs get no
// NetworkPolicy (OperatorConfig::network_policy off).
struct JobCaches {
  controller::Informer* jobs = nullptr;
  controller::Informer* pods = nullptr;
  controller::Informer* services = nullptr;
  controller::Informer* config_maps = nullptr;
  controller::Informer* persistent_volume_claims = nullptr;
  controller::Informer* network_policies = nullptr;
  // Kueue's (OperatorConfig::kueue), else null: the jobs' Workloads
  // (labelled as the children), every ResourceFlavor and every
  // WorkloadPriorityClass (cluster-scoped).
  controller::Informer* workloads = nullptr;
  controller::Informer* resource_flavors = nullptr;
  controller::Informer* workload_priority_classes = nullptr;
  // PriorityClass (cluster-scoped): a Workload's priority from its pods'.
  controller::Informer* priority_classes = nullptr;
};

// The metrics reason of a failed API call ("Conflict", ...).
std::string ApiErrorReason(const Status& status);

class JobReconciler {
 public:
  // Everything must outlive the reconciler; `metrics` may be null.
  JobReconciler(kube::Client* client, JobCaches caches, trainingjob::OperatorConfig config,
                ProgressReader* progress, OperatorMetrics* metrics);

  controller::Result Reconcile(const std::string& key);

 private:
  kube::Client* const client_;
  const JobCaches caches_;
  const trainingjob::OperatorConfig config_;
  ProgressReader* const progress_;
  OperatorMetrics* const metrics_;
};

}  // namespace gaptrain

#endif  // GAPTRAIN_OPERATOR_JOB_RECONCILER_H_
