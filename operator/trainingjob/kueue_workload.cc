#include "operator/trainingjob/kueue_workload.h"

#include <utility>

#include "operator/trainingjob/json_diff.h"
#include "operator/trainingjob/object_fields.h"
#include "operator/trainingjob/pod_state.h"

namespace gaptrain {
namespace trainingjob {
namespace {

using nlohmann::json;

constexpr char kFieldManager[] = "gaptrain-operator";  // plan_executor's server-side applies

const json* ConditionOf(const json& object, const std::string& type) {
  for (const json& c : ArrayAt(object, {"status", "conditions"})) {
    if (StringAt(c, {"type"}) == type) return &c;
  }
  return nullptr;
}

bool ConditionTrue(const json& object, const std::string& type) {
  const json* c = ConditionOf(object, type);
  return c != nullptr && StringAt(*c, {"status"}) == "True";
}

// metav1's SetStatusCondition: the transition time moves only when the
// status does.
void SetCondition(json* conditions, const std::string& type, const std::string& status,
                  const std::string& reason, const std::string& message, const std::string& now,
                  int64_t generation) {
  json condition{{"type", type},       {"status", status},           {"reason", reason},
                 {"message", message}, {"lastTransitionTime", now}, {"observedGeneration", generation}};
  for (json& c : *conditions) {
    if (StringAt(c, {"type"}) != type) continue;
    if (StringAt(c, {"status"}) == status) condition["lastTransitionTime"] = c["lastTransitionTime"];
    c = std::move(condition);
    return;
  }
  conditions->push_back(std::move(condition));
}

json StatusPatch(const json& workload, json status) {
  return json{{"metadata", {{"resourceVersion", StringAt(workload, {"metadata", "resourceVersion"})}}},
              {"status", std::move(status)}};
}

// Whether this operator's applies own the Workload's spec.active (so an
// apply without it takes it away, and the Workload is active again).
bool OperatorOwnsActive(const json& workload) {
  for (const json& entry : ArrayAt(workload, {"metadata", "managedFields"})) {
    if (StringAt(entry, {"manager"}) != kFieldManager) continue;
    if (FieldAt(entry, {"fieldsV1", "f:spec", "f:active"}) != nullptr) return true;
  }
  return false;
}

// Adds `from`'s keys to `*into`; a key it has with another value is an error.
Status MergeStrings(const json& from, const std::string& what, const std::string& pod, json* into) {
  if (!into->is_object()) *into = json::object();
  for (const auto& [key, value] : from.items()) {
    if (into->contains(key) && (*into)[key] != value) {
      return Status::FailedPrecondition(
          "Kueue admitted pod " + pod + " with " + what + " " + key + "=" +
          value.get<std::string>() + ", but its template sets " + key + "=" +
          ((*into)[key].is_string() ? (*into)[key].get<std::string>() : (*into)[key].dump()));
    }
    (*into)[key] = value;
  }
  return Status::OK();
}

void AddTolerations(const json& from, json* into) {
  if (!into->is_array()) *into = json::array();
  for (const json& t : from) {
    bool present = false;
    for (const json& have : *into) present = present || have == t;
    if (!present) into->push_back(t);
  }
}

}  // namespace

std::string QueueNameOf(const json& job) {
  return StringAt(job, {"metadata", "labels", kQueueNameLabel});
}

std::string WorkloadNameOf(const json& job) {
  return "trainingjob-" + NameOf(job) + "-" + UidOf(job).substr(0, 5);
}

std::string PodSetName(ReplicaType type) {
  return type == ReplicaType::kTrainer ? "trainers" : ReplicaTypeLabelValue(type);
}

namespace {

// The object named `name` among `objects`, or null.
const json* Named(const std::vector<json>& objects, const std::string& name) {
  for (const json& o : objects) {
    if (NameOf(o) == name) return &o;
  }
  return nullptr;
}

// The priorityClassName the job's pods ask for: the trainers' first, then
// the master's, the coordinator's, the evaluator's ("" when none does).
std::string PodPriorityClassOf(const DesiredChildren& desired) {
  for (ReplicaType type : {ReplicaType::kTrainer, ReplicaType::kMaster, ReplicaType::kCoordinator,
                           ReplicaType::kEvaluator}) {
    for (const json& pod : desired.pods) {
      if (StringAt(pod, {"metadata", "labels", kReplicaTypeLabel}) != ReplicaTypeLabelValue(type)) {
        continue;
      }
      const std::string name = StringAt(pod, {"spec", "priorityClassName"});
      if (!name.empty()) return name;
    }
  }
  return "";
}

}  // namespace

Status DesiredWorkload(const json& job, const TrainingJob& spec, const DesiredChildren& desired,
                       const json* observed, const WorkloadPriorities& priorities,
                       json* workload) {
  json pod_sets = json::array();
  for (ReplicaType type : kReplicaTypes) {
    const json* first = nullptr;
    uint32_t pods = 0;
    for (const json& pod : desired.pods) {
      if (StringAt(pod, {"metadata", "labels", kReplicaTypeLabel}) != ReplicaTypeLabelValue(type)) {
        continue;
      }
      if (first == nullptr) first = &pod;
      ++pods;
    }
    if (first == nullptr) continue;
    json pod_template{{"metadata", {{"labels", ObjectAt(*first, {"metadata", "labels"})}}},
                      {"spec", ObjectAt(*first, {"spec"})}};
    if (const json* a = FieldAt(*first, {"metadata", "annotations"})) {
      pod_template["metadata"]["annotations"] = *a;
    }
    json pod_set{{"name", PodSetName(type)}, {"count", pods}, {"template", pod_template}};
    if (type == ReplicaType::kTrainer) {
      // An autoscaling job asks for its ceiling: it may grow to it while
      // admitted, and Kueue may admit it with as few as it runs with.
      const uint32_t count = spec.workers.autoscale.enabled ? spec.workers.Ceiling() : pods;
      pod_set["count"] = count;
      if (spec.workers.Floor() < count) pod_set["minCount"] = spec.workers.Floor();
    }
    pod_sets.push_back(std::move(pod_set));
  }

  json workload_spec{{"queueName", QueueNameOf(job)}, {"podSets", std::move(pod_sets)}};
  if (observed != nullptr && HoldsQuota(*observed)) {
    workload_spec["queueName"] = StringAt(*observed, {"spec", "queueName"});
    workload_spec["podSets"] = ArrayAt(*observed, {"spec", "podSets"});
  }
  // Suspended: deactivated. Otherwise the field is left out, so an apply
  // after a suspend gives it up (active again), and an administrator's own
  // deactivation is not undone.
  if (spec.run_policy.suspend) workload_spec["active"] = false;
  if (const std::string priority_class = StringAt(job, {"metadata", "labels", kPriorityClassLabel});
      !priority_class.empty()) {
    const json* found = Named(priorities.workload_classes, priority_class);
    if (found == nullptr) {
      return Status::NotFound("WorkloadPriorityClass '" + priority_class + "' (label " +
                              kPriorityClassLabel + ") does not exist");
    }
    workload_spec["priorityClassRef"] = {
        {"group", "kueue.x-k8s.io"}, {"kind", "WorkloadPriorityClass"}, {"name", priority_class}};
    workload_spec["priority"] = IntegerAt(*found, {"value"}).value_or(0);
  } else if (const std::string pod_class = PodPriorityClassOf(desired); !pod_class.empty()) {
    const json* found = Named(priorities.pod_classes, pod_class);
    if (found == nullptr) {
      return Status::NotFound("PriorityClass '" + pod_class +
                              "' (the pods' priorityClassName) does not exist");
    }
    workload_spec["priorityClassRef"] = {
        {"group", "scheduling.k8s.io"}, {"kind", "PriorityClass"}, {"name", pod_class}};
    workload_spec["priority"] = IntegerAt(*found, {"value"}).value_or(0);
  }

  json labels{{kJobNameLabel, NameOf(job)}, {kJobUidLabel, UidOf(job)}};
  *workload = json{{"apiVersion", "kueue.x-k8s.io/v1beta2"},
              {"kind", "Workload"},
              {"metadata",
               {{"name", WorkloadNameOf(job)},
                {"namespace", NamespaceOf(job)},
                {"labels", std::move(labels)},
                {"ownerReferences", json::array({OwnerReference(job)})}}},
              {"spec", std::move(workload_spec)}};
  return Status::OK();
}

bool WorkloadNeedsApply(const json& desired, const json& observed) {
  if (!IsSubset(desired, observed)) return true;
  if (ArrayAt(desired, {"spec", "podSets"}).size() != ArrayAt(observed, {"spec", "podSets"}).size()) {
    return true;  // a role gone (the evaluator): a subset test does not see it
  }
  // false is a zero value to IsSubset (an absent field matches it).
  const bool want_inactive = !BoolAt(desired, {"spec", "active"}, true);
  const bool inactive = !BoolAt(observed, {"spec", "active"}, true);
  if (want_inactive) return !inactive;
  return inactive && OperatorOwnsActive(observed);
}

bool HoldsQuota(const json& workload) { return ConditionTrue(workload, "QuotaReserved"); }

Status ReadWorkloadAdmission(const json& workload, const std::vector<json>& flavors,
                             WorkloadAdmission* out) {
  *out = WorkloadAdmission();
  out->cluster_queue = StringAt(workload, {"status", "admission", "clusterQueue"});
  const bool reserved = HoldsQuota(workload);
  if (const json* finished = ConditionOf(workload, "Finished");
      finished != nullptr && StringAt(*finished, {"status"}) == "True") {
    out->state = WorkloadAdmission::State::kFinished;
    out->reason = StringAt(*finished, {"reason"});
    out->message = StringAt(*finished, {"message"});
    return Status::OK();
  }
  if (const json* evicted = ConditionOf(workload, "Evicted");
      evicted != nullptr && StringAt(*evicted, {"status"}) == "True") {
    if (reserved) {
      out->reason = StringAt(*evicted, {"reason"});
      out->message = StringAt(*evicted, {"message"});
      out->state = WorkloadAdmission::State::kEvicted;
      return Status::OK();
    }
    // Its quota given back: queued again, and QuotaReserved says why.
  }
  if (!reserved || !ConditionTrue(workload, "Admitted")) {
    const json* quota = ConditionOf(workload, "QuotaReserved");
    if (reserved) {
      out->reason = "AdmissionChecks";
      out->message = "quota reserved in ClusterQueue " + out->cluster_queue +
                     "; waiting for its admission checks";
    } else if (quota != nullptr) {
      out->reason = StringAt(*quota, {"reason"});
      out->message = StringAt(*quota, {"message"});
    } else {
      out->reason = "Pending";
      out->message = "waiting for Kueue to consider it";
    }
    return Status::OK();
  }

  for (const json& assignment : ArrayAt(workload, {"status", "admission", "podSetAssignments"})) {
    PodSetAdmission pod_set;
    if (const std::optional<int64_t> count = IntegerAt(assignment, {"count"}); count && *count >= 0) {
      pod_set.count = static_cast<uint32_t>(*count);
    }
    for (const auto& [resource, flavor_value] : ObjectAt(assignment, {"flavors"}).items()) {
      const std::string flavor = flavor_value.is_string() ? flavor_value.get<std::string>() : "";
      if (!pod_set.flavors.empty()) pod_set.flavors += ", ";
      pod_set.flavors += resource + "=" + flavor;
      const json* found = nullptr;
      for (const json& f : flavors) {
        if (NameOf(f) == flavor) found = &f;
      }
      if (found == nullptr) {
        return Status::NotFound("Kueue admitted the Workload with ResourceFlavor '" + flavor +
                                "', which the operator has not seen yet");
      }
      for (const auto& [key, value] : ObjectAt(*found, {"spec", "nodeLabels"}).items()) {
        pod_set.node_selector[key] = value;
      }
      AddTolerations(ArrayAt(*found, {"spec", "tolerations"}), &pod_set.tolerations);
    }
    out->pod_sets[StringAt(assignment, {"name"})] = std::move(pod_set);
  }
  // What admission checks (a ProvisioningRequest, MultiKueue) add.
  for (const json& check : ArrayAt(workload, {"status", "admissionChecks"})) {
    for (const json& update : ArrayAt(check, {"podSetUpdates"})) {
      PodSetAdmission& pod_set = out->pod_sets[StringAt(update, {"name"})];
      for (const auto& [key, value] : ObjectAt(update, {"nodeSelector"}).items()) {
        pod_set.node_selector[key] = value;
      }
      for (const auto& [key, value] : ObjectAt(update, {"labels"}).items()) {
        pod_set.labels[key] = value;
      }
      for (const auto& [key, value] : ObjectAt(update, {"annotations"}).items()) {
        pod_set.annotations[key] = value;
      }
      AddTolerations(ArrayAt(update, {"tolerations"}), &pod_set.tolerations);
    }
  }
  out->state = WorkloadAdmission::State::kAdmitted;
  return Status::OK();
}

Status ApplyAdmission(const WorkloadAdmission& admission, DesiredChildren* desired) {
  std::vector<json> pods;
  for (json& pod : desired->pods) {
    const std::optional<ReplicaType> type =
        ReplicaTypeFromLabel(StringAt(pod, {"metadata", "labels", kReplicaTypeLabel}));
    const auto found = type ? admission.pod_sets.find(PodSetName(*type)) : admission.pod_sets.end();
    if (found == admission.pod_sets.end()) {
      pods.push_back(std::move(pod));
      continue;
    }
    const PodSetAdmission& a = found->second;
    if (*type == ReplicaType::kTrainer && a.count) {
      const std::string index = StringAt(pod, {"metadata", "labels", kReplicaIndexLabel});
      if (!index.empty() && std::stoull(index) >= *a.count) continue;
    }
    const std::string name = NameOf(pod);
    json& metadata = pod["metadata"];
    json& spec = pod["spec"];
    GAPTRAIN_RETURN_IF_ERROR(MergeStrings(a.node_selector, "node label", name, &spec["nodeSelector"]));
    GAPTRAIN_RETURN_IF_ERROR(MergeStrings(a.labels, "label", name, &metadata["labels"]));
    if (!a.annotations.empty()) {
      GAPTRAIN_RETURN_IF_ERROR(
          MergeStrings(a.annotations, "annotation", name, &metadata["annotations"]));
    }
    if (spec["nodeSelector"].empty()) spec.erase("nodeSelector");
    if (!a.tolerations.empty()) AddTolerations(a.tolerations, &spec["tolerations"]);
    pods.push_back(std::move(pod));
  }
  desired->pods = std::move(pods);
  return Status::OK();
}

json ClearReservationPatch(const json& workload, const std::string& now) {
  const int64_t generation = IntegerAt(workload, {"metadata", "generation"}).value_or(0);
  const json* evicted = ConditionOf(workload, "Evicted");
  const std::string reason = evicted != nullptr ? StringAt(*evicted, {"reason"}) : "";
  const std::string message = evicted != nullptr ? StringAt(*evicted, {"message"}) : "";
  json conditions = ArrayAt(workload, {"status", "conditions"});
  SetCondition(&conditions, "QuotaReserved", "False", "Pending", message, now, generation);
  SetCondition(&conditions, "Admitted", "False", "NoReservation", "The workload has no reservation",
               now, generation);
  // Kueue's job reconciler: Requeued True only after a preemption or lost
  // nodes; otherwise (deactivated, a stopped queue) it waits to be let in.
  const bool requeued = reason == "Preempted" || reason == "NodeFailures";
  SetCondition(&conditions, "Requeued", requeued ? "True" : "False",
               reason.empty() ? "Pending" : reason, message, now, generation);
  return StatusPatch(workload, {{"conditions", std::move(conditions)}, {"admission", nullptr}});
}

json FinishedPatch(const json& workload, bool succeeded, const std::string& message,
                   const std::string& now) {
  const int64_t generation = IntegerAt(workload, {"metadata", "generation"}).value_or(0);
  json conditions = ArrayAt(workload, {"status", "conditions"});
  SetCondition(&conditions, "Finished", "True", succeeded ? "Succeeded" : "Failed", message, now,
               generation);
  return StatusPatch(workload, {{"conditions", std::move(conditions)}});
}

}  // namespace trainingjob
}  // namespace gaptrain
