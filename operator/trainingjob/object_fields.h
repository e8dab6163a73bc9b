// Reading fields of Kubernetes objects held as nlohmann::json, without
// exceptions: objects come from the API server, the user's pod templates
// and the coordinator, and a field of an unexpected type must read as
// absent, never throw.
//
// A path is a list of keys from the object's root: {"metadata", "name"}.
// Each accessor returns its fallback when a key on the path is missing,
// an intermediate value is not an object, or the value has another type.

#ifndef GAPTRAIN_OPERATOR_TRAININGJOB_OBJECT_FIELDS_H_
#define GAPTRAIN_OPERATOR_TRAININGJOB_OBJECT_FIELDS_H_

#include <cstdint>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace gaptrain {
namespace trainingjob {

using FieldPath = std::initializer_list<std::string_view>;

// The value at `path`, or null when there is none.
const nlohmann::json* FieldAt(const nlohmann::json& object, FieldPath path);

std::string StringAt(const nlohmann::json& object, FieldPath path,
                     const std::string& fallback = "");
// An integer (a JSON number with no fractional part, within int64).
std::optional<int64_t> IntegerAt(const nlohmann::json& object, FieldPath path);
std::optional<double> NumberAt(const nlohmann::json& object, FieldPath path);
bool BoolAt(const nlohmann::json& object, FieldPath path, bool fallback = false);
// The object or array at `path`, or an empty one.
const nlohmann::json& ObjectAt(const nlohmann::json& object, FieldPath path);
const nlohmann::json& ArrayAt(const nlohmann::json& object, FieldPath path);

// Common metadata.
inline std::string NameOf(const nlohmann::json& o) { return StringAt(o, {"metadata", "name"}); }
inline std::string UidOf(const nlohmann::json& o) { return StringAt(o, {"metadata", "uid"}); }
inline std::string NamespaceOf(const nlohmann::json& o) {
  return StringAt(o, {"metadata", "namespace"});
}
inline bool IsTerminating(const nlohmann::json& o) {
  return !StringAt(o, {"metadata", "deletionTimestamp"}).empty();
}

// Whether `object` has an ownerReference with controller: true to `owner_uid`.
bool IsControlledBy(const nlohmann::json& object, const std::string& owner_uid);

}  // namespace trainingjob
}  // namespace gaptrain

#endif  // GAPTRAIN_OPERATOR_TRAININGJOB_OBJECT_FIELDS_H_
