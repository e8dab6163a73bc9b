#include "operator/testing/kind_rules.h"

#include <cctype>
#include <map>
#include <regex>
#include <set>
#include <utility>

#include "operator/testing/base64.h"
#include "operator/testing/crd_definition.h"
#include "operator/testing/name_validation.h"
#include "operator/testing/json_fields.h"

namespace gaptrain {
namespace kube_testing {

using nlohmann::json;

namespace {

const char kPodUpdateForbidden[] =
    "pod updates may not change fields other than `spec.containers[*].image`, "
    "`spec.initContainers[*].image`, `spec.activeDeadlineSeconds`, `spec.tolerations` (only "
    "additions to existing tolerations) or `spec.terminationGracePeriodSeconds` (allow it to be "
    "set to 1 if it was previously negative)";

const std::set<std::string> kStandardFinalizers = {"kubernetes", "orphan", "foregroundDeletion"};

void SetDefault(json* object, const char* key, json value) {
  if (!object->is_object()) return;
  if (!object->contains(key) || (*object)[key].is_null()) (*object)[key] = std::move(value);
}

std::string ImagePullPolicyFor(const std::string& image) {
  // ":latest" or no tag pulls always; a digest never counts as a tag.
  if (image.find('@') != std::string::npos) return "IfNotPresent";
  const size_t slash = image.rfind('/');
  const size_t colon = image.rfind(':');
  const bool has_tag = colon != std::string::npos && (slash == std::string::npos || colon > slash);
  if (!has_tag || image.substr(colon + 1) == "latest") return "Always";
  return "IfNotPresent";
}

void DefaultContainer(json* c) {
  if (!c->is_object()) return;
  SetDefault(c, "terminationMessagePath", "/dev/termination-log");
  SetDefault(c, "terminationMessagePolicy", "File");
  if (c->contains("image") && (*c)["image"].is_string()) {
    SetDefault(c, "imagePullPolicy", ImagePullPolicyFor((*c)["image"].get<std::string>()));
  }
  SetDefault(c, "resources", json::object());
  if (c->contains("ports") && (*c)["ports"].is_array()) {
    for (json& p : (*c)["ports"]) SetDefault(&p, "protocol", "TCP");
  }
  if (c->contains("env") && (*c)["env"].is_array()) {
    for (json& e : (*c)["env"]) {
      json* field_ref = e.is_object() && e.contains("valueFrom") && e["valueFrom"].is_object() &&
                                e["valueFrom"].contains("fieldRef")
                            ? &e["valueFrom"]["fieldRef"]
                            : nullptr;
      if (field_ref != nullptr) SetDefault(field_ref, "apiVersion", "v1");
    }
  }
}

void DefaultPod(json* pod) {
  json& spec = (*pod)["spec"];
  if (!spec.is_object()) spec = json::object();
  SetDefault(&spec, "restartPolicy", "Always");
  SetDefault(&spec, "terminationGracePeriodSeconds", 30);
  SetDefault(&spec, "dnsPolicy", "ClusterFirst");
  SetDefault(&spec, "securityContext", json::object());
  SetDefault(&spec, "schedulerName", "default-scheduler");
  SetDefault(&spec, "enableServiceLinks", true);
  SetDefault(&spec, "serviceAccountName", "default");
  SetDefault(&spec, "serviceAccount", spec["serviceAccountName"]);
  SetDefault(&spec, "priority", 0);
  SetDefault(&spec, "preemptionPolicy", "PreemptLowerPriority");
  SetDefault(&spec, "tolerations",
             json::array({{{"key", "node.kubernetes.io/not-ready"}, {"operator", "Exists"},
                           {"effect", "NoExecute"}, {"tolerationSeconds", 300}},
                          {{"key", "node.kubernetes.io/unreachable"}, {"operator", "Exists"},
                           {"effect", "NoExecute"}, {"tolerationSeconds", 300}}}));
  for (const char* list : {"containers", "initContainers"}) {
    if (spec.contains(list) && spec[list].is_array()) {
      for (json& c : spec[list]) DefaultContainer(&c);
    }
  }
  // A typed condition always prints its times, null when unset.
  json* conditions = pod->contains("status") ? &(*pod)["status"]["conditions"] : nullptr;
  if (conditions != nullptr && conditions->is_array()) {
    for (json& c : *conditions) {
      SetDefault(&c, "lastProbeTime", nullptr);
      SetDefault(&c, "lastTransitionTime", nullptr);
    }
  } else if (conditions != nullptr && conditions->is_null()) {
    (*pod)["status"].erase("conditions");
  }
}

void DefaultService(json* service) {
  json& spec = (*service)["spec"];
  if (!spec.is_object()) spec = json::object();
  SetDefault(&spec, "type", "ClusterIP");
  SetDefault(&spec, "sessionAffinity", "None");
  if (spec["type"] != "ExternalName") {
    SetDefault(&spec, "ipFamilies", json::array({"IPv4"}));
    SetDefault(&spec, "ipFamilyPolicy", "SingleStack");
    SetDefault(&spec, "internalTrafficPolicy", "Cluster");
  }
  if (spec.contains("ports") && spec["ports"].is_array()) {
    for (json& p : spec["ports"]) {
      if (!p.is_object()) continue;
      SetDefault(&p, "protocol", "TCP");
      if (p.contains("port")) SetDefault(&p, "targetPort", p["port"]);
    }
  }
}

void DefaultSecret(json* secret) {
  SetDefault(secret, "type", "Opaque");
  if (secret->contains("stringData") && (*secret)["stringData"].is_object()) {
    json& data = (*secret)["data"];
    if (!data.is_object()) data = json::object();
    for (auto it = (*secret)["stringData"].begin(); it != (*secret)["stringData"].end(); ++it) {
      if (it.value().is_string()) data[it.key()] = Base64Encode(it.value().get<std::string>());
    }
    secret->erase("stringData");
  }
}

void AddCause(std::vector<StatusCause>* causes, StatusCause cause) {
  causes->push_back(std::move(cause));
}

bool IsNonNegativeInteger(const json& v) {
  return v.is_number_integer() && v.get<int64_t>() >= 0;
}

void ValidateObjectMeta(const ResourceType& type, const json* old_object, const json& object,
                        std::vector<StatusCause>* causes) {
  const json& meta = object["metadata"];
  const std::string name = StringField(meta, {"name"});
  const bool dns1035 = type.rules == KindRules::kService;
  if (name.empty()) {
    // With generateName the store makes up the name; generateName itself
    // is checked below.
    if (StringField(meta, {"generateName"}).empty()) {
      AddCause(causes, RequiredField("metadata.name", "name or generateName is required"));
    }
  } else {
    for (const std::string& e : dns1035 ? Dns1035LabelErrors(name) : DnsSubdomainErrors(name)) {
      AddCause(causes, InvalidField("metadata.name", name, e));
    }
  }
  const std::string generate_name = StringField(meta, {"generateName"});
  if (!generate_name.empty()) {
    // A prefix may end in '-' (the random suffix follows it).
    std::string masked = generate_name;
    if (masked.back() == '-') masked.back() = 'a';
    for (const std::string& e :
         dns1035 ? Dns1035LabelErrors(masked) : DnsSubdomainErrors(masked)) {
      AddCause(causes, InvalidField("metadata.generateName", generate_name, e));
    }
  }
  if (meta.contains("labels") && meta["labels"].is_object()) {
    for (auto it = meta["labels"].begin(); it != meta["labels"].end(); ++it) {
      for (const std::string& e : QualifiedNameErrors(it.key())) {
        AddCause(causes, InvalidField("metadata.labels", it.key(), e));
      }
      if (!it.value().is_string()) {
        AddCause(causes, InvalidField("metadata.labels", it.value(), "must be a string"));
        continue;
      }
      for (const std::string& e : LabelValueErrors(it.value().get<std::string>())) {
        AddCause(causes, InvalidField("metadata.labels", it.value(), e));
      }
    }
  }
  if (meta.contains("annotations") && meta["annotations"].is_object()) {
    size_t total = 0;
    for (auto it = meta["annotations"].begin(); it != meta["annotations"].end(); ++it) {
      std::string lower = it.key();
      for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      for (const std::string& e : QualifiedNameErrors(lower)) {
        AddCause(causes, InvalidField("metadata.annotations", it.key(), e));
      }
      if (!it.value().is_string()) {
        AddCause(causes, InvalidField("metadata.annotations", it.value(), "must be a string"));
        continue;
      }
      total += it.key().size() + it.value().get<std::string>().size();
    }
    if (total > 256 * 1024) {
      AddCause(causes, {"FieldValueTooLong", "Too long: must have at most 262144 bytes",
                        "metadata.annotations"});
    }
  }
  if (meta.contains("ownerReferences") && meta["ownerReferences"].is_array()) {
    int controllers = 0;
    for (const json& ref : meta["ownerReferences"]) {
      const std::string at = "metadata.ownerReferences";
      if (StringField(ref, {"apiVersion"}).empty()) {
        AddCause(causes, InvalidField(at + ".apiVersion", "", "version must not be empty"));
      }
      if (StringField(ref, {"kind"}).empty()) {
        AddCause(causes, InvalidField(at + ".kind", "", "kind must not be empty"));
      }
      if (StringField(ref, {"name"}).empty()) {
        AddCause(causes, InvalidField(at + ".name", "", "name must not be empty"));
      }
      if (StringField(ref, {"uid"}).empty()) {
        AddCause(causes, InvalidField(at + ".uid", "", "uid must not be empty"));
      }
      if (ref.is_object() && BoolField(ref, {"controller"}, false)) ++controllers;
    }
    if (controllers > 1) {
      AddCause(causes, InvalidField("metadata.ownerReferences", meta["ownerReferences"],
                                    "Only one reference can have Controller set to true"));
    }
  }
  if (meta.contains("finalizers") && meta["finalizers"].is_array()) {
    const json& finalizers = meta["finalizers"];
    for (size_t i = 0; i < finalizers.size(); ++i) {
      const std::string at = "metadata.finalizers[" + std::to_string(i) + "]";
      if (!finalizers[i].is_string()) {
        AddCause(causes, InvalidField(at, finalizers[i], "must be a string"));
        continue;
      }
      const std::string f = finalizers[i].get<std::string>();
      for (const std::string& e : QualifiedNameErrors(f)) {
        AddCause(causes, InvalidField(at, f, e));
      }
      if (type.rules != KindRules::kCustomResource && f.find('/') == std::string::npos &&
          !kStandardFinalizers.count(f)) {
        AddCause(causes, InvalidField(at, f,
                                      "name is neither a standard finalizer name nor is it fully "
                                      "qualified"));
      }
    }
  }
  // An object being deleted may lose finalizers, never gain them.
  if (old_object != nullptr && FindField(*old_object, {"metadata", "deletionTimestamp"}) != nullptr) {
    const json* old_finalizers = FindField(*old_object, {"metadata", "finalizers"});
    const json* new_finalizers = FindField(object, {"metadata", "finalizers"});
    std::vector<std::string> added;
    if (new_finalizers != nullptr && new_finalizers->is_array()) {
      for (const json& f : *new_finalizers) {
        bool known = false;
        if (old_finalizers != nullptr && old_finalizers->is_array()) {
          for (const json& o : *old_finalizers) known = known || o == f;
        }
        if (!known && f.is_string()) added.push_back(f.get<std::string>());
      }
    }
    if (!added.empty()) {
      std::string list;
      for (const std::string& f : added) list += (list.empty() ? "" : ", ") + json(f).dump();
      AddCause(causes, ForbiddenField("metadata.finalizers",
                                      "no new finalizers can be added if the object is being "
                                      "deleted, found new finalizers []string{" + list + "}"));
    }
  }
}

void ValidateContainers(const json& spec, const char* list, std::vector<StatusCause>* causes) {
  if (!spec.contains(list) || !spec[list].is_array()) return;
  std::set<std::string> seen;
  const json& containers = spec[list];
  for (size_t i = 0; i < containers.size(); ++i) {
    const std::string at = std::string("spec.") + list + "[" + std::to_string(i) + "]";
    const std::string name = StringField(containers[i], {"name"});
    if (name.empty()) {
      AddCause(causes, RequiredField(at + ".name"));
    } else {
      for (const std::string& e : DnsLabelErrors(name)) {
        AddCause(causes, InvalidField(at + ".name", name, e));
      }
      if (!seen.insert(name).second) {
        AddCause(causes, {"FieldValueDuplicate", "Duplicate value: " + json(name).dump(),
                          at + ".name"});
      }
    }
    if (StringField(containers[i], {"image"}).empty()) AddCause(causes, RequiredField(at + ".image"));
  }
}

// The parts of a pod spec an update may change, blanked out.
json MutablePodSpecFieldsRemoved(json spec, const json& old_spec) {
  if (!spec.is_object()) return spec;
  for (const char* list : {"containers", "initContainers"}) {
    if (spec.contains(list) && spec[list].is_array()) {
      for (json& c : spec[list]) {
        if (c.is_object()) c.erase("image");
      }
    }
  }
  spec.erase("activeDeadlineSeconds");
  spec.erase("terminationGracePeriodSeconds");
  // Tolerations may only be added to.
  if (spec.contains("tolerations") && spec["tolerations"].is_array()) {
    bool keeps_old = true;
    if (old_spec.contains("tolerations") && old_spec["tolerations"].is_array()) {
      for (const json& t : old_spec["tolerations"]) {
        bool found = false;
        for (const json& n : spec["tolerations"]) found = found || n == t;
        keeps_old = keeps_old && found;
      }
    }
    if (keeps_old) spec.erase("tolerations");
  }
  return spec;
}

void ValidatePod(const json* old_object, const json& pod, std::vector<StatusCause>* causes) {
  const json& spec = pod.contains("spec") ? pod["spec"] : json::object();
  if (!spec.contains("containers") || !spec["containers"].is_array() ||
      spec["containers"].empty()) {
    AddCause(causes, RequiredField("spec.containers"));
  }
  ValidateContainers(spec, "containers", causes);
  ValidateContainers(spec, "initContainers", causes);
  const std::string restart = StringField(spec, {"restartPolicy"});
  if (restart != "Always" && restart != "OnFailure" && restart != "Never") {
    AddCause(causes, UnsupportedField("spec.restartPolicy", restart, {"Always", "OnFailure", "Never"}));
  }
  if (spec.contains("terminationGracePeriodSeconds") &&
      !spec["terminationGracePeriodSeconds"].is_number_integer()) {
    AddCause(causes, InvalidField("spec.terminationGracePeriodSeconds",
                                  spec["terminationGracePeriodSeconds"], "must be an integer"));
  }
  if (old_object != nullptr && old_object->contains("spec")) {
    const json& old_spec = (*old_object)["spec"];
    if (MutablePodSpecFieldsRemoved(spec, old_spec) !=
        MutablePodSpecFieldsRemoved(old_spec, old_spec)) {
      AddCause(causes, ForbiddenField("spec", kPodUpdateForbidden));
    }
  }
}

void ValidateService(const json* old_object, const json& service,
                     std::vector<StatusCause>* causes) {
  const json& spec = service.contains("spec") ? service["spec"] : json::object();
  const std::string type = StringField(spec, {"type"});
  if (type != "ClusterIP" && type != "NodePort" && type != "LoadBalancer" &&
      type != "ExternalName") {
    AddCause(causes, UnsupportedField("spec.type", type,
                                      {"ClusterIP", "ExternalName", "LoadBalancer", "NodePort"}));
  }
  const bool headless = StringField(spec, {"clusterIP"}) == "None";
  const json ports = spec.contains("ports") && spec["ports"].is_array() ? spec["ports"] : json::array();
  if (ports.empty() && !headless && type != "ExternalName") {
    AddCause(causes, RequiredField("spec.ports"));
  }
  for (size_t i = 0; i < ports.size(); ++i) {
    const std::string at = "spec.ports[" + std::to_string(i) + "]";
    const json& p = ports[i];
    const json port = p.is_object() && p.contains("port") ? p["port"] : json();
    if (!port.is_number_integer() || port.get<int64_t>() < 1 || port.get<int64_t>() > 65535) {
      AddCause(causes, InvalidField(at + ".port", port, "must be between 1 and 65535, inclusive"));
    }
    if (ports.size() > 1 && StringField(p, {"name"}).empty()) {
      AddCause(causes, RequiredField(at + ".name"));
    }
    const std::string protocol = StringField(p, {"protocol"});
    if (protocol != "TCP" && protocol != "UDP" && protocol != "SCTP") {
      AddCause(causes, UnsupportedField(at + ".protocol", protocol, {"SCTP", "TCP", "UDP"}));
    }
  }
  if (old_object != nullptr) {
    const std::string old_ip = StringField(*old_object, {"spec", "clusterIP"});
    const std::string new_ip = StringField(spec, {"clusterIP"});
    if (!old_ip.empty() && old_ip != new_ip) {
      AddCause(causes, InvalidField("spec.clusterIP", new_ip, "field is immutable"));
    }
  }
}

void ValidateConfigData(const json& object, const char* field, std::vector<StatusCause>* causes) {
  static const std::regex kConfigKey("[-._a-zA-Z0-9]+");
  if (!object.contains(field) || !object[field].is_object()) return;
  for (auto it = object[field].begin(); it != object[field].end(); ++it) {
    if (it.key().size() > 253 || !std::regex_match(it.key(), kConfigKey)) {
      AddCause(causes,
               InvalidField(std::string(field) + "[" + it.key() + "]", it.key(),
                            "a valid config key must consist of alphanumeric characters, '-', '_' "
                            "or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used "
                            "for validation is '[-._a-zA-Z0-9]+')"));
    }
  }
}

void ValidateEvent(const json& event, std::vector<StatusCause>* causes) {
  if (!event.contains("eventTime") || event["eventTime"].is_null()) {
    AddCause(causes, RequiredField("eventTime"));
  }
  const std::string type = StringField(event, {"type"});
  if (type != "Normal" && type != "Warning") {
    AddCause(causes, UnsupportedField("type", type, {"Normal", "Warning"}));
  }
  for (const char* field : {"reportingController", "reportingInstance", "action", "reason"}) {
    const std::string value = StringField(event, {field});
    if (value.empty()) {
      AddCause(causes, RequiredField(field));
    } else if (value.size() > 128 && std::string(field) != "reportingController") {
      AddCause(causes, {"FieldValueTooLong", "Too long: must have at most 128 bytes", field});
    }
  }
  const std::string controller = StringField(event, {"reportingController"});
  if (!controller.empty()) {
    for (const std::string& e : QualifiedNameErrors(controller)) {
      AddCause(causes, InvalidField("reportingController", controller, e));
    }
  }
  if (StringField(event, {"note"}).size() > 1024) {
    AddCause(causes, {"FieldValueTooLong", "Too long: must have at most 1024 bytes", "note"});
  }
  const std::string regarding_namespace = StringField(event, {"regarding", "namespace"});
  const std::string event_namespace = StringField(event, {"metadata", "namespace"});
  if (!regarding_namespace.empty() && regarding_namespace != event_namespace) {
    AddCause(causes, InvalidField("regarding.namespace", regarding_namespace,
                                  "does not match event.namespace"));
  }
}

void ValidateLease(const json& lease, std::vector<StatusCause>* causes) {
  const json* duration = FindField(lease, {"spec", "leaseDurationSeconds"});
  if (duration != nullptr && !duration->is_null() &&
      (!duration->is_number_integer() || duration->get<int64_t>() <= 0)) {
    AddCause(causes, InvalidField("spec.leaseDurationSeconds", *duration, "must be greater than 0"));
  }
  const json* transitions = FindField(lease, {"spec", "leaseTransitions"});
  if (transitions != nullptr && !transitions->is_null() && !IsNonNegativeInteger(*transitions)) {
    AddCause(causes, InvalidField("spec.leaseTransitions", *transitions,
                                  "must be greater than or equal to 0"));
  }
}

void ValidateClaim(const json* old_object, const json& claim, std::vector<StatusCause>* causes) {
  static const std::set<std::string> kModes = {"ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany",
                                               "ReadWriteOncePod"};
  const json* modes = FindField(claim, {"spec", "accessModes"});
  if (modes == nullptr || !modes->is_array() || modes->empty()) {
    AddCause(causes, RequiredField("spec.accessModes", "at least 1 access mode is required"));
  } else {
    for (const json& m : *modes) {
      if (!m.is_string() || !kModes.count(m.get<std::string>())) {
        AddCause(causes, UnsupportedField("spec.accessModes", m,
                                          {"ReadOnlyMany", "ReadWriteMany", "ReadWriteOnce",
                                           "ReadWriteOncePod"}));
      }
    }
  }
  if (FindField(claim, {"spec", "resources", "requests", "storage"}) == nullptr) {
    AddCause(causes, RequiredField("spec.resources[storage]"));
  }
  if (old_object != nullptr && old_object->contains("spec") && claim.contains("spec")) {
    json a = claim["spec"];
    json b = (*old_object)["spec"];
    for (json* spec : {&a, &b}) {
      if (spec->is_object() && (*spec)["resources"].is_object()) (*spec)["resources"].erase("requests");
    }
    if (a != b) {
      AddCause(causes, ForbiddenField("spec", "spec is immutable after creation except "
                                              "resources.requests for bound claims"));
    }
  }
}

}  // namespace

ApiError DecodeObject(const ResourceType& type, json* object, std::vector<std::string>* warnings) {
  if (type.rules == KindRules::kCustomResource && type.schema != nullptr) {
    std::vector<std::string> unknown;
    type.schema->Prune(object, &unknown);
    for (const std::string& field : unknown) {
      warnings->push_back("unknown field " + json(field).dump());
    }
  }
  if (type.rules == KindRules::kSecret || type.resource == "configmaps") {
    const std::string where = type.kind + " in version \"" + type.version +
                              "\" cannot be handled as a " + type.kind + ": ";
    for (const char* field : {"data", "stringData", "binaryData"}) {
      if (!object->contains(field) || (*object)[field].is_null()) continue;
      if (!(*object)[field].is_object()) {
        return ApiError::BadRequest(where + "json: cannot unmarshal " + (*object)[field].type_name() +
                                    " into Go struct field " + type.kind + "." + field +
                                    " of type map[string]string");
      }
      for (auto it = (*object)[field].begin(); it != (*object)[field].end(); ++it) {
        if (!it.value().is_string()) {
          return ApiError::BadRequest(where + "json: cannot unmarshal " + it.value().type_name() +
                                      " into Go struct field " + type.kind + "." + field +
                                      " of type string");
        }
        const bool bytes = (type.rules == KindRules::kSecret && std::string(field) == "data") ||
                           std::string(field) == "binaryData";
        if (bytes) {
          std::string decoded;
          long offset = 0;
          if (!Base64Decode(it.value().get<std::string>(), &decoded, &offset)) {
            return ApiError::BadRequest(where + "illegal base64 data at input byte " +
                                        std::to_string(offset));
          }
        }
      }
    }
  }
  ApplyKindDefaults(type, object);
  return ApiError();
}

void ApplyKindDefaults(const ResourceType& type, json* object) {
  switch (type.rules) {
    case KindRules::kPod: DefaultPod(object); break;
    case KindRules::kService: DefaultService(object); break;
    case KindRules::kSecret: DefaultSecret(object); break;
    case KindRules::kPersistentVolumeClaim: {
      json& spec = (*object)["spec"];
      if (!spec.is_object()) spec = json::object();
      SetDefault(&spec, "volumeMode", "Filesystem");
      break;
    }
    case KindRules::kEvent:
      SetDefault(object, "deprecatedSource", json::object());
      SetDefault(object, "deprecatedFirstTimestamp", nullptr);
      SetDefault(object, "deprecatedLastTimestamp", nullptr);
      break;
    case KindRules::kCustomResourceDefinition: ApplyCrdDefaults(object); break;
    case KindRules::kCustomResource:
      if (type.schema != nullptr) type.schema->ApplyDefaults(object);
      break;
    default: break;
  }
}

void PrepareForCreate(const ResourceType& type, json* object,
                      const std::function<std::string()>& allocate_cluster_ip) {
  switch (type.rules) {
    case KindRules::kPod:
      (*object)["status"] = {{"phase", "Pending"},
                             {"qosClass", PodQosClass((*object)["spec"])}};
      break;
    case KindRules::kService: {
      json& spec = (*object)["spec"];
      if (spec["type"] != "ExternalName") {
        if (!spec.contains("clusterIP") || spec["clusterIP"] == "") {
          spec["clusterIP"] = allocate_cluster_ip();
        }
        SetDefault(&spec, "clusterIPs", json::array({spec["clusterIP"]}));
      }
      (*object)["status"] = {{"loadBalancer", json::object()}};
      break;
    }
    case KindRules::kPersistentVolumeClaim:
      (*object)["status"] = {{"phase", "Pending"}};
      break;
    default:
      if (type.status_subresource) object->erase("status");
      break;
  }
}

void PrepareForUpdate(const ResourceType& type, const json& old_object, json* object) {
  if (type.rules != KindRules::kService) return;
  json& spec = (*object)["spec"];
  if (!spec.is_object()) return;
  for (const char* field : {"clusterIP", "clusterIPs"}) {
    const json* old_value = FindField(old_object, {"spec", field});
    if (old_value != nullptr && (!spec.contains(field) || spec[field] == "" || spec[field].empty())) {
      spec[field] = *old_value;
    }
  }
}

void ValidateObject(const ResourceType& type, const json* old_object, const json& object,
                    std::vector<StatusCause>* causes) {
  ValidateObjectMeta(type, old_object, object, causes);
  switch (type.rules) {
    case KindRules::kPod: ValidatePod(old_object, object, causes); break;
    case KindRules::kService: ValidateService(old_object, object, causes); break;
    case KindRules::kSecret: ValidateConfigData(object, "data", causes); break;
    case KindRules::kPersistentVolumeClaim: ValidateClaim(old_object, object, causes); break;
    case KindRules::kEvent: ValidateEvent(object, causes); break;
    case KindRules::kLease: ValidateLease(object, causes); break;
    case KindRules::kCustomResourceDefinition: {
      std::vector<ResourceType> ignored;
      ParseCrd(object, &ignored, causes);
      break;
    }
    case KindRules::kCustomResource:
      if (type.schema != nullptr) type.schema->Validate(object, causes);
      break;
    default:
      if (type.resource == "configmaps") {
        ValidateConfigData(object, "data", causes);
        ValidateConfigData(object, "binaryData", causes);
      }
      break;
  }
}

bool SelectableField(const ResourceType& type, const json& object, const std::string& field,
                     std::string* value) {
  static const std::map<KindRules, std::set<std::string>> kFields = {
      {KindRules::kPod,
       {"spec.nodeName", "spec.restartPolicy", "spec.schedulerName", "spec.serviceAccountName",
        "status.phase", "status.podIP", "status.nominatedNodeName"}},
      {KindRules::kSecret, {"type"}},
      {KindRules::kEvent,
       {"regarding.kind", "regarding.namespace", "regarding.name", "regarding.uid",
        "regarding.apiVersion", "regarding.resourceVersion", "regarding.fieldPath", "reason",
        "reportingController", "type"}},
  };
  bool supported = field == "metadata.name" || field == "metadata.namespace";
  auto it = kFields.find(type.rules);
  if (it != kFields.end()) supported = supported || it->second.count(field) > 0;
  if (!supported) return false;
  std::vector<std::string> path;
  size_t start = 0;
  for (;;) {
    const size_t dot = field.find('.', start);
    path.push_back(field.substr(start, dot == std::string::npos ? std::string::npos : dot - start));
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  *value = StringField(object, path);
  return true;
}

FieldShape ShapeOf(const ResourceType& type, const std::vector<std::string>& names) {
  FieldShape shape;
  if (names.size() == 2 && names[0] == "metadata") {
    if (names[1] == "ownerReferences") {
      shape.list_keys = {"uid"};
      shape.atomic_elements = true;
    }
    return shape;
  }
  if (type.rules == KindRules::kCustomResource) {
    if (type.schema == nullptr) return shape;
    const StructuralSchema::Shape s = type.schema->ShapeAt(names);
    shape.atomic = s.atomic;
    shape.list_keys = s.list_keys;
    return shape;
  }
  auto is = [&](std::initializer_list<const char*> path) {
    if (names.size() != path.size()) return false;
    size_t i = 0;
    for (const char* p : path) {
      if (names[i++] != p) return false;
    }
    return true;
  };
  if (type.rules == KindRules::kPod) {
    for (const char* list : {"containers", "initContainers", "ephemeralContainers"}) {
      if (is({"spec", list})) shape.list_keys = {"name"};
      if (is({"spec", list, "ports"})) shape.list_keys = {"containerPort", "protocol"};
      if (is({"spec", list, "env"})) shape.list_keys = {"name"};
      if (is({"spec", list, "volumeMounts"})) shape.list_keys = {"mountPath"};
    }
    if (is({"spec", "volumes"}) || is({"spec", "imagePullSecrets"})) shape.list_keys = {"name"};
    if (is({"status", "conditions"})) shape.list_keys = {"type"};
  } else if (type.rules == KindRules::kService) {
    if (is({"spec", "ports"})) shape.list_keys = {"port", "protocol"};
  } else if (type.rules == KindRules::kEvent) {
    if (is({"regarding"}) || is({"related"})) shape.atomic = true;
  }
  return shape;
}

json EmptyObject(const ResourceType& type) {
  switch (type.rules) {
    case KindRules::kPod:
      // A Pod's containers list has no omitempty: null in the zero value.
      return {{"spec", {{"containers", nullptr}}}};
    case KindRules::kService:
    case KindRules::kPersistentVolumeClaim:
    case KindRules::kLease:
      return {{"spec", json::object()}};
    case KindRules::kEvent:
      return {{"deprecatedSource", json::object()},
              {"deprecatedFirstTimestamp", nullptr},
              {"deprecatedLastTimestamp", nullptr}};
    default:
      return json::object();
  }
}

void KeepServerOwnedMetadata(const json& stored, json* object) {
  json& meta = (*object)["metadata"];
  if (!meta.is_object()) meta = json::object();
  for (const char* field : {"name", "namespace", "uid", "creationTimestamp", "deletionTimestamp",
                            "deletionGracePeriodSeconds", "generation", "resourceVersion"}) {
    const json* value = FindField(stored, {"metadata", field});
    if (value != nullptr) {
      meta[field] = *value;
    } else {
      meta.erase(field);
    }
  }
  meta.erase("selfLink");
}

std::string PodQosClass(const json& pod_spec) {
  bool any = false;
  bool guaranteed = true;
  for (const char* list : {"containers", "initContainers"}) {
    if (!pod_spec.is_object() || !pod_spec.contains(list) || !pod_spec[list].is_array()) continue;
    for (const json& c : pod_spec[list]) {
      const json* requests = FindField(c, {"resources", "requests"});
      const json* limits = FindField(c, {"resources", "limits"});
      for (const char* resource : {"cpu", "memory"}) {
        const json* request = requests != nullptr ? FindField(*requests, {resource}) : nullptr;
        const json* limit = limits != nullptr ? FindField(*limits, {resource}) : nullptr;
        if (request != nullptr || limit != nullptr) any = true;
        if (limit == nullptr || (request != nullptr && *request != *limit)) guaranteed = false;
      }
    }
  }
  if (!any) return "BestEffort";
  return guaranteed ? "Guaranteed" : "Burstable";
}

}  // namespace kube_testing
}  // namespace gaptrain
