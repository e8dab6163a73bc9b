#include "operator/trainingjob/cached_fields.h"

#include <utility>

namespace gaptrain {
namespace trainingjob {
namespace {

using nlohmann::json;

// object[key] when object is a JSON object holding it, else null.
json* Member(json* object, const char* key) {
  if (object == nullptr || !object->is_object()) return nullptr;
  auto it = object->find(key);
  return it == object->end() ? nullptr : &*it;
}

// The string fields `keys` of `from`, where they are strings.
json Strings(const json& from, std::initializer_list<const char*> keys) {
  json out = json::object();
  for (const char* key : keys) {
    auto it = from.find(key);
    if (it != from.end() && it->is_string()) out[key] = *it;
  }
  return out;
}

}  // namespace

void TrimCachedObject(json* object) {
  json* metadata = Member(object, "metadata");
  if (metadata == nullptr || !metadata->is_object()) return;
  metadata->erase("managedFields");
  json* annotations = Member(metadata, "annotations");
  if (annotations != nullptr && annotations->is_object()) {
    annotations->erase(kLastAppliedAnnotation);
    if (annotations->empty()) metadata->erase("annotations");
  }
}

void TrimCachedPod(json* pod) {
  TrimCachedObject(pod);
  json* spec = Member(pod, "spec");
  if (spec == nullptr || !spec->is_object()) return;
  json kept = json::object();
  if (json* node = Member(spec, "nodeName")) kept["nodeName"] = std::move(*node);
  if (json* containers = Member(spec, "containers"); containers != nullptr && containers->is_array()) {
    json list = json::array();
    for (const json& c : *containers) {
      list.push_back(c.is_object() ? Strings(c, {"name", "image"}) : json::object());
    }
    kept["containers"] = std::move(list);
  }
  if (json* volumes = Member(spec, "volumes"); volumes != nullptr && volumes->is_array()) {
    json list = json::array();
    for (const json& v : *volumes) {
      if (!v.is_object()) continue;
      auto secret = v.find("secret");
      if (secret == v.end() || !secret->is_object()) continue;
      json volume = Strings(v, {"name"});
      volume["secret"] = Strings(*secret, {"secretName"});
      list.push_back(std::move(volume));
    }
    if (!list.empty()) kept["volumes"] = std::move(list);
  }
  *spec = std::move(kept);
}

}  // namespace trainingjob
}  // namespace gaptrain
