// PlanReconcile: one level-triggered reconcile of a TrainingJob, as a pure
// function from what is observed (observed_job.h) to what should change
// (a ReconcilePlan, carried out by plan_executor.h). No I/O, no clock, no
// randomness: the same observation always gives the same plan, and a
// reconcile that finds nothing to change plans nothing to write (no apply,
// no delete, no status, no ledger).
//
// The rules (issue 16; operator/trainingjob/README.md has the table):
//   - Children are created when missing and applied when the fields
//     gaptrain owns differ (desired is not a subset of observed; the
//     NetworkPolicy's spec must equal the desired one); pods are only
//     created (a pod's spec cannot change; a template change reaches a
//     pod when it is next recreated), a PVC's spec only at creation (its
//     metadata follows the retention policy). The token Secret (and
//     with TLS the certificate's, NAME-tls) is not observed (the operator
//     may create Secrets, not read them): it is created, create-only, in
//     each plan that creates a pod, before the pods; AlreadyExists keeps
//     the token (the certificate), and no Event says "created".
//   - /status: a job that has made no pods yet gets a status token (the
//     annotation kStatusTokenAnnotation, written with the ledger before the
//     Secret that holds it), and its coordinator asks for it.
//   - In-cluster TLS: a job that has made no pods yet gets it when the
//     operator runs with --job-tls and issued a certificate
//     (observed.tls); status.tls records it, and a job keeps what it
//     started with (status.tls, or its pods mounting NAME-tls), so one
//     an older operator started stays plaintext.
//   - A lost trainer or evaluator (pod_state.h) is counted once
//     (pod_ledger.h): a preemption is recreated at once and never counts
//     against backoffLimit; a failure counts in status.failures and is
//     recreated under restartPolicy OnFailure and Always, not under
//     Never, and under ExitCode only for exit codes 128-255 (or unknown).
//     A lost master or coordinator is recreated (it resumes from its
//     volume), counted in status.restarts (and in failures when it
//     failed), and the job is Restarting until both are ready again.
//   - The job fails when failures > backoffLimit (BackoffLimitExceeded),
//     when it has run activeDeadlineSeconds (DeadlineExceeded), when too
//     few trainers can still run (fewer than minReplicas left after
//     permanent failures), when the coordinator reports Failed, and at
//     once when its spec does not parse (FailedValidation, with the
//     parser's message). It succeeds when the coordinator reports
//     Succeeded. The coordinator's verdict takes effect once the
//     evaluator has scored the final model (its evaluation caught up with
//     the master's version), the evaluator has stopped, or five minutes
//     after the coordinator finished; until then only the progress
//     changes, so the job's accuracy is the final model's. Finished jobs
//     stay finished; their pods are deleted as cleanPodPolicy says, and the
//     job itself ttlSecondsAfterFinished after completionTime (never
//     without one).
//   - The model's export (spec.output): once the job has succeeded and its
//     master has stopped (stopped by cleanPodPolicy, or for the export
//     under None: its final checkpoint is written as it stops), the pod
//     NAME-export (desired_children.h's BuildExportPod) writes the model
//     to the output claim. Its end is status.output's phase (Succeeded, or
//     Failed with the pod's exit and last words), condition ModelExported
//     and Event ModelExported or ExportFailed; a failed export never fails
//     the job. A lost export pod is replaced, a changed spec.output exports
//     again, cleanPodPolicy All deletes the finished pod once its outcome is
//     in the status, and the TTL waits for an export under way.
//   - Scaling deletes the trainers with the highest indices (gracefully)
//     and creates the missing ones; suspend deletes every pod and keeps the
//     volumes, resume starts again (startTime restarts with it, so
//     activeDeadlineSeconds counts running time since the last resume).
//   - Gap-aware autoscaling (spec.workers.autoscale, job_autoscale.h):
//     while the job is Running, at most once per intervalSeconds, the
//     window since the last decision (the master's updates and Gap, the
//     trainers running, the preemptions) goes to DecideTrainers; the
//     decision and the next window go to status.autoscale, and a growth or
//     a shrink to spec.workers.replicas through the scale subresource
//     (scale_to), with a Normal Event ScaledUp or ScaledDown. The next
//     reconcile scales the pods as for `kubectl scale`.
//   - Pods the scheduler cannot place (PodScheduled=False, Unschedulable)
//     make condition PodsUnschedulable True with their count and the
//     scheduler's own message, and a Warning Event FailedScheduling when
//     it becomes True; it turns False once none waits (or the job is
//     suspended or finished). Children the API refuses are the executor's
//     to report (ReplicaFailure, plan_executor.h): only it sees the answer.
//   - spec.runPolicy.scheduleTimeoutSeconds (gang_release.h): a job with
//     fewer than minReplicas trainers ready for that long deletes its
//     trainers' pods (gracefully; neither preemptions nor failures), with
//     a Warning Event TrainersReleased, makes no trainer for its backoff,
//     then all of them; status.gang keeps the times.
//   - A trainer whose data store cannot be reached hands its task back,
//     and the coordinator's /status says so (dataUnavailable): condition
//     DataUnavailable True (StoreUnreachable) with the trainer, its
//     dataset's words and the tasks handed back, and a Warning Event
//     DataUnavailable as it becomes True; False (DataAvailable, a Normal
//     Event) once the coordinator no longer reports it.
//   - Kueue (kueue_workload.h; OperatorConfig::kueue, a job labelled
//     kueue.x-k8s.io/queue-name): the job's Workload is applied; until
//     Kueue admits it the job is Queued (no pods; condition Admitted False
//     with Kueue's reason, Normal Event TrainingJobQueued), then its pods
//     get the admitted flavors and at most the admitted trainers
//     (Admitted True, Event Admitted). Evicted: its pods are stopped
//     (Warning Event Evicted), and once none runs the quota reservation is
//     given back (a status patch of the Workload). Suspended: the Workload
//     is deactivated. Finished: the Workload is finished. An admission the
//     pods cannot meet (a node label their template sets otherwise) fails
//     the job (AdmissionFailed).
//   - The job's image (recorded_image.h): the reconcile that first makes
//     its pods records the image they get (where their template names
//     none) in status.image, and every later pod, the export's too, gets
//     that image, not the operator's current one. The annotation
//     gaptrain.io/image changes it for pods made from then on (Normal
//     Event ImageChanged).
//
// Deletes carry the pod's uid as a precondition (a replacement with the
// same name is never deleted by mistake); a pod that has finished, or a
// worker whose node is lost, is deleted with grace period 0.

#ifndef GAPTRAIN_OPERATOR_TRAININGJOB_RECONCILE_H_
#define GAPTRAIN_OPERATOR_TRAININGJOB_RECONCILE_H_

#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "operator/kube/resource.h"
#include "operator/trainingjob/observed_job.h"
#include "operator/trainingjob/operator_config.h"
#include "operator/trainingjob/pod_ledger.h"

namespace gaptrain {
namespace trainingjob {

// An object to server-side apply (or, create_only, to POST).
struct ChildApply {
  kube::Resource resource;
  nlohmann::json object;
  bool create_only = false;  // the Secret: created once, AlreadyExists is fine
  bool creates = false;      // it was not observed: this creates it
};

struct ChildDelete {
  kube::Resource resource;
  std::string name;
  std::string uid;  // precondition: only this incarnation
  std::optional<int64_t> grace_period_seconds;  // unset: the object's own
  std::string why;  // "scaled down to 2 trainers", ...
};

// A JSON merge patch of a child's status subresource (a Kueue Workload's:
// its quota given back, Finished), carrying the child's resourceVersion.
struct ChildStatusPatch {
  kube::Resource resource;
  std::string name;
  nlohmann::json patch;
  std::string why;  // "give back its quota reservation"
};

// An Event on the TrainingJob, recorded once the step it reports has
// succeeded.
struct PlannedEvent {
  enum class After {
    kLedger,  // the counts were written (preemptions, failures, restarts)
    kChild,   // the apply or delete of `child` succeeded
    kStatus,  // the status was written (or needed no write): phase changes
    kScale,   // spec.workers.replicas was written through the scale subresource
  };
  std::string type;    // "Normal" | "Warning"
  std::string reason;  // "WorkerPreempted"
  std::string action;  // "Recreate"
  std::string note;
  After after = After::kStatus;
  std::string child;  // kChild: "Pod/mnist-trainer-0"
};

struct ReconcilePlan {
  // Written first, as a merge patch with the job's resourceVersion.
  std::optional<PodLedger> ledger;
  // The job's annotations the operator sets (kStatusTokenAnnotation), in
  // the same patch.
  std::map<std::string, std::string> annotations;
  std::vector<ChildDelete> deletes;
  std::vector<ChildApply> applies;
  std::vector<ChildStatusPatch> status_patches;
  // The whole new status; unset when equal to the observed one.
  std::optional<nlohmann::json> status;
  std::vector<PlannedEvent> events;
  // Gap-aware autoscaling's growth or shrink (job_autoscale.h): the
  // trainers to write to spec.workers.replicas through the scale
  // subresource, once the status that records the decision is written.
  std::optional<uint32_t> scale_to;
  bool delete_job = false;  // ttlSecondsAfterFinished has passed
  // Reconcile again after this long even if nothing changes: progress
  // polling while the coordinator or the master can answer (their pods
  // ready), its deadline, its TTL, a gang release's wait. A job whose
  // master and coordinator are not ready (Pending on nodes) has none:
  // only events change what the plan reads, and they wake it.
  std::optional<std::chrono::seconds> requeue_after;
  // The observation's time: what the executor stamps the conditions it
  // sets with (ReplicaFailure), as the plan stamps its own.
  std::chrono::system_clock::time_point now;

  // Whether carrying the plan out writes nothing to the API server
  // (events aside, which only come with writes).
  bool WritesNothing() const {
    return !ledger && annotations.empty() && deletes.empty() && applies.empty() && status_patches.empty() && !status &&
           !scale_to && !delete_job;
  }
};

ReconcilePlan PlanReconcile(const ObservedJob& observed, const OperatorConfig& config);

// "Pod/mnist-trainer-0": how events name the child they report.
std::string ChildKey(const kube::Resource& resource, const std::string& name);

}  // namespace trainingjob
}  // namespace gaptrain

#endif  // GAPTRAIN_OPERATOR_TRAININGJOB_RECONCILE_H_
