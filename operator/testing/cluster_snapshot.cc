#include "operator/testing/cluster_snapshot.h"

#include "operator/testing/base64.h"
#include "operator/testing/json_fields.h"

namespace gaptrain {
namespace kube_testing {

using nlohmann::json;

namespace {

std::string Key(const std::string& ns, const std::string& name) { return ns + "/" + name; }

}  // namespace

Status DecodeConfigData(const json& object, bool is_secret,
                        std::map<std::string, std::string>* data) {
  const std::string what = std::string(is_secret ? "Secret " : "ConfigMap ") +
                           StringField(object, {"metadata", "namespace"}) + "/" +
                           StringField(object, {"metadata", "name"});
  for (const char* field : {"data", "binaryData"}) {
    const json* entries = FindField(object, {field});
    if (entries == nullptr || !entries->is_object()) continue;
    const bool base64 = is_secret || std::string(field) == "binaryData";
    for (const auto& [key, value] : entries->items()) {
      if (!value.is_string()) {
        return Status::InvalidArgument(what + " " + field + "." + key + ": not a string");
      }
      long bad_offset = 0;
      if (!base64) {
        (*data)[key] = value.get<std::string>();
      } else if (!Base64Decode(value.get<std::string>(), &(*data)[key], &bad_offset)) {
        return Status::InvalidArgument(what + " " + field + "." + key +
                                       ": illegal base64 data at input byte " +
                                       std::to_string(bad_offset));
      }
    }
  }
  return Status::OK();
}

const std::vector<std::string>& ClusterSnapshot::Resources() {
  static const std::vector<std::string> resources = {"pods", "services", "secrets", "configmaps",
                                                     "persistentvolumeclaims"};
  return resources;
}

const json* ClusterSnapshot::Find(const std::string& resource, const std::string& ns,
                                  const std::string& name) const {
  auto objects = objects_.find(resource);
  if (objects == objects_.end()) return nullptr;
  auto it = objects->second.find(Key(ns, name));
  return it == objects->second.end() ? nullptr : &it->second;
}

std::vector<const json*> ClusterSnapshot::All(const std::string& resource) const {
  std::vector<const json*> out;
  auto objects = objects_.find(resource);
  if (objects == objects_.end()) return out;
  for (const auto& [key, object] : objects->second) out.push_back(&object);
  return out;
}

void ClusterSnapshot::Put(const std::string& resource, json object) {
  const std::string key = Key(StringField(object, {"metadata", "namespace"}),
                              StringField(object, {"metadata", "name"}));
  objects_[resource][key] = std::move(object);
}

}  // namespace kube_testing
}  // namespace gaptrain
