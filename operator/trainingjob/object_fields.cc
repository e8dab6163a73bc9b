#include "operator/trainingjob/object_fields.h"

#include <cmath>

namespace gaptrain {
namespace trainingjob {

const nlohmann::json* FieldAt(const nlohmann::json& object, FieldPath path) {
  const nlohmann::json* at = &object;
  for (std::string_view key : path) {
    if (!at->is_object()) return nullptr;
    const auto it = at->find(key);
    if (it == at->end()) return nullptr;
    at = &*it;
  }
  return at;
}

std::string StringAt(const nlohmann::json& object, FieldPath path, const std::string& fallback) {
  const nlohmann::json* v = FieldAt(object, path);
  return v != nullptr && v->is_string() ? v->get<std::string>() : fallback;
}

std::optional<int64_t> IntegerAt(const nlohmann::json& object, FieldPath path) {
  const nlohmann::json* v = FieldAt(object, path);
  if (v == nullptr) return std::nullopt;
  if (v->is_number_integer()) {
    if (v->is_number_unsigned() && v->get<uint64_t>() > uint64_t{INT64_MAX}) return std::nullopt;
    return v->get<int64_t>();
  }
  if (v->is_number_float()) {
    const double d = v->get<double>();
    // Integral doubles below 2^63 (the API server writes 1.0 as 1, but a
    // JSON reader may hand either).
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.2e18) {
      return static_cast<int64_t>(d);
    }
  }
  return std::nullopt;
}

std::optional<double> NumberAt(const nlohmann::json& object, FieldPath path) {
  const nlohmann::json* v = FieldAt(object, path);
  if (v == nullptr || !v->is_number()) return std::nullopt;
  return v->get<double>();
}

bool BoolAt(const nlohmann::json& object, FieldPath path, bool fallback) {
  const nlohmann::json* v = FieldAt(object, path);
  return v != nullptr && v->is_boolean() ? v->get<bool>() : fallback;
}

const nlohmann::json& ObjectAt(const nlohmann::json& object, FieldPath path) {
  static const nlohmann::json* const kEmpty = new nlohmann::json(nlohmann::json::object());
  const nlohmann::json* v = FieldAt(object, path);
  return v != nullptr && v->is_object() ? *v : *kEmpty;
}

const nlohmann::json& ArrayAt(const nlohmann::json& object, FieldPath path) {
  static const nlohmann::json* const kEmpty = new nlohmann::json(nlohmann::json::array());
  const nlohmann::json* v = FieldAt(object, path);
  return v != nullptr && v->is_array() ? *v : *kEmpty;
}

bool IsControlledBy(const nlohmann::json& object, const std::string& owner_uid) {
  for (const nlohmann::json& ref : ArrayAt(object, {"metadata", "ownerReferences"})) {
    if (BoolAt(ref, {"controller"}) && StringAt(ref, {"uid"}) == owner_uid) return true;
  }
  return false;
}

}  // namespace trainingjob
}  // namespace gaptrain
