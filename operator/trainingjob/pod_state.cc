#include "operator/trainingjob/pod_state.h"

#include <cstdlib>

#include "operator/trainingjob/object_fields.h"

namespace gaptrain {
namespace trainingjob {
namespace {

using nlohmann::json;

bool IsDigits(const std::string& s) {
  if (s.empty() || s.size() > 9) return false;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

// The condition `type` with status True, or null.
const json* TrueCondition(const json& pod, const char* type) {
  for (const json& c : ArrayAt(pod, {"status", "conditions"})) {
    if (StringAt(c, {"type"}) == type && StringAt(c, {"status"}) == "True") return &c;
  }
  return nullptr;
}

// The terminated state of the container that explains the pod's end: the
// gaptrain container when it terminated, else the first that exited
// non-zero, else the first that terminated.
const json* TerminatedContainer(const json& pod) {
  const json* chosen = nullptr;
  int rank = 0;  // 3: gaptrain's; 2: non-zero; 1: any
  for (const json& c : ArrayAt(pod, {"status", "containerStatuses"})) {
    const json* t = FieldAt(c, {"state", "terminated"});
    if (t == nullptr || !t->is_object()) continue;
    const int r = StringAt(c, {"name"}) == kContainerName ? 3
                  : IntegerAt(*t, {"exitCode"}).value_or(0) != 0 ? 2 : 1;
    if (r > rank) {
      rank = r;
      chosen = t;
    }
  }
  return chosen;
}

}  // namespace

const char* ReplicaTypeLabelValue(ReplicaType type) {
  switch (type) {
    case ReplicaType::kMaster: return "master";
    case ReplicaType::kCoordinator: return "coordinator";
    case ReplicaType::kEvaluator: return "evaluator";
    case ReplicaType::kTrainer: return "trainer";
  }
  return "trainer";
}

const char* ReplicaTypeStatusKey(ReplicaType type) {
  switch (type) {
    case ReplicaType::kMaster: return "Master";
    case ReplicaType::kCoordinator: return "Coordinator";
    case ReplicaType::kEvaluator: return "Evaluator";
    case ReplicaType::kTrainer: return "Trainer";
  }
  return "Trainer";
}

std::optional<ReplicaType> ReplicaTypeFromLabel(const std::string& value) {
  for (ReplicaType t : kReplicaTypes) {
    if (value == ReplicaTypeLabelValue(t)) return t;
  }
  return std::nullopt;
}

PodState ReadPodState(const json& pod, bool job_ended) {
  PodState s;
  s.name = NameOf(pod);
  s.uid = UidOf(pod);
  s.type = ReplicaTypeFromLabel(StringAt(pod, {"metadata", "labels", kReplicaTypeLabel}));
  const std::string index = StringAt(pod, {"metadata", "labels", kReplicaIndexLabel});
  if (IsDigits(index)) s.index = std::atol(index.c_str());
  s.phase = StringAt(pod, {"status", "phase"});
  s.ready = TrueCondition(pod, "Ready") != nullptr;
  s.terminating = IsTerminating(pod);
  if ((s.phase.empty() || s.phase == "Pending") && !s.terminating &&
      StringAt(pod, {"spec", "nodeName"}).empty()) {
    for (const json& c : ArrayAt(pod, {"status", "conditions"})) {
      if (StringAt(c, {"type"}) == "PodScheduled" && StringAt(c, {"status"}) == "False" &&
          StringAt(c, {"reason"}) == "Unschedulable") {
        s.unschedulable = true;
        s.scheduling_message = StringAt(c, {"message"});
      }
    }
  }

  const json* terminated = TerminatedContainer(pod);
  if (terminated != nullptr) s.exit_code = IntegerAt(*terminated, {"exitCode"});
  const std::string status_reason = StringAt(pod, {"status", "reason"});

  if (const json* disruption = TrueCondition(pod, "DisruptionTarget")) {
    s.loss = PodLoss::kPreempted;
    const std::string why = StringAt(*disruption, {"reason"});
    s.loss_reason = why.empty() ? "DisruptionTarget" : "DisruptionTarget (" + why + ")";
    s.node_lost = status_reason == "NodeLost";
    return s;
  }
  if (status_reason == "Evicted" || status_reason == "NodeLost" ||
      status_reason == "Terminated" || status_reason == "Shutdown" ||
      status_reason == "NodeShutdown") {
    s.loss = PodLoss::kPreempted;
    s.loss_reason = "node event " + status_reason;
    s.node_lost = status_reason == "NodeLost";
    return s;
  }
  if (s.phase == "Unknown") {
    s.loss = PodLoss::kPreempted;
    s.loss_reason = "node unreachable (phase Unknown)";
    s.node_lost = true;
    return s;
  }
  if (s.phase == "Failed") {
    s.loss = PodLoss::kFailed;
    if (s.exit_code) {
      const std::string why = terminated != nullptr ? StringAt(*terminated, {"reason"}) : "";
      s.loss_reason = "exit code " + std::to_string(*s.exit_code) + (why.empty() ? "" : " (" + why + ")");
    } else {
      s.loss_reason = status_reason.empty() ? "pod failed" : "pod failed (" + status_reason + ")";
    }
    return s;
  }
  if (s.phase == "Succeeded") {
    if (job_ended) {
      s.loss = PodLoss::kCompleted;
      s.loss_reason = "completed";
    } else {
      s.loss = PodLoss::kPreempted;
      s.loss_reason = "exited 0 before the job ended (SIGTERM)";
    }
    return s;
  }
  if (s.terminating) {
    s.loss = PodLoss::kPreempted;
    s.loss_reason = "deleted";
  }
  return s;
}

}  // namespace trainingjob
}  // namespace gaptrain
