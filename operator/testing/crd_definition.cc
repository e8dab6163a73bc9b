#include "operator/testing/crd_definition.h"

#include <cctype>
#include <memory>
#include <utility>

#include "operator/testing/name_validation.h"
#include "operator/testing/json_fields.h"

namespace gaptrain {
namespace kube_testing {

using nlohmann::json;

namespace {


std::vector<std::string> StringList(const json& object, const char* key) {
  std::vector<std::string> out;
  if (!object.is_object() || !object.contains(key) || !object[key].is_array()) return out;
  for (const json& v : object[key]) {
    if (v.is_string()) out.push_back(v.get<std::string>());
  }
  return out;
}

// ".spec.workers.replicas" -> {"spec", "workers", "replicas"}; empty when
// the path is not a plain dotted path.
std::vector<std::string> SplitJsonPath(const std::string& path) {
  std::vector<std::string> parts;
  if (path.size() < 2 || path[0] != '.') return parts;
  size_t start = 1;
  while (start <= path.size()) {
    size_t dot = path.find('.', start);
    if (dot == std::string::npos) dot = path.size();
    const std::string part = path.substr(start, dot - start);
    if (part.empty() || part.find_first_of("[]") != std::string::npos) return {};
    parts.push_back(part);
    start = dot + 1;
  }
  return parts;
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

ResourceType CustomResourceDefinitionType() {
  ResourceType t;
  t.group = "apiextensions.k8s.io";
  t.version = "v1";
  t.resource = "customresourcedefinitions";
  t.singular = "customresourcedefinition";
  t.kind = "CustomResourceDefinition";
  t.list_kind = "CustomResourceDefinitionList";
  t.namespaced = false;
  t.status_subresource = true;
  t.tracks_generation = true;
  t.rules = KindRules::kCustomResourceDefinition;
  t.short_names = {"crd", "crds"};
  t.categories = {"api-extensions"};
  return t;
}

void ApplyCrdDefaults(json* crd) {
  if (!crd->is_object() || !(*crd)["spec"].is_object()) return;
  json& spec = (*crd)["spec"];
  if (spec["names"].is_object()) {
    json& names = spec["names"];
    const std::string kind = StringField(names, {"kind"});
    if (!kind.empty() && !names.contains("listKind")) names["listKind"] = kind + "List";
    if (!kind.empty() && !names.contains("singular")) names["singular"] = Lower(kind);
  } else {
    spec.erase("names");
  }
  if (!spec.contains("conversion")) spec["conversion"] = {{"strategy", "None"}};
}

void SetAcceptedCrdStatus(const std::string& now, json* crd) {
  const json& spec = (*crd)["spec"];
  json status = crd->contains("status") && (*crd)["status"].is_object() ? (*crd)["status"]
                                                                          : json::object();
  status["acceptedNames"] = spec.contains("names") ? spec["names"] : json::object();
  if (!status.contains("conditions")) {
    status["conditions"] = json::array(
        {{{"type", "NamesAccepted"}, {"status", "True"}, {"lastTransitionTime", now},
          {"reason", "NoConflicts"}, {"message", "no conflicts found"}},
         {{"type", "Established"}, {"status", "True"}, {"lastTransitionTime", now},
          {"reason", "InitialNamesAccepted"},
          {"message", "the initial names have been accepted"}}});
  }
  json stored = status.contains("storedVersions") && status["storedVersions"].is_array()
                    ? status["storedVersions"]
                    : json::array();
  if (spec.contains("versions") && spec["versions"].is_array()) {
    for (const json& v : spec["versions"]) {
      if (v.is_object() && BoolField(v, {"storage"}, false)) {
        const std::string name = StringField(v, {"name"});
        bool known = false;
        for (const json& s : stored) known = known || s == name;
        if (!known) stored.push_back(name);
      }
    }
  }
  status["storedVersions"] = std::move(stored);
  (*crd)["status"] = std::move(status);
}

void ParseCrd(const json& crd, std::vector<ResourceType>* served,
              std::vector<StatusCause>* causes) {
  const size_t causes_before = causes->size();
  const json empty = json::object();
  const json& spec = crd.is_object() && crd.contains("spec") && crd["spec"].is_object()
                         ? crd["spec"]
                         : empty;
  const json& names = spec.contains("names") && spec["names"].is_object() ? spec["names"] : empty;
  const std::string group = StringField(spec, {"group"});
  const std::string plural = StringField(names, {"plural"});
  const std::string kind = StringField(names, {"kind"});
  const std::string name =
      crd.is_object() && crd.contains("metadata") ? StringField(crd["metadata"], {"name"}) : "";

  if (group.empty()) {
    causes->push_back(RequiredField("spec.group"));
  } else if (group.find('.') == std::string::npos) {
    causes->push_back(InvalidField("spec.group", group, "should be a domain with at least one dot"));
  }
  if (plural.empty()) {
    causes->push_back(RequiredField("spec.names.plural"));
  } else {
    for (const std::string& e : DnsSubdomainErrors(plural)) {
      causes->push_back(InvalidField("spec.names.plural", plural, e));
    }
  }
  if (kind.empty()) causes->push_back(RequiredField("spec.names.kind"));
  if (!group.empty() && !plural.empty() && name != plural + "." + group) {
    causes->push_back(
        InvalidField("metadata.name", name, "must be spec.names.plural+\".\"+spec.group"));
  }
  const std::string scope = StringField(spec, {"scope"});
  if (scope.empty()) {
    causes->push_back(RequiredField("spec.scope"));
  } else if (scope != "Namespaced" && scope != "Cluster") {
    causes->push_back(UnsupportedField("spec.scope", scope, {"Cluster", "Namespaced"}));
  }
  if (!spec.contains("versions") || !spec["versions"].is_array() || spec["versions"].empty()) {
    causes->push_back(RequiredField("spec.versions"));
    return;
  }
  int storage_versions = 0;
  std::vector<ResourceType> types;
  const json& versions = spec["versions"];
  for (size_t i = 0; i < versions.size(); ++i) {
    const std::string at = "spec.versions[" + std::to_string(i) + "]";
    const json& v = versions[i];
    if (!v.is_object()) {
      causes->push_back(InvalidField(at, v, "must be an object"));
      continue;
    }
    if (BoolField(v, {"storage"}, false)) ++storage_versions;
    ResourceType t;
    t.group = group;
    t.version = StringField(v, {"name"});
    if (t.version.empty()) causes->push_back(RequiredField(at + ".name"));
    t.resource = plural;
    t.singular = StringField(names, {"singular"});
    t.kind = kind;
    t.list_kind = StringField(names, {"listKind"});
    t.namespaced = scope != "Cluster";
    t.tracks_generation = true;
    t.rules = KindRules::kCustomResource;
    t.short_names = StringList(names, "shortNames");
    t.categories = StringList(names, "categories");
    t.crd_name = name;
    const json* schema = nullptr;
    if (v.contains("schema") && v["schema"].is_object() &&
        v["schema"].contains("openAPIV3Schema")) {
      schema = &v["schema"]["openAPIV3Schema"];
    }
    if (schema == nullptr) {
      causes->push_back(RequiredField(at + ".schema.openAPIV3Schema", "schemas are required"));
    } else {
      std::unique_ptr<StructuralSchema> parsed;
      Status s = StructuralSchema::Parse(*schema, &parsed);
      if (!s.ok()) {
        causes->push_back(InvalidField(at + ".schema.openAPIV3Schema", "object", s.message()));
      } else {
        t.schema = std::move(parsed);
      }
    }
    if (v.contains("subresources") && v["subresources"].is_object()) {
      const json& sub = v["subresources"];
      t.status_subresource = sub.contains("status");
      if (sub.contains("scale") && sub["scale"].is_object()) {
        const json& scale = sub["scale"];
        ScaleSubresource s;
        const std::string spec_path = StringField(scale, {"specReplicasPath"});
        const std::string status_path = StringField(scale, {"statusReplicasPath"});
        const std::string selector_path = StringField(scale, {"labelSelectorPath"});
        s.spec_replicas_path = SplitJsonPath(spec_path);
        s.status_replicas_path = SplitJsonPath(status_path);
        s.label_selector_path = SplitJsonPath(selector_path);
        const std::string scale_at = at + ".subresources.scale";
        if (s.spec_replicas_path.size() < 2 || s.spec_replicas_path[0] != "spec") {
          causes->push_back(InvalidField(scale_at + ".specReplicasPath", spec_path,
                                         "should be a json path under .spec"));
        }
        if (s.status_replicas_path.size() < 2 || s.status_replicas_path[0] != "status") {
          causes->push_back(InvalidField(scale_at + ".statusReplicasPath", status_path,
                                         "should be a json path under .status"));
        }
        if (!selector_path.empty() &&
            (s.label_selector_path.size() < 2 ||
             (s.label_selector_path[0] != "spec" && s.label_selector_path[0] != "status"))) {
          causes->push_back(InvalidField(scale_at + ".labelSelectorPath", selector_path,
                                         "should be a json path under either .spec or .status"));
        }
        t.scale = std::move(s);
      }
    }
    if (v.contains("additionalPrinterColumns") && v["additionalPrinterColumns"].is_array()) {
      const json& columns = v["additionalPrinterColumns"];
      for (size_t c = 0; c < columns.size(); ++c) {
        const std::string column_at = at + ".additionalPrinterColumns[" + std::to_string(c) + "]";
        PrinterColumn column;
        column.name = StringField(columns[c], {"name"});
        column.type = StringField(columns[c], {"type"});
        column.format = StringField(columns[c], {"format"});
        column.json_path = StringField(columns[c], {"jsonPath"});
        column.description = StringField(columns[c], {"description"});
        if (columns[c].is_object() && columns[c].contains("priority") &&
            columns[c]["priority"].is_number_integer()) {
          column.priority = columns[c]["priority"].get<int>();
        }
        if (column.name.empty()) causes->push_back(RequiredField(column_at + ".name"));
        if (column.json_path.empty()) causes->push_back(RequiredField(column_at + ".jsonPath"));
        if (column.type != "string" && column.type != "integer" && column.type != "number" &&
            column.type != "boolean" && column.type != "date") {
          causes->push_back(UnsupportedField(column_at + ".type", column.type,
                                             {"boolean", "date", "integer", "number", "string"}));
        }
        if (column.description.empty()) {
          column.description =
              "Custom resource definition column (in JSONPath format): " + column.json_path;
        }
        t.printer_columns.push_back(std::move(column));
      }
    } else {
      PrinterColumn age;
      age.name = "Age";
      age.type = "date";
      age.json_path = ".metadata.creationTimestamp";
      age.description = "Custom resource definition column (in JSONPath format): " + age.json_path;
      t.printer_columns.push_back(std::move(age));
    }
    if (BoolField(v, {"served"}, false)) types.push_back(std::move(t));
  }
  if (storage_versions != 1) {
    causes->push_back(InvalidField("spec.versions", storage_versions,
                                   "must have exactly one version marked as storage version"));
  }
  if (causes->size() == causes_before) {
    for (ResourceType& t : types) served->push_back(std::move(t));
  }
}

}  // namespace kube_testing
}  // namespace gaptrain
