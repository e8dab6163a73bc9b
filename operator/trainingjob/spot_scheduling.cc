#include "operator/trainingjob/spot_scheduling.h"

#include <set>

namespace gaptrain {
namespace trainingjob {
namespace {

using nlohmann::json;

json Requirement(const std::string& key, const std::string& value) {
  return json{{"key", key}, {"operator", "In"}, {"values", json::array({value})}};
}

json NoScheduleToleration(const std::string& key, const std::string& value) {
  return json{{"key", key}, {"operator", "Equal"}, {"value", value}, {"effect", "NoSchedule"}};
}

bool IsStringList(const json& v) {
  if (!v.is_array()) return false;
  for (const json& item : v) {
    if (!item.is_string()) return false;
  }
  return true;
}

Status CheckToleration(const json& t, const std::string& at) {
  static const std::set<std::string> kKnown = {"key", "operator", "value", "effect",
                                               "tolerationSeconds"};
  if (!t.is_object()) return Status::InvalidArgument(at + ": must be an object");
  for (const auto& [key, value] : t.items()) {
    if (kKnown.count(key) == 0) {
      return Status::InvalidArgument(at + "." + key +
                                     ": unknown field (known: effect | key | operator | "
                                     "tolerationSeconds | value)");
    }
    if (key == "tolerationSeconds" ? !value.is_number_integer() : !value.is_string()) {
      return Status::InvalidArgument(at + "." + key + ": must be " +
                                     (key == "tolerationSeconds" ? "an integer" : "a string"));
    }
  }
  const std::string op = t.value("operator", "Equal");
  if (op != "Equal" && op != "Exists") {
    return Status::InvalidArgument(at + ".operator: must be Equal or Exists, got '" + op + "'");
  }
  if (op == "Exists" && t.contains("value")) {
    return Status::InvalidArgument(at + ".value: must be absent with operator Exists");
  }
  const std::string effect = t.value("effect", "");
  if (!effect.empty() && effect != "NoSchedule" && effect != "PreferNoSchedule" &&
      effect != "NoExecute") {
    return Status::InvalidArgument(at + ".effect: must be NoSchedule, PreferNoSchedule or "
                                   "NoExecute, got '" + effect + "'");
  }
  if (t.value("key", "").empty() && op != "Exists") {
    return Status::InvalidArgument(at + ".key: an empty key needs operator Exists");
  }
  return Status::OK();
}

Status CheckRequirement(const json& r, const std::string& at) {
  if (!r.is_object()) return Status::InvalidArgument(at + ": must be an object");
  for (const auto& [key, value] : r.items()) {
    if (key != "key" && key != "operator" && key != "values") {
      return Status::InvalidArgument(at + "." + key +
                                     ": unknown field (known: key | operator | values)");
    }
  }
  const json* key = r.contains("key") ? &r.at("key") : nullptr;
  if (key == nullptr || !key->is_string() || key->get<std::string>().empty()) {
    return Status::InvalidArgument(at + ".key: must be a non-empty string");
  }
  const json* op = r.contains("operator") ? &r.at("operator") : nullptr;
  if (op == nullptr || !op->is_string()) {
    return Status::InvalidArgument(at + ".operator: must be In, NotIn, Exists or DoesNotExist");
  }
  const std::string name = op->get<std::string>();
  const bool with_values = name == "In" || name == "NotIn";
  if (!with_values && name != "Exists" && name != "DoesNotExist") {
    return Status::InvalidArgument(at + ".operator: must be In, NotIn, Exists or DoesNotExist "
                                   "(spot nodes are matched by requirements that can be "
                                   "negated), got '" + name + "'");
  }
  const bool has_values = r.contains("values");
  if (with_values && (!has_values || !IsStringList(r.at("values")) || r.at("values").empty())) {
    return Status::InvalidArgument(at + ".values: must be a non-empty list of strings for " +
                                   name);
  }
  if (!with_values && has_values) {
    return Status::InvalidArgument(at + ".values: must be absent for " + name);
  }
  return Status::OK();
}

}  // namespace

Status SpotPreset(const std::string& name, SpotScheduling* out) {
  SpotScheduling s;
  s.name = name;
  if (name == "gke") {
    // GKE labels Spot VMs; the taint is optional, tolerating it is harmless.
    s.tolerations.push_back(NoScheduleToleration("cloud.google.com/gke-spot", "true"));
    s.spot_node_selector.push_back(Requirement("cloud.google.com/gke-spot", "true"));
  } else if (name == "eks") {
    s.spot_node_selector.push_back(Requirement("eks.amazonaws.com/capacityType", "SPOT"));
  } else if (name == "aks") {
    s.tolerations.push_back(NoScheduleToleration("kubernetes.azure.com/scalesetpriority", "spot"));
    s.spot_node_selector.push_back(Requirement("kubernetes.azure.com/scalesetpriority", "spot"));
  } else if (name != "none") {
    return Status::InvalidArgument("spot preset: must be gke, eks, aks or none, got '" + name +
                                   "'");
  }
  *out = std::move(s);
  return Status::OK();
}

Status ParseSpotScheduling(const std::string& value, const std::string& source,
                           SpotScheduling* out) {
  const size_t first = value.find_first_not_of(" \t\r\n");
  if (first == std::string::npos || value[first] != '{') {
    Status s = SpotPreset(value, out);
    if (!s.ok()) {
      return Status::InvalidArgument(source + ": must be gke, eks, aks, none or a JSON object "
                                     "{\"tolerations\": [...], \"spotNodeSelector\": [...]}, "
                                     "got '" + value + "'");
    }
    return s;
  }
  const json parsed = json::parse(value, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded() || !parsed.is_object()) {
    return Status::InvalidArgument(source + ": not a JSON object");
  }
  SpotScheduling s;
  s.name = "custom";
  for (const auto& [key, v] : parsed.items()) {
    if (key != "tolerations" && key != "spotNodeSelector") {
      return Status::InvalidArgument(source + ": " + key +
                                     ": unknown field (known: spotNodeSelector | tolerations)");
    }
    if (!v.is_array()) return Status::InvalidArgument(source + ": " + key + ": must be a list");
  }
  if (parsed.contains("tolerations")) s.tolerations = parsed.at("tolerations");
  if (parsed.contains("spotNodeSelector")) s.spot_node_selector = parsed.at("spotNodeSelector");
  for (size_t i = 0; i < s.tolerations.size(); ++i) {
    GAPTRAIN_RETURN_IF_ERROR(
        CheckToleration(s.tolerations[i], source + ": tolerations[" + std::to_string(i) + "]"));
  }
  for (size_t i = 0; i < s.spot_node_selector.size(); ++i) {
    GAPTRAIN_RETURN_IF_ERROR(CheckRequirement(
        s.spot_node_selector[i], source + ": spotNodeSelector[" + std::to_string(i) + "]"));
  }
  *out = std::move(s);
  return Status::OK();
}

json NegatedRequirement(const json& requirement) {
  json negated = requirement;
  const std::string op = requirement.value("operator", "");
  if (op == "In") negated["operator"] = "NotIn";
  if (op == "NotIn") negated["operator"] = "In";
  if (op == "Exists") negated["operator"] = "DoesNotExist";
  if (op == "DoesNotExist") negated["operator"] = "Exists";
  return negated;
}

}  // namespace trainingjob
}  // namespace gaptrain
