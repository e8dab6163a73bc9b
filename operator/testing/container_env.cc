#include "operator/testing/container_env.h"

#include <cctype>
#include <cmath>
#include <cstdlib>

#include "operator/testing/json_fields.h"

namespace gaptrain {
namespace kube_testing {

using nlohmann::json;

namespace {

// Kubernetes' C_IDENTIFIER-like rule for environment variable names
// (validation.IsEnvVarName): letters, digits, '_', '-', '.', not starting
// with a digit.
bool IsEnvVarName(const std::string& name) {
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0]))) return false;
  for (char c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-' && c != '.') {
      return false;
    }
  }
  return true;
}

// The variables defined so far, in definition order, a later definition
// replacing an earlier one in place.
class Variables {
 public:
  void Set(const std::string& name, const std::string& value) {
    if (values_.count(name) == 0) order_.push_back(name);
    values_[name] = value;
  }
  const std::map<std::string, std::string>& values() const { return values_; }
  EnvironmentList List() const {
    EnvironmentList out;
    for (const std::string& name : order_) out.emplace_back(name, values_.at(name));
    return out;
  }

 private:
  std::vector<std::string> order_;
  std::map<std::string, std::string> values_;
};

// `ref` is a secretKeyRef or configMapKeyRef. *found is false when it is
// optional and missing.
Status ReadKeyRef(const json& ref, bool is_secret, const std::string& ns,
                  const ClusterSnapshot& snapshot, const std::string& field, std::string* value,
                  bool* found) {
  *found = false;
  const std::string name = StringField(ref, {"name"});
  const std::string key = StringField(ref, {"key"});
  if (name.empty()) return Status::InvalidArgument(field + ".name: Required value");
  if (key.empty()) return Status::InvalidArgument(field + ".key: Required value");
  const bool optional = BoolField(ref, {"optional"});
  const json* object = snapshot.Find(is_secret ? "secrets" : "configmaps", ns, name);
  if (object == nullptr) {
    if (optional) return Status::OK();
    return Status::NotFound(std::string(is_secret ? "secret" : "configmap") + " \"" + name +
                            "\" not found");
  }
  std::map<std::string, std::string> data;
  GAPTRAIN_RETURN_IF_ERROR(DecodeConfigData(*object, is_secret, &data));
  auto it = data.find(key);
  if (it == data.end()) {
    if (optional) return Status::OK();
    return Status::NotFound("couldn't find key " + key + " in " +
                            (is_secret ? "Secret " : "ConfigMap ") + ns + "/" + name);
  }
  *value = it->second;
  *found = true;
  return Status::OK();
}

// metadata.labels['app'] -> ("labels", "app").
bool ParseSubscript(const std::string& path, const std::string& map_name, std::string* key) {
  const std::string prefix = "metadata." + map_name + "['";
  if (path.size() < prefix.size() + 2 || path.compare(0, prefix.size(), prefix) != 0 ||
      path.compare(path.size() - 2, 2, "']") != 0) {
    return false;
  }
  *key = path.substr(prefix.size(), path.size() - prefix.size() - 2);
  return true;
}

Status ReadFieldRef(const json& pod, const json& ref, const std::string& field,
                    std::string* value) {
  const std::string path = StringField(ref, {"fieldPath"});
  std::string key;
  if (path == "metadata.name") {
    *value = StringField(pod, {"metadata", "name"});
  } else if (path == "metadata.namespace") {
    *value = StringField(pod, {"metadata", "namespace"});
  } else if (path == "metadata.uid") {
    *value = StringField(pod, {"metadata", "uid"});
  } else if (ParseSubscript(path, "labels", &key)) {
    *value = StringField(pod, {"metadata", "labels", key});
  } else if (ParseSubscript(path, "annotations", &key)) {
    *value = StringField(pod, {"metadata", "annotations", key});
  } else if (path == "spec.nodeName") {
    *value = StringField(pod, {"spec", "nodeName"});
  } else if (path == "spec.serviceAccountName") {
    *value = StringField(pod, {"spec", "serviceAccountName"});
  } else if (path == "status.hostIP") {
    *value = StringField(pod, {"status", "hostIP"});
  } else if (path == "status.podIP" || path == "status.podIPs") {
    *value = StringField(pod, {"status", "podIP"});
  } else {
    return Status::InvalidArgument(field + ".fieldRef.fieldPath: Unsupported value: \"" + path +
                                   "\"");
  }
  return Status::OK();
}

// resourceFieldRef: the kubelet's ExtractContainerResourceValue.
Status ReadResourceFieldRef(const json& pod, const json& container, const json& ref,
                            const json& node_allocatable, const std::string& field,
                            std::string* value) {
  const std::string resource = StringField(ref, {"resource"});
  const size_t dot = resource.find('.');
  const std::string kind = dot == std::string::npos ? "" : resource.substr(0, dot);
  const std::string name = dot == std::string::npos ? "" : resource.substr(dot + 1);
  if ((kind != "limits" && kind != "requests") || (name != "cpu" && name != "memory")) {
    return Status::InvalidArgument(field + ".resource: Unsupported value: \"" + resource +
                                   "\" (the test node knows limits.cpu, requests.cpu, "
                                   "limits.memory, requests.memory)");
  }
  const json* of = &container;
  const std::string container_name = StringField(ref, {"containerName"});
  if (!container_name.empty()) {
    of = nullptr;
    for (const json& c : ListField(pod, {"spec", "containers"})) {
      if (StringField(c, {"name"}) == container_name) of = &c;
    }
    if (of == nullptr) {
      return Status::InvalidArgument(field + ".containerName: Not found: \"" + container_name +
                                     "\"");
    }
  }
  std::string quantity = StringField(*of, {"resources", kind, name});
  if (quantity.empty()) {
    quantity = kind == "limits" ? StringField(node_allocatable, {name}) : "0";
  }
  const json* divisor_field = FindField(ref, {"divisor"});
  const std::string divisor_text =
      divisor_field == nullptr ? "1"
      : divisor_field->is_string() ? divisor_field->get<std::string>()
                                   : divisor_field->dump();
  long double amount = 0, divisor = 0;
  if (!ParseQuantity(quantity.empty() ? "0" : quantity, &amount)) {
    return Status::InvalidArgument(field + ": the container's " + resource + " \"" + quantity +
                                   "\" is not a quantity");
  }
  if (!ParseQuantity(divisor_text, &divisor) || divisor <= 0) {
    return Status::InvalidArgument(field + ".divisor: Invalid value: \"" + divisor_text + "\"");
  }
  *value = std::to_string(static_cast<long long>(std::ceil(amount / divisor - 1e-12L)));
  return Status::OK();
}

}  // namespace

bool ParseQuantity(const std::string& text, long double* value) {
  static const std::pair<const char*, long double> kSuffixes[] = {
      {"Ki", 1024.0L}, {"Mi", 1048576.0L}, {"Gi", 1073741824.0L}, {"Ti", 1099511627776.0L},
      {"Pi", 1125899906842624.0L}, {"Ei", 1152921504606846976.0L}, {"n", 1e-9L}, {"u", 1e-6L},
      {"m", 1e-3L}, {"k", 1e3L}, {"M", 1e6L}, {"G", 1e9L}, {"T", 1e12L}, {"P", 1e15L},
      {"E", 1e18L}};
  size_t end = 0;
  while (end < text.size() &&
         (std::isdigit(static_cast<unsigned char>(text[end])) || text[end] == '.' ||
          (end == 0 && (text[end] == '+' || text[end] == '-')))) {
    ++end;
  }
  std::string number = text.substr(0, end);
  std::string suffix = text.substr(end);
  // An exponent ("1e3") is part of the number, not the suffix E (exa).
  if (suffix.size() > 1 && (suffix[0] == 'e' || suffix[0] == 'E') &&
      suffix.find_first_not_of("+-0123456789", 1) == std::string::npos) {
    number += suffix;
    suffix.clear();
  }
  if (number.empty() || number == "." || number == "+" || number == "-") return false;
  char* parsed_end = nullptr;
  const long double base = std::strtold(number.c_str(), &parsed_end);
  if (parsed_end == nullptr || *parsed_end != '\0') return false;
  long double scale = 1;
  if (!suffix.empty()) {
    bool known = false;
    for (const auto& [name, factor] : kSuffixes) {
      if (suffix == name) {
        scale = factor;
        known = true;
      }
    }
    if (!known) return false;
  }
  *value = base * scale;
  return true;
}

std::string ExpandVariableReferences(const std::string& input,
                                     const std::map<std::string, std::string>& variables) {
  std::string out;
  size_t i = 0;
  while (i < input.size()) {
    if (input[i] != '$' || i + 1 == input.size()) {
      out += input[i++];
      continue;
    }
    const char next = input[i + 1];
    if (next == '$') {
      out += '$';
      i += 2;
    } else if (next == '(') {
      const size_t close = input.find(')', i + 2);
      if (close == std::string::npos) {
        out += "$(";
        i += 2;
        continue;
      }
      const std::string name = input.substr(i + 2, close - i - 2);
      auto it = variables.find(name);
      out += it != variables.end() ? it->second : "$(" + name + ")";
      i = close + 1;
    } else {
      out += '$';
      out += next;
      i += 2;
    }
  }
  return out;
}

Status ResolveContainerEnv(const json& pod, const json& container,
                           const ClusterSnapshot& snapshot, EnvironmentList* env,
                           const json& node_allocatable) {
  const std::string ns = StringField(pod, {"metadata", "namespace"});
  Variables variables;
  const json env_from = ListField(container, {"envFrom"});
  for (size_t i = 0; i < env_from.size(); ++i) {
    const json& source = env_from[i];
    const std::string field = "envFrom[" + std::to_string(i) + "]";
    const bool is_secret = FindField(source, {"secretRef"}) != nullptr;
    const json* ref = FindField(source, {is_secret ? "secretRef" : "configMapRef"});
    if (ref == nullptr || !ref->is_object()) {
      return Status::InvalidArgument(field + ": must have configMapRef or secretRef");
    }
    const std::string name = StringField(*ref, {"name"});
    const json* object = snapshot.Find(is_secret ? "secrets" : "configmaps", ns, name);
    if (object == nullptr) {
      if (BoolField(*ref, {"optional"})) continue;
      return Status::NotFound(std::string(is_secret ? "secret" : "configmap") + " \"" + name +
                              "\" not found");
    }
    std::map<std::string, std::string> data;
    GAPTRAIN_RETURN_IF_ERROR(DecodeConfigData(*object, is_secret, &data));
    const std::string prefix = StringField(source, {"prefix"});
    for (const auto& [key, value] : data) {
      if (IsEnvVarName(prefix + key)) variables.Set(prefix + key, value);
    }
  }
  const json entries = ListField(container, {"env"});
  for (size_t i = 0; i < entries.size(); ++i) {
    const json& entry = entries[i];
    const std::string field = "env[" + std::to_string(i) + "]";
    const std::string name = StringField(entry, {"name"});
    if (!IsEnvVarName(name)) {
      return Status::InvalidArgument(field + ".name: Invalid value: \"" + name +
                                     "\": a valid environment variable name must consist of "
                                     "alphabetic characters, digits, '_', '-', or '.', and must "
                                     "not start with a digit");
    }
    const json* from = FindField(entry, {"valueFrom"});
    if (from == nullptr) {
      variables.Set(name, ExpandVariableReferences(StringField(entry, {"value"}),
                                                   variables.values()));
      continue;
    }
    std::string value;
    bool found = true;
    if (const json* ref = FindField(*from, {"fieldRef"})) {
      GAPTRAIN_RETURN_IF_ERROR(ReadFieldRef(pod, *ref, field + ".valueFrom", &value));
    } else if (const json* secret = FindField(*from, {"secretKeyRef"})) {
      GAPTRAIN_RETURN_IF_ERROR(ReadKeyRef(*secret, true, ns, snapshot,
                                          field + ".valueFrom.secretKeyRef", &value, &found));
    } else if (const json* config = FindField(*from, {"configMapKeyRef"})) {
      GAPTRAIN_RETURN_IF_ERROR(ReadKeyRef(*config, false, ns, snapshot,
                                          field + ".valueFrom.configMapKeyRef", &value, &found));
    } else if (const json* resource = FindField(*from, {"resourceFieldRef"})) {
      GAPTRAIN_RETURN_IF_ERROR(ReadResourceFieldRef(pod, container, *resource, node_allocatable,
                                                    field + ".valueFrom.resourceFieldRef",
                                                    &value));
    } else {
      return Status::InvalidArgument(field + ".valueFrom: must have fieldRef, secretKeyRef, "
                                     "configMapKeyRef or resourceFieldRef");
    }
    if (found) variables.Set(name, value);
  }
  *env = variables.List();
  return Status::OK();
}

Status ResolveCommand(const json& container, const EnvironmentList& env,
                      std::vector<std::string>* argv) {
  const std::map<std::string, std::string> variables(env.begin(), env.end());
  if (ListField(container, {"command"}).empty()) {
    return Status::InvalidArgument(
        "command: Required value: the test node has no images, so the container must name its "
        "command");
  }
  argv->clear();
  for (const char* field : {"command", "args"}) {
    const json* list = FindField(container, {field});
    if (list == nullptr || list->is_null()) continue;
    if (!list->is_array()) return Status::InvalidArgument(std::string(field) + ": must be a list");
    for (size_t i = 0; i < list->size(); ++i) {
      if (!(*list)[i].is_string()) {
        return Status::InvalidArgument(std::string(field) + "[" + std::to_string(i) +
                                       "]: must be a string");
      }
      argv->push_back(ExpandVariableReferences((*list)[i].get<std::string>(), variables));
    }
  }
  return Status::OK();
}

}  // namespace kube_testing
}  // namespace gaptrain
