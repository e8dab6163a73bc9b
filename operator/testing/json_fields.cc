#include "operator/testing/json_fields.h"

namespace gaptrain {
namespace kube_testing {

using nlohmann::json;

const json* FindField(const json& object, const std::vector<std::string>& path) {
  const json* current = &object;
  for (const std::string& key : path) {
    if (!current->is_object()) return nullptr;
    auto it = current->find(key);
    if (it == current->end()) return nullptr;
    current = &*it;
  }
  return current;
}

std::string StringField(const json& object, const std::vector<std::string>& path) {
  const json* v = FindField(object, path);
  return v != nullptr && v->is_string() ? v->get<std::string>() : std::string();
}

int64_t IntField(const json& object, const std::vector<std::string>& path, int64_t fallback) {
  const json* v = FindField(object, path);
  return v != nullptr && (v->is_number_integer() || v->is_number_unsigned()) ? v->get<int64_t>()
                                                                             : fallback;
}

bool BoolField(const json& object, const std::vector<std::string>& path, bool fallback) {
  const json* v = FindField(object, path);
  return v != nullptr && v->is_boolean() ? v->get<bool>() : fallback;
}

json ListField(const json& object, const std::vector<std::string>& path) {
  const json* v = FindField(object, path);
  return v != nullptr && v->is_array() ? *v : json::array();
}

}  // namespace kube_testing
}  // namespace gaptrain
