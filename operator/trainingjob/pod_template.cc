#include "operator/trainingjob/pod_template.h"

#include <set>
#include <vector>

#include "operator/trainingjob/object_fields.h"
#include "operator/trainingjob/pod_state.h"

namespace gaptrain {
namespace trainingjob {
namespace {

using nlohmann::json;

Status Bad(const std::string& path, const std::string& why) {
  return Status::InvalidArgument(path + ": " + why);
}

// A member of `object` that must be of `type` when present.
Status CheckKind(const json& object, const char* key, json::value_t type, const char* what,
                 const std::string& path) {
  const json* v = FieldAt(object, {key});
  if (v == nullptr || v->is_null()) return Status::OK();
  const bool ok = type == json::value_t::number_integer ? v->is_number_integer()
                                                        : v->type() == type;
  return ok ? Status::OK() : Bad(path + "." + key, std::string("must be ") + what);
}

Status CheckStringMap(const json& object, const char* key, const std::string& path) {
  GAPTRAIN_RETURN_IF_ERROR(CheckKind(object, key, json::value_t::object, "a map", path));
  for (const auto& [k, v] : ObjectAt(object, {key}).items()) {
    if (!v.is_string()) return Bad(path + "." + key + "." + k, "must be a string");
  }
  return Status::OK();
}

Status CheckStringList(const json& object, const char* key, const std::string& path) {
  GAPTRAIN_RETURN_IF_ERROR(CheckKind(object, key, json::value_t::array, "a list", path));
  const json& list = ArrayAt(object, {key});
  for (size_t i = 0; i < list.size(); ++i) {
    if (!list[i].is_string()) {
      return Bad(path + "." + key + "[" + std::to_string(i) + "]", "must be a string");
    }
  }
  return Status::OK();
}

// A list of objects; `required` names string members each item must have.
Status CheckObjectList(const json& object, const char* key, const std::string& path,
                       std::initializer_list<const char*> required) {
  GAPTRAIN_RETURN_IF_ERROR(CheckKind(object, key, json::value_t::array, "a list", path));
  const json& list = ArrayAt(object, {key});
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string at = path + "." + key + "[" + std::to_string(i) + "]";
    if (!list[i].is_object()) return Bad(at, "must be an object");
    for (const char* member : required) {
      if (StringAt(list[i], {member}).empty()) return Bad(at + "." + member, "is required");
    }
  }
  return Status::OK();
}

Status CheckContainer(const json& c, const std::string& at, bool first) {
  if (!c.is_object()) return Bad(at, "must be an object");
  // The first container is gaptrain's and is renamed; others need a name.
  if (!first && StringAt(c, {"name"}).empty()) return Bad(at + ".name", "is required");
  GAPTRAIN_RETURN_IF_ERROR(CheckKind(c, "name", json::value_t::string, "a string", at));
  GAPTRAIN_RETURN_IF_ERROR(CheckKind(c, "image", json::value_t::string, "a string", at));
  GAPTRAIN_RETURN_IF_ERROR(CheckStringList(c, "command", at));
  GAPTRAIN_RETURN_IF_ERROR(CheckStringList(c, "args", at));
  GAPTRAIN_RETURN_IF_ERROR(CheckObjectList(c, "env", at, {"name"}));
  GAPTRAIN_RETURN_IF_ERROR(CheckObjectList(c, "ports", at, {}));
  GAPTRAIN_RETURN_IF_ERROR(CheckObjectList(c, "volumeMounts", at, {"name", "mountPath"}));
  GAPTRAIN_RETURN_IF_ERROR(CheckKind(c, "readinessProbe", json::value_t::object, "an object", at));
  GAPTRAIN_RETURN_IF_ERROR(CheckKind(c, "livenessProbe", json::value_t::object, "an object", at));
  GAPTRAIN_RETURN_IF_ERROR(
      CheckKind(c, "securityContext", json::value_t::object, "an object", at));
  const std::string security = at + ".securityContext";
  const json& sc = ObjectAt(c, {"securityContext"});
  GAPTRAIN_RETURN_IF_ERROR(
      CheckKind(sc, "capabilities", json::value_t::object, "an object", security));
  GAPTRAIN_RETURN_IF_ERROR(
      CheckStringList(ObjectAt(sc, {"capabilities"}), "add", security + ".capabilities"));
  return CheckStringList(ObjectAt(sc, {"capabilities"}), "drop", security + ".capabilities");
}

Status CheckAffinity(const json& spec, const std::string& path) {
  GAPTRAIN_RETURN_IF_ERROR(CheckKind(spec, "affinity", json::value_t::object, "an object", path));
  const std::string affinity = path + ".affinity";
  const json& a = ObjectAt(spec, {"affinity"});
  GAPTRAIN_RETURN_IF_ERROR(
      CheckKind(a, "nodeAffinity", json::value_t::object, "an object", affinity));
  const std::string node = affinity + ".nodeAffinity";
  const json& n = ObjectAt(a, {"nodeAffinity"});
  const char* kRequired = "requiredDuringSchedulingIgnoredDuringExecution";
  GAPTRAIN_RETURN_IF_ERROR(CheckKind(n, kRequired, json::value_t::object, "an object", node));
  GAPTRAIN_RETURN_IF_ERROR(CheckObjectList(ObjectAt(n, {kRequired}), "nodeSelectorTerms",
                                           node + "." + kRequired, {}));
  const json& terms = ArrayAt(n, {kRequired, "nodeSelectorTerms"});
  for (size_t i = 0; i < terms.size(); ++i) {
    GAPTRAIN_RETURN_IF_ERROR(CheckObjectList(
        terms[i], "matchExpressions",
        node + "." + kRequired + ".nodeSelectorTerms[" + std::to_string(i) + "]", {}));
  }
  return CheckObjectList(n, "preferredDuringSchedulingIgnoredDuringExecution", node, {});
}

// `ours` first, then the user's items that collide with none of ours on
// any of `keys`.
json MergeList(const json& user, const json& ours, std::initializer_list<const char*> keys) {
  json merged = ours;
  for (const json& item : user) {
    bool collides = false;
    for (const json& mine : ours) {
      for (const char* key : keys) {
        const json* a = FieldAt(item, {key});
        const json* b = FieldAt(mine, {key});
        if (a != nullptr && b != nullptr && *a == *b) collides = true;
      }
    }
    if (!collides) merged.push_back(item);
  }
  return merged;
}

// Whether anything in the template's pod spec runs as uid 0: then
// runAsNonRoot: true would only keep its containers from starting.
bool RunsAsRoot(const json& spec) {
  if (IntegerAt(spec, {"securityContext", "runAsUser"}) == 0) return true;
  for (const char* list : {"containers", "initContainers"}) {
    for (const json& c : ArrayAt(spec, {list})) {
      if (IntegerAt(c, {"securityContext", "runAsUser"}) == 0) return true;
    }
  }
  return false;
}

// `defaults` under what `security_context` (a container's) sets.
json ContainerSecurityContext(json security_context, const json& defaults) {
  if (!security_context.is_object()) security_context = json::object();
  bool sys_admin = false;
  for (const json& cap : ArrayAt(security_context, {"capabilities", "add"})) {
    sys_admin = sys_admin || cap == "SYS_ADMIN" || cap == "CAP_SYS_ADMIN";
  }
  const json* privileged_field = FieldAt(security_context, {"privileged"});
  const bool privileged = privileged_field != nullptr && *privileged_field == true;
  for (const auto& [key, value] : defaults.items()) {
    if (key == "capabilities") {
      json& caps = security_context["capabilities"];
      if (!caps.is_object()) caps = json::object();
      for (const auto& [k, v] : value.items()) {
        if (!caps.contains(k)) caps[k] = v;
      }
    } else if (key == "allowPrivilegeEscalation" && (privileged || sys_admin)) {
      continue;
    } else if (!security_context.contains(key)) {
      security_context[key] = value;
    }
  }
  return security_context;
}

json MergeAffinity(json affinity, const GaptrainPodParts& parts) {
  if (!affinity.is_object()) affinity = json::object();
  if (parts.required_node_requirements.empty() && parts.preferred_node_terms.empty()) {
    return affinity;
  }
  json& node = affinity["nodeAffinity"];
  if (!node.is_object()) node = json::object();
  if (!parts.required_node_requirements.empty()) {
    json& required = node["requiredDuringSchedulingIgnoredDuringExecution"];
    if (!required.is_object()) required = json::object();
    json& terms = required["nodeSelectorTerms"];
    if (!terms.is_array() || terms.empty()) terms = json::array({json::object()});
    // Terms are ORed, requirements within a term ANDed: the spot
    // requirements go into every term.
    for (json& term : terms) {
      json& expressions = term["matchExpressions"];
      if (!expressions.is_array()) expressions = json::array();
      for (const json& r : parts.required_node_requirements) expressions.push_back(r);
    }
  }
  if (!parts.preferred_node_terms.empty()) {
    json& preferred = node["preferredDuringSchedulingIgnoredDuringExecution"];
    if (!preferred.is_array()) preferred = json::array();
    for (const json& term : parts.preferred_node_terms) preferred.push_back(term);
  }
  return affinity;
}

}  // namespace

Status CheckPodTemplate(const json& pod_template, const std::string& path) {
  if (pod_template.is_null()) return Status::OK();
  if (!pod_template.is_object()) return Bad(path, "must be a PodTemplateSpec object");
  GAPTRAIN_RETURN_IF_ERROR(
      CheckKind(pod_template, "metadata", json::value_t::object, "an object", path));
  const json& metadata = ObjectAt(pod_template, {"metadata"});
  GAPTRAIN_RETURN_IF_ERROR(CheckStringMap(metadata, "labels", path + ".metadata"));
  GAPTRAIN_RETURN_IF_ERROR(CheckStringMap(metadata, "annotations", path + ".metadata"));
  GAPTRAIN_RETURN_IF_ERROR(
      CheckKind(pod_template, "spec", json::value_t::object, "an object", path));
  const std::string spec_path = path + ".spec";
  const json& spec = ObjectAt(pod_template, {"spec"});
  GAPTRAIN_RETURN_IF_ERROR(
      CheckKind(spec, "containers", json::value_t::array, "a list", spec_path));
  const json& containers = ArrayAt(spec, {"containers"});
  for (size_t i = 0; i < containers.size(); ++i) {
    GAPTRAIN_RETURN_IF_ERROR(CheckContainer(
        containers[i], spec_path + ".containers[" + std::to_string(i) + "]", i == 0));
  }
  GAPTRAIN_RETURN_IF_ERROR(
      CheckKind(spec, "initContainers", json::value_t::array, "a list", spec_path));
  const json& init_containers = ArrayAt(spec, {"initContainers"});
  for (size_t i = 0; i < init_containers.size(); ++i) {
    GAPTRAIN_RETURN_IF_ERROR(CheckContainer(
        init_containers[i], spec_path + ".initContainers[" + std::to_string(i) + "]", false));
  }
  GAPTRAIN_RETURN_IF_ERROR(
      CheckKind(spec, "securityContext", json::value_t::object, "an object", spec_path));
  GAPTRAIN_RETURN_IF_ERROR(CheckObjectList(spec, "volumes", spec_path, {"name"}));
  GAPTRAIN_RETURN_IF_ERROR(CheckObjectList(spec, "imagePullSecrets", spec_path, {}));
  GAPTRAIN_RETURN_IF_ERROR(CheckObjectList(spec, "tolerations", spec_path, {}));
  GAPTRAIN_RETURN_IF_ERROR(CheckAffinity(spec, spec_path));
  const json* grace = FieldAt(spec, {"terminationGracePeriodSeconds"});
  if (grace != nullptr && !grace->is_null() &&
      !(grace->is_number_integer() && IntegerAt(spec, {"terminationGracePeriodSeconds"}).value_or(-1) >= 0)) {
    return Bad(spec_path + ".terminationGracePeriodSeconds", "must be a non-negative integer");
  }
  return Status::OK();
}

bool TemplateSetsCommand(const json& pod_template) {
  const json& containers = ArrayAt(pod_template, {"spec", "containers"});
  return !containers.empty() && !ArrayAt(containers[0], {"command"}).empty();
}

std::optional<int64_t> TemplateGracePeriod(const json& pod_template) {
  const std::optional<int64_t> v =
      IntegerAt(pod_template, {"spec", "terminationGracePeriodSeconds"});
  if (v && *v >= 0) return v;
  return std::nullopt;
}

Status MergePodTemplate(const json& pod_template, const std::string& template_path,
                        const json& job_labels, const GaptrainPodParts& parts, json* pod) {
  GAPTRAIN_RETURN_IF_ERROR(CheckPodTemplate(pod_template, template_path));

  json metadata = parts.metadata;
  json labels = ObjectAt(pod_template, {"metadata", "labels"});
  if (job_labels.is_object()) {
    for (const auto& [k, v] : job_labels.items()) {
      // Kueue's queue label queues the job (its Workload); on a pod, Kueue's
      // pod integration would queue each pod on its own.
      if (v.is_string() && k != "kueue.x-k8s.io/queue-name") labels[k] = v;
    }
  }
  for (const auto& [k, v] : ObjectAt(parts.metadata, {"labels"}).items()) labels[k] = v;
  metadata["labels"] = labels;
  const json& annotations = ObjectAt(pod_template, {"metadata", "annotations"});
  if (!annotations.empty()) metadata["annotations"] = annotations;

  json spec = ObjectAt(pod_template, {"spec"});
  const json& user_containers = ArrayAt(spec, {"containers"});
  json containers = json::array();
  for (size_t i = 0; i < std::max<size_t>(1, user_containers.size()); ++i) {
    json c = i < user_containers.size() ? user_containers[i] : json::object();
    json ours = parts.env;
    if (i == 0) {
      for (const json& e : parts.own_env) ours.push_back(e);
    }
    c["env"] = MergeList(ArrayAt(c, {"env"}), ours, {"name"});
    json mounts = parts.shared_mounts;
    if (i == 0) {
      c["name"] = kContainerName;
      if (StringAt(c, {"image"}).empty()) c["image"] = parts.default_image;
      if (!(parts.keep_command && !ArrayAt(c, {"command"}).empty())) c["command"] = parts.command;
      c["ports"] = MergeList(ArrayAt(c, {"ports"}), parts.ports, {"name", "containerPort"});
      for (const json& m : parts.own_mounts) mounts.push_back(m);
      if (!c.contains("readinessProbe") && !parts.readiness_probe.is_null()) {
        c["readinessProbe"] = parts.readiness_probe;
      }
      if (!c.contains("livenessProbe") && !parts.liveness_probe.is_null()) {
        c["livenessProbe"] = parts.liveness_probe;
      }
    }
    c["volumeMounts"] = MergeList(ArrayAt(c, {"volumeMounts"}), mounts, {"name", "mountPath"});
    if (!parts.container_security_context.empty()) {
      c["securityContext"] = ContainerSecurityContext(ObjectAt(c, {"securityContext"}),
                                                      parts.container_security_context);
    }
    containers.push_back(std::move(c));
  }
  if (!parts.container_security_context.empty() && spec.contains("initContainers")) {
    for (json& c : spec["initContainers"]) {
      c["securityContext"] = ContainerSecurityContext(ObjectAt(c, {"securityContext"}),
                                                      parts.container_security_context);
    }
  }
  if (!parts.pod_security_context.empty()) {
    json security_context = ObjectAt(spec, {"securityContext"});
    const bool as_root = RunsAsRoot(spec);
    for (const auto& [key, value] : parts.pod_security_context.items()) {
      if (key == "runAsNonRoot" && as_root) continue;
      if (!security_context.contains(key)) security_context[key] = value;
    }
    spec["securityContext"] = std::move(security_context);
  }
  spec["containers"] = std::move(containers);
  spec["volumes"] = MergeList(ArrayAt(spec, {"volumes"}), parts.volumes, {"name"});
  json pull_secrets = ArrayAt(spec, {"imagePullSecrets"});
  for (const std::string& name : parts.image_pull_secrets) {
    bool named = false;
    for (const json& have : pull_secrets) named = named || StringAt(have, {"name"}) == name;
    if (!named) pull_secrets.push_back(json{{"name", name}});
  }
  if (!pull_secrets.empty()) spec["imagePullSecrets"] = std::move(pull_secrets);
  json tolerations = ArrayAt(spec, {"tolerations"});
  for (const json& t : parts.tolerations) {
    bool present = false;
    for (const json& have : tolerations) present = present || have == t;
    if (!present) tolerations.push_back(t);
  }
  if (!tolerations.empty()) spec["tolerations"] = std::move(tolerations);
  json affinity = MergeAffinity(ObjectAt(spec, {"affinity"}), parts);
  if (!affinity.empty()) spec["affinity"] = std::move(affinity);
  spec["restartPolicy"] = "Never";
  spec["terminationGracePeriodSeconds"] = parts.termination_grace_period_seconds;

  *pod = json{{"apiVersion", "v1"}, {"kind", "Pod"}, {"metadata", metadata}, {"spec", spec}};
  return Status::OK();
}

}  // namespace trainingjob
}  // namespace gaptrain
