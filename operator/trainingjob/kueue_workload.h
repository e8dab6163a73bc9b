// Kueue admission for a TrainingJob: the Workload that stands for the job
// in Kueue's queues, what Kueue decided about it, and the writes Kueue
// expects of a job's controller. Pure functions; the reconcile (reconcile.h)
// uses them when the operator runs with --kueue and the job carries Kueue's
// queue label, as a Job, JobSet or PyTorchJob would:
//
//   metadata:
//     labels: {kueue.x-k8s.io/queue-name: team-queue}   # a LocalQueue
//
// The protocol is Kueue's job framework's (sigs.k8s.io/kueue
// pkg/controller/jobframework), played by the operator as Kueue's own
// reconciler plays it for its built-in kinds:
//   - one Workload per job, NAME's own (owner reference, labels
//     gaptrain.io/job-name and kueue.x-k8s.io/job-uid), with a PodSet per
//     role: master, coordinator, evaluator (when the job has one) of count
//     1, and trainers of count replicas (maxReplicas when the job
//     autoscales) and minCount minReplicas, so Kueue may admit it with
//     fewer trainers (partial admission) but never fewer than it runs with;
//     each PodSet's template is the role's pod as the operator makes it,
//     so its requests are what the quota counts;
//   - the job makes no pods until the Workload is Admitted (QuotaReserved
//     and every admission check Ready), then its pods get each PodSet's
//     admitted flavors' nodeLabels (nodeSelector) and tolerations, and the
//     admission checks' podSetUpdates; it runs at most the admitted
//     trainers;
//   - Evicted (preempted, deactivated, its queue stopped): every pod is
//     stopped, and once none is left the Workload's quota reservation is
//     cleared (QuotaReserved False, Pending), so Kueue queues it again;
//   - a finished job finishes its Workload (Finished True, Succeeded or
//     Failed), which gives its quota back;
//   - spec.runPolicy.suspend deactivates the Workload (spec.active false)
//     and resuming activates it again;
//   - the label kueue.x-k8s.io/priority-class names a
//     WorkloadPriorityClass, whose value is the Workload's priority (Kueue
//     orders and preempts by it); without it, the PriorityClass its pods
//     name (spec.*.template's priorityClassName, the trainers' first) gives
//     the priority, as for Kueue's own integrations.
// While the Workload holds quota its PodSets cannot change (Kueue refuses
// it): a job scaled then keeps the admitted trainers until its next
// admission.

#ifndef GAPTRAIN_OPERATOR_TRAININGJOB_KUEUE_WORKLOAD_H_
#define GAPTRAIN_OPERATOR_TRAININGJOB_KUEUE_WORKLOAD_H_

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "operator/trainingjob/desired_children.h"
#include "services/api/training_job.h"
#include "services/base/status.h"

namespace gaptrain {
namespace trainingjob {

// Kueue's label naming the LocalQueue a job is sent to.
constexpr char kQueueNameLabel[] = "kueue.x-k8s.io/queue-name";
// Kueue's label of a Workload: its job's uid.
constexpr char kJobUidLabel[] = "kueue.x-k8s.io/job-uid";
// How Kueue's configuration names the TrainingJob kind
// (integrations.externalFrameworks).
constexpr char kKueueExternalFramework[] = "TrainingJob.v1alpha1.gaptrain.io";

// The job's LocalQueue ("" when it names none).
std::string QueueNameOf(const nlohmann::json& job);

// trainingjob-NAME-UID5: the job's Workload (the uid's first five
// characters: a job deleted and made again gets a Workload of its own while
// the old one is still being collected).
std::string WorkloadNameOf(const nlohmann::json& job);

// Kueue's label naming a job's WorkloadPriorityClass.
constexpr char kPriorityClassLabel[] = "kueue.x-k8s.io/priority-class";

// The classes a Workload's priority may come from, as observed.
struct WorkloadPriorities {
  const std::vector<nlohmann::json>& workload_classes;  // kueue.x-k8s.io
  const std::vector<nlohmann::json>& pod_classes;       // scheduling.k8s.io
};

// The Workload the job wants: PodSets from `desired` (BuildDesiredChildren's
// pods), queueName its label, active unless suspended, and a priority: the
// WorkloadPriorityClass its label names, else the PriorityClass its pods
// name (trainers first, then master, coordinator, evaluator); neither: no
// priority, 0 to Kueue. When `observed` holds quota, its PodSets and
// queueName are kept (Kueue refuses a change). A class named but not there
// is NOT_FOUND, naming it: Kueue's own integrations make no Workload then
// either (and the API server would refuse the pods).
Status DesiredWorkload(const nlohmann::json& job, const TrainingJob& spec,
                       const DesiredChildren& desired, const nlohmann::json* observed,
                       const WorkloadPriorities& priorities, nlohmann::json* workload);

// Whether applying `desired` (DesiredWorkload) would change `observed`:
// a field gaptrain sets differs, a PodSet is gone, or spec.active must
// become false, or true again after a suspend (when this operator set it).
bool WorkloadNeedsApply(const nlohmann::json& desired, const nlohmann::json& observed);

// Whether the Workload holds quota (QuotaReserved True).
bool HoldsQuota(const nlohmann::json& workload);

// What one PodSet's admission adds to its pods.
struct PodSetAdmission {
  nlohmann::json node_selector = nlohmann::json::object();
  nlohmann::json tolerations = nlohmann::json::array();
  nlohmann::json labels = nlohmann::json::object();
  nlohmann::json annotations = nlohmann::json::object();
  std::optional<uint32_t> count;  // the admitted count, when Kueue says
  std::string flavors;            // "cpu=on-demand, memory=on-demand", for messages
};

// What Kueue decided about a job's Workload.
struct WorkloadAdmission {
  enum class State {
    kQueued,    // no quota (yet), or not every admission check is Ready
    kAdmitted,  // run, as `pod_sets` say
    kEvicted,   // Evicted True while it holds quota: stop every pod
    kFinished,  // Finished True
  };
  State state = State::kQueued;
  std::string cluster_queue;
  // Why, in Kueue's words (the QuotaReserved or Evicted condition's message).
  std::string reason;
  std::string message;
  std::map<std::string, PodSetAdmission> pod_sets;  // by PodSet name, when admitted
};

// Reads `workload`; `flavors` are the ResourceFlavors as read (their
// nodeLabels and tolerations). An admission naming a flavor that is not
// among them is an error (NOT_FOUND, naming it): the reconcile waits.
Status ReadWorkloadAdmission(const nlohmann::json& workload,
                             const std::vector<nlohmann::json>& flavors,
                             WorkloadAdmission* out);

// Adds each admitted PodSet's node selector, tolerations, labels and
// annotations to `desired`'s pods of that role, and drops the trainers
// beyond the admitted count. A node selector the admission sets to another
// value than the pod template's is an error (FAILED_PRECONDITION, naming
// the key), as in Kueue's own integrations: that pod could not run where
// the quota is.
Status ApplyAdmission(const WorkloadAdmission& admission, DesiredChildren* desired);

// The Workload's PodSet name of a role ("master", ..., "trainers").
std::string PodSetName(ReplicaType type);

// Merge patches of the Workload's status subresource (each carries the
// Workload's resourceVersion: a 409 Conflict means Kueue wrote meanwhile):
// its quota reservation given back after an eviction, QuotaReserved and
// Admitted False, Requeued True when Kueue preempted it (as Kueue's job
// reconciler writes it)...
nlohmann::json ClearReservationPatch(const nlohmann::json& workload, const std::string& now);
// ...and Finished True, reason Succeeded or Failed.
nlohmann::json FinishedPatch(const nlohmann::json& workload, bool succeeded,
                             const std::string& message, const std::string& now);

}  // namespace trainingjob
}  // namespace gaptrain

#endif  // GAPTRAIN_OPERATOR_TRAININGJOB_KUEUE_WORKLOAD_H_
