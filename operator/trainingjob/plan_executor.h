// ExecutePlan: carries out a ReconcilePlan (reconcile.h) through the
// Kubernetes API, in the order that keeps counting exact:
//
//   1. the pod ledger and the plan's annotations (a new job's status
//      token): a JSON merge patch of the job's annotations carrying
//      the resourceVersion the plan was made from; on any error nothing
//      else is done (409 Conflict: the plan was made from a stale job);
//   1a. a phase that ends the job (Succeeded, Failed) goes to the status
//      now, as in step 4, before the deletes it causes remove what it was
//      read from; on any error nothing else is done;
//   2. deletes, with the pod's uid as a precondition, Background
//      propagation and the plan's grace period (404, and 409 from the uid
//      precondition, mean it is already gone: fine);
//   3. applies: server-side apply (field manager gaptrain-operator, force);
//      the Secret is created instead, and AlreadyExists is fine;
//   3a. children's status patches (a Kueue Workload's): a merge patch of
//      the status subresource carrying the child's resourceVersion (409
//      Conflict: Kueue wrote meanwhile; reconcile again);
//   4. the status: a merge patch of the status subresource from the
//      observed status to the plan's, carrying the resourceVersion (a 409
//      Conflict means reconcile again), with condition ReplicaFailure as
//      the child writes went: True when the API refused one (403
//      Forbidden: admission, PodSecurity, a ResourceQuota, RBAC; 400 or
//      422: invalid), reason FailedCreate, FailedUpdate or FailedDelete
//      and the API's own message, as a ReplicaSet reports it; False
//      (ChildrenAccepted) once every child write of a reconcile succeeds;
//      left alone when one failed otherwise (unavailable: no verdict).
//      The Warning Event of that reason ("Error creating: <the API's
//      message>") is recorded only when the condition becomes True or its
//      message changes, so a refusal retried with backoff for hours is one
//      Event, not one per retry;
//   4a. Gap-aware autoscaling's growth or shrink (plan.scale_to), only
//      once the status is written (or needed no write): a merge patch of
//      the scale subresource, {"spec": {"replicas": N}} as `kubectl scale`
//      sends, carrying the resourceVersion the status write returned, so
//      it applies to the job the decision was made from or not at all
//      (409 Conflict: the job changed since; reconcile again). The status
//      goes first because it records the decision and starts the next
//      window: a status write that fails scales nothing (the next
//      reconcile decides again, from the same window), and a scale that
//      fails after it is carried out by a later reconcile from
//      status.autoscale.lastDecision while the spec is unchanged
//      (job_autoscale.h). So a decision is neither lost nor applied twice;
//   5. Events, each only if the step it reports succeeded (best effort:
//      a failed Event is reported, not retried); ScaledUp and ScaledDown
//      only once the scale was written;
//   6. the job's own deletion (ttlSecondsAfterFinished), Foreground.
//
// What callers may rely on: the returned Status is OK when every write
// succeeded; otherwise it is the first failure's code (so IsConflict and
// IsRetryable work on it) with a message naming what failed ("create pods
// default/mnist-trainer-3: ...") and how many steps failed. Steps after a
// failed child are still attempted; the caller requeues with backoff.

#ifndef GAPTRAIN_OPERATOR_TRAININGJOB_PLAN_EXECUTOR_H_
#define GAPTRAIN_OPERATOR_TRAININGJOB_PLAN_EXECUTOR_H_

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "operator/kube/client.h"
#include "operator/trainingjob/reconcile.h"
#include "services/base/status.h"

namespace gaptrain {
namespace trainingjob {

struct ExecutionReport {
  int writes = 0;                         // requests that changed something
  int events = 0;                         // Events recorded
  std::vector<std::string> event_errors;  // Events that could not be recorded
  // Whether the plan's ledger and status were written (false when the plan
  // had none): what the counts and the phase change the plan carries took
  // effect, for the operator's metrics.
  bool ledger_written = false;
  bool status_written = false;
  bool scaled = false;  // plan.scale_to was written through the scale subresource
};

// `job` is the object the plan was computed from (its name, namespace,
// uid, resourceVersion and status are used).
Status ExecutePlan(kube::Client* client, const nlohmann::json& job, const ReconcilePlan& plan,
                   const std::string& reporting_instance, ExecutionReport* report = nullptr);

}  // namespace trainingjob
}  // namespace gaptrain

#endif  // GAPTRAIN_OPERATOR_TRAININGJOB_PLAN_EXECUTOR_H_
