// PodState: what the reconcile needs to know of one observed pod: which
// replica it is, whether it runs and is ready, and whether (and how) it
// was lost. Pure functions of the pod object.
//
// How a pod counts as lost (the contract's rules, issue 16):
//   preempted  the pod carries condition DisruptionTarget=True; its
//              status.reason is Evicted, NodeLost, Terminated, Shutdown or
//              NodeShutdown; its phase is Unknown (the node stopped
//              answering); it is being deleted (deletionTimestamp) while
//              still running; or it exited 0 (phase Succeeded) while the
//              job had not ended, which a worker does only after SIGTERM.
//   failed     phase Failed without any of the above: the gaptrain
//              container (else the first that failed) exited non-zero;
//              its exit code when the kubelet reported one.
//   completed  it exited 0 after the job ended.
// Nothing else (Pending, Running, ready or not) is a loss.
//
// A pod waits for a node (`unschedulable`) while it is Pending, not being
// deleted, not bound (no spec.nodeName) and the scheduler has set its
// condition PodScheduled=False with reason Unschedulable; the condition's
// message is the scheduler's own ("0/3 nodes are available: ...").

#ifndef GAPTRAIN_OPERATOR_TRAININGJOB_POD_STATE_H_
#define GAPTRAIN_OPERATOR_TRAININGJOB_POD_STATE_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace gaptrain {
namespace trainingjob {

// Labels on every child; pods also carry the replica's type and index.
constexpr char kJobNameLabel[] = "gaptrain.io/job-name";
constexpr char kReplicaTypeLabel[] = "gaptrain.io/replica-type";
constexpr char kReplicaIndexLabel[] = "gaptrain.io/replica-index";
// The container gaptrain runs in every pod.
constexpr char kContainerName[] = "gaptrain";

enum class ReplicaType { kMaster, kCoordinator, kEvaluator, kTrainer };
constexpr ReplicaType kReplicaTypes[] = {ReplicaType::kMaster, ReplicaType::kCoordinator,
                                         ReplicaType::kEvaluator, ReplicaType::kTrainer};

// "master", "coordinator", "evaluator", "trainer": the label value.
const char* ReplicaTypeLabelValue(ReplicaType type);
// "Master", ...: the key in status.replicaStatuses.
const char* ReplicaTypeStatusKey(ReplicaType type);
std::optional<ReplicaType> ReplicaTypeFromLabel(const std::string& value);

enum class PodLoss { kNone, kPreempted, kFailed, kCompleted };

struct PodState {
  std::string name;
  std::string uid;
  std::optional<ReplicaType> type;  // absent: not labelled as a gaptrain replica
  int64_t index = -1;               // the replica index label; -1 when missing or bad
  std::string phase;                // status.phase; "" before the kubelet wrote one
  bool ready = false;               // condition Ready=True
  bool terminating = false;         // metadata.deletionTimestamp is set
  PodLoss loss = PodLoss::kNone;
  std::optional<int64_t> exit_code;  // of the failed (or exited) container, when known
  // Why it counts as lost, for events and conditions: "DisruptionTarget
  // (TerminationByKubelet)", "exit code 1 (Error)", "deleted", ...
  std::string loss_reason;
  // The node is gone or unreachable: the kubelet will never confirm a
  // graceful deletion.
  bool node_lost = false;
  // The scheduler found no node for it; why, in the scheduler's words.
  bool unschedulable = false;
  std::string scheduling_message;

  // Pending or Running, not being deleted.
  bool active() const { return !terminating && (phase == "Pending" || phase == "Running" || phase.empty()); }
  bool running() const { return !terminating && phase == "Running"; }
  bool finished() const { return phase == "Succeeded" || phase == "Failed"; }
};

// `job_ended`: the job is known to have finished (the coordinator said
// so), so a worker that exited 0 completed rather than left.
PodState ReadPodState(const nlohmann::json& pod, bool job_ended);

}  // namespace trainingjob
}  // namespace gaptrain

#endif  // GAPTRAIN_OPERATOR_TRAININGJOB_POD_STATE_H_
