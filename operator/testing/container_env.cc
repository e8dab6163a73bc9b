#include "operator/testing/container_env.h"

#include <cctype>

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

}  // namespace

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
                           const ClusterSnapshot& snapshot, EnvironmentList* env) {
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
    } else if (FindField(*from, {"resourceFieldRef"}) != nullptr) {
      return Status::InvalidArgument(field +
                                     ".valueFrom.resourceFieldRef: not supported by the test node");
    } else {
      return Status::InvalidArgument(field + ".valueFrom: must have fieldRef, secretKeyRef or "
                                     "configMapKeyRef");
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
