#include "operator/controller/object_key.h"

namespace gaptrain {
namespace controller {

namespace {

const nlohmann::json* Metadata(const nlohmann::json& object) {
  if (!object.is_object()) return nullptr;
  auto metadata = object.find("metadata");
  if (metadata == object.end() || !metadata->is_object()) return nullptr;
  return &*metadata;
}

std::string MetadataString(const nlohmann::json& object, const char* field) {
  const nlohmann::json* metadata = Metadata(object);
  if (metadata == nullptr) return "";
  auto value = metadata->find(field);
  return value != metadata->end() && value->is_string() ? value->get<std::string>() : "";
}

}  // namespace

std::string MakeKey(const std::string& ns, const std::string& name) {
  return ns.empty() ? name : ns + "/" + name;
}

Status ObjectKey(const nlohmann::json& object, std::string* key) {
  if (!object.is_object()) return Status::InvalidArgument("object: not a JSON object");
  const nlohmann::json* metadata = Metadata(object);
  if (metadata == nullptr) return Status::InvalidArgument("metadata: missing or not an object");
  auto name = metadata->find("name");
  if (name == metadata->end() || !name->is_string() || name->get<std::string>().empty()) {
    return Status::InvalidArgument("metadata.name: missing, empty or not a string");
  }
  auto ns = metadata->find("namespace");
  if (ns != metadata->end() && !ns->is_string()) {
    return Status::InvalidArgument("metadata.namespace: not a string");
  }
  *key = MakeKey(ns == metadata->end() ? "" : ns->get<std::string>(), name->get<std::string>());
  return Status::OK();
}

Status SplitKey(const std::string& key, std::string* ns, std::string* name) {
  const size_t slash = key.find('/');
  if (slash == std::string::npos) {
    if (key.empty()) return Status::InvalidArgument("key: empty");
    ns->clear();
    *name = key;
    return Status::OK();
  }
  if (slash == 0 || slash + 1 == key.size() || key.find('/', slash + 1) != std::string::npos) {
    return Status::InvalidArgument("key '" + key + "': not namespace/name");
  }
  *ns = key.substr(0, slash);
  *name = key.substr(slash + 1);
  return Status::OK();
}

std::string ObjectNamespace(const nlohmann::json& object) {
  return MetadataString(object, "namespace");
}

std::string ObjectName(const nlohmann::json& object) { return MetadataString(object, "name"); }

std::string ObjectResourceVersion(const nlohmann::json& object) {
  return MetadataString(object, "resourceVersion");
}

std::string ObjectLabel(const nlohmann::json& object, const std::string& key, bool* present) {
  if (present != nullptr) *present = false;
  const nlohmann::json* metadata = Metadata(object);
  if (metadata == nullptr) return "";
  auto labels = metadata->find("labels");
  if (labels == metadata->end() || !labels->is_object()) return "";
  auto value = labels->find(key);
  if (value == labels->end() || !value->is_string()) return "";
  if (present != nullptr) *present = true;
  return value->get<std::string>();
}

}  // namespace controller
}  // namespace gaptrain
