#include "operator/trainingjob/json_diff.h"

namespace gaptrain {
namespace trainingjob {
namespace {

using nlohmann::json;

bool IsZeroValue(const json& v) {
  switch (v.type()) {
    case json::value_t::null: return true;
    case json::value_t::boolean: return !v.get<bool>();
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
    case json::value_t::number_float: return v.get<double>() == 0;
    case json::value_t::string: return v.get_ref<const std::string&>().empty();
    case json::value_t::array:
    case json::value_t::object: return v.empty();
    default: return false;
  }
}

}  // namespace

bool IsSubset(const json& desired, const json& observed) {
  if (desired.is_object()) {
    if (!observed.is_object()) return false;
    for (const auto& [key, value] : desired.items()) {
      const auto it = observed.find(key);
      if (it == observed.end()) {
        if (!IsZeroValue(value)) return false;
      } else if (!IsSubset(value, *it)) {
        return false;
      }
    }
    return true;
  }
  if (desired.is_array()) {
    if (!observed.is_array()) return false;
    size_t at = 0;
    for (const json& item : desired) {
      while (at < observed.size() && !IsSubset(item, observed[at])) ++at;
      if (at == observed.size()) return false;
      ++at;
    }
    return true;
  }
  if (desired.is_number() && observed.is_number()) {
    return desired.get<double>() == observed.get<double>();
  }
  return desired == observed;
}

json MergePatch(const json& from, const json& to) {
  if (!from.is_object() || !to.is_object()) return to;
  json patch = json::object();
  for (const auto& [key, value] : from.items()) {
    if (!to.contains(key)) patch[key] = nullptr;
  }
  for (const auto& [key, value] : to.items()) {
    const auto it = from.find(key);
    if (it == from.end()) {
      patch[key] = value;
    } else if (*it != value) {
      patch[key] = value.is_object() && it->is_object() ? MergePatch(*it, value) : value;
    }
  }
  return patch;
}

}  // namespace trainingjob
}  // namespace gaptrain
