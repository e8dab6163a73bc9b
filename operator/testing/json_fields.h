// Reading fields of JSON documents whose shape nobody has checked yet
// (request bodies, objects a test wrote through a hook): a field that is
// missing, or of another type, reads as the fallback. Nothing throws, unlike
// nlohmann::json's value() and const operator[].

#ifndef GAPTRAIN_OPERATOR_TESTING_JSON_FIELDS_H_
#define GAPTRAIN_OPERATOR_TESTING_JSON_FIELDS_H_

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace gaptrain {
namespace kube_testing {

// The value at `path` (object keys from `object`), or null when absent.
const nlohmann::json* FindField(const nlohmann::json& object, const std::vector<std::string>& path);

std::string StringField(const nlohmann::json& object, const std::vector<std::string>& path);
int64_t IntField(const nlohmann::json& object, const std::vector<std::string>& path,
                 int64_t fallback = 0);
bool BoolField(const nlohmann::json& object, const std::vector<std::string>& path,
               bool fallback = false);
// The list at `path`, or an empty list.
nlohmann::json ListField(const nlohmann::json& object, const std::vector<std::string>& path);

}  // namespace kube_testing
}  // namespace gaptrain

#endif  // GAPTRAIN_OPERATOR_TESTING_JSON_FIELDS_H_
