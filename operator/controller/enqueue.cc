#include "operator/controller/enqueue.h"

#include <set>
#include <utility>

#include "operator/controller/object_key.h"

namespace gaptrain {
namespace controller {

namespace {

// "gaptrain.io/v1alpha1" -> "gaptrain.io"; "v1" -> "".
std::string GroupOf(const std::string& api_version) {
  const size_t slash = api_version.find('/');
  return slash == std::string::npos ? "" : api_version.substr(0, slash);
}

std::string StringField(const nlohmann::json& object, const char* field) {
  auto value = object.find(field);
  return value != object.end() && value->is_string() ? value->get<std::string>() : "";
}

// The name of the matching controller owner, or "".
std::string ControllerOwnerName(const nlohmann::json& object, const OwnerMatch& match) {
  auto metadata = object.find("metadata");
  if (metadata == object.end() || !metadata->is_object()) return "";
  auto refs = metadata->find("ownerReferences");
  if (refs == metadata->end() || !refs->is_array()) return "";
  for (const nlohmann::json& ref : *refs) {
    if (!ref.is_object()) continue;
    auto controller = ref.find("controller");
    if (controller == ref.end() || !controller->is_boolean() || !controller->get<bool>()) continue;
    if (StringField(ref, "kind") != match.kind) continue;
    if (GroupOf(StringField(ref, "apiVersion")) != match.group) continue;
    return StringField(ref, "name");
  }
  return "";
}

// Whether two metadata objects are equal but for the server's bookkeeping.
bool SameMetadata(const nlohmann::json& a, const nlohmann::json& b) {
  if (!a.is_object() || !b.is_object()) return a == b;
  auto bookkeeping = [](const std::string& key) {
    return key == "resourceVersion" || key == "managedFields";
  };
  size_t compared = 0;
  for (auto it = a.begin(); it != a.end(); ++it) {
    if (bookkeeping(it.key())) continue;
    auto other = b.find(it.key());
    if (other == b.end() || *other != *it) return false;
    ++compared;
  }
  size_t others = 0;
  for (auto it = b.begin(); it != b.end(); ++it) others += !bookkeeping(it.key());
  return compared == others;
}

}  // namespace

bool ContentChanged(const nlohmann::json& old_object, const nlohmann::json& new_object) {
  if (!old_object.is_object() || !new_object.is_object()) return old_object != new_object;
  if (old_object.size() != new_object.size()) return true;
  for (auto it = old_object.begin(); it != old_object.end(); ++it) {
    auto other = new_object.find(it.key());
    if (other == new_object.end()) return true;
    if (it.key() == "metadata" ? !SameMetadata(*it, *other) : *it != *other) return true;
  }
  return false;
}

KeyMapper OwnKey() {
  return [](const nlohmann::json& object) {
    std::string key;
    if (!ObjectKey(object, &key).ok()) return std::vector<std::string>();
    return std::vector<std::string>{key};
  };
}

KeyMapper OwnerKey(OwnerMatch match) {
  return [match = std::move(match)](const nlohmann::json& object) {
    if (!object.is_object()) return std::vector<std::string>();
    std::string owner = ControllerOwnerName(object, match);
    if (owner.empty() && !match.label.empty()) owner = ObjectLabel(object, match.label);
    if (owner.empty()) return std::vector<std::string>();
    return std::vector<std::string>{MakeKey(ObjectNamespace(object), owner)};
  };
}

EventHandlers EnqueueHandlers(WorkQueue* queue, KeyMapper mapper, UpdateFilter filter) {
  auto enqueue = [queue, mapper](const nlohmann::json& object) {
    for (const std::string& key : mapper(object)) queue->Add(key);
  };
  EventHandlers handlers;
  handlers.on_add = enqueue;
  handlers.on_update = [queue, mapper, filter](const nlohmann::json& old_object,
                                               const nlohmann::json& new_object) {
    if (filter && !filter(old_object, new_object)) return;
    std::set<std::string> keys;
    for (std::string& key : mapper(old_object)) keys.insert(std::move(key));
    for (std::string& key : mapper(new_object)) keys.insert(std::move(key));
    for (const std::string& key : keys) queue->Add(key);
  };
  handlers.on_delete = [enqueue](const nlohmann::json& object, bool) { enqueue(object); };
  return handlers;
}

}  // namespace controller
}  // namespace gaptrain
