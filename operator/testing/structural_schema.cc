#include "operator/testing/structural_schema.h"

#include <cmath>
#include <regex>
#include <utility>

namespace gaptrain {
namespace kube_testing {

using nlohmann::json;

struct SchemaNode {
  std::string type;  // "" when the schema leaves it open
  std::string format;
  std::map<std::string, std::shared_ptr<SchemaNode>> properties;
  std::shared_ptr<SchemaNode> items;
  std::shared_ptr<SchemaNode> additional_properties;  // a schema for every value
  bool additional_properties_allowed = false;   // additionalProperties: true
  std::vector<std::string> required;
  std::optional<json> default_value;
  std::vector<json> enum_values;
  std::optional<double> minimum;
  std::optional<double> maximum;
  bool exclusive_minimum = false;
  bool exclusive_maximum = false;
  std::optional<int64_t> min_length, max_length, min_items, max_items;
  std::optional<std::regex> pattern;
  std::string pattern_text;
  bool nullable = false;
  bool preserve_unknown_fields = false;
  bool int_or_string = false;
  std::string list_type;
  std::vector<std::string> list_map_keys;
  std::string map_type;

  const SchemaNode* Child(const std::string& name) const {
    auto it = properties.find(name);
    if (it != properties.end()) return it->second.get();
    return additional_properties.get();
  }
};

namespace {

using Node = SchemaNode;

std::string Join(const std::string& path, const std::string& key) {
  return path.empty() ? key : path + "." + key;
}

// A bound as Go's %v prints a float64: "1", "0.5".
std::string NumberText(double v) {
  if (std::floor(v) == v && std::fabs(v) < 1e15) {
    return std::to_string(static_cast<long long>(v));
  }
  return json(v).dump();
}

std::string JsonTypeName(const json& v) {
  if (v.is_null()) return "null";
  if (v.is_boolean()) return "boolean";
  if (v.is_number_integer() || v.is_number_unsigned()) return "integer";
  if (v.is_number()) return "number";
  if (v.is_string()) return "string";
  if (v.is_array()) return "array";
  return "object";
}

bool IsIntegral(const json& v) {
  if (v.is_number_integer() || v.is_number_unsigned()) return true;
  if (!v.is_number_float()) return false;
  const double d = v.get<double>();
  return std::isfinite(d) && std::floor(d) == d;
}

bool HasType(const json& v, const std::string& type) {
  if (type == "object") return v.is_object();
  if (type == "array") return v.is_array();
  if (type == "string") return v.is_string();
  if (type == "boolean") return v.is_boolean();
  if (type == "number") return v.is_number();
  if (type == "integer") return IsIntegral(v);
  return true;
}

bool MatchesFormat(const std::string& format, const std::string& s) {
  static const std::regex kDateTime(
      "[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt ][0-9]{2}:[0-9]{2}:[0-9]{2}(\\.[0-9]+)?"
      "([Zz]|[+-][0-9]{2}:[0-9]{2})");
  static const std::regex kDate("[0-9]{4}-[0-9]{2}-[0-9]{2}");
  if (format == "date-time") return std::regex_match(s, kDateTime);
  if (format == "date") return std::regex_match(s, kDate);
  return true;
}

Status Malformed(const std::string& path, const std::string& why) {
  return Status::InvalidArgument("openAPIV3Schema" + (path.empty() ? "" : "." + path) + ": " +
                                 why);
}

Status ParseNode(const json& j, const std::string& path, std::shared_ptr<Node>* out) {
  if (!j.is_object()) return Malformed(path, "must be an object");
  auto node = std::make_shared<Node>();
  auto read_string = [&](const char* key, std::string* target) -> Status {
    if (!j.contains(key)) return Status::OK();
    if (!j[key].is_string()) return Malformed(Join(path, key), "must be a string");
    *target = j[key].get<std::string>();
    return Status::OK();
  };
  auto read_bool = [&](const char* key, bool* target) -> Status {
    if (!j.contains(key)) return Status::OK();
    if (!j[key].is_boolean()) return Malformed(Join(path, key), "must be a boolean");
    *target = j[key].get<bool>();
    return Status::OK();
  };
  auto read_number = [&](const char* key, std::optional<double>* target) -> Status {
    if (!j.contains(key)) return Status::OK();
    if (!j[key].is_number()) return Malformed(Join(path, key), "must be a number");
    *target = j[key].get<double>();
    return Status::OK();
  };
  auto read_count = [&](const char* key, std::optional<int64_t>* target) -> Status {
    if (!j.contains(key)) return Status::OK();
    if (!IsIntegral(j[key]) || j[key].get<double>() < 0) {
      return Malformed(Join(path, key), "must be a non-negative integer");
    }
    *target = j[key].get<int64_t>();
    return Status::OK();
  };
  GAPTRAIN_RETURN_IF_ERROR(read_string("type", &node->type));
  GAPTRAIN_RETURN_IF_ERROR(read_string("format", &node->format));
  GAPTRAIN_RETURN_IF_ERROR(read_bool("nullable", &node->nullable));
  GAPTRAIN_RETURN_IF_ERROR(
      read_bool("x-kubernetes-preserve-unknown-fields", &node->preserve_unknown_fields));
  GAPTRAIN_RETURN_IF_ERROR(read_bool("x-kubernetes-int-or-string", &node->int_or_string));
  GAPTRAIN_RETURN_IF_ERROR(read_bool("exclusiveMinimum", &node->exclusive_minimum));
  GAPTRAIN_RETURN_IF_ERROR(read_bool("exclusiveMaximum", &node->exclusive_maximum));
  GAPTRAIN_RETURN_IF_ERROR(read_number("minimum", &node->minimum));
  GAPTRAIN_RETURN_IF_ERROR(read_number("maximum", &node->maximum));
  GAPTRAIN_RETURN_IF_ERROR(read_count("minLength", &node->min_length));
  GAPTRAIN_RETURN_IF_ERROR(read_count("maxLength", &node->max_length));
  GAPTRAIN_RETURN_IF_ERROR(read_count("minItems", &node->min_items));
  GAPTRAIN_RETURN_IF_ERROR(read_count("maxItems", &node->max_items));
  GAPTRAIN_RETURN_IF_ERROR(read_string("x-kubernetes-list-type", &node->list_type));
  GAPTRAIN_RETURN_IF_ERROR(read_string("x-kubernetes-map-type", &node->map_type));
  if (j.contains("pattern")) {
    GAPTRAIN_RETURN_IF_ERROR(read_string("pattern", &node->pattern_text));
    try {
      node->pattern.emplace(node->pattern_text, std::regex::ECMAScript);
    } catch (const std::regex_error& e) {
      return Malformed(Join(path, "pattern"), std::string("is not a valid regex: ") + e.what());
    }
  }
  if (j.contains("default")) node->default_value = j["default"];
  if (j.contains("enum")) {
    if (!j["enum"].is_array()) return Malformed(Join(path, "enum"), "must be a list");
    for (const json& v : j["enum"]) node->enum_values.push_back(v);
  }
  if (j.contains("required")) {
    if (!j["required"].is_array()) return Malformed(Join(path, "required"), "must be a list");
    for (const json& v : j["required"]) {
      if (!v.is_string()) return Malformed(Join(path, "required"), "must hold strings");
      node->required.push_back(v.get<std::string>());
    }
  }
  if (j.contains("x-kubernetes-list-map-keys")) {
    const json& keys = j["x-kubernetes-list-map-keys"];
    if (!keys.is_array()) return Malformed(Join(path, "x-kubernetes-list-map-keys"), "must be a list");
    for (const json& v : keys) {
      if (!v.is_string()) {
        return Malformed(Join(path, "x-kubernetes-list-map-keys"), "must hold strings");
      }
      node->list_map_keys.push_back(v.get<std::string>());
    }
  }
  if (j.contains("properties")) {
    if (!j["properties"].is_object()) return Malformed(Join(path, "properties"), "must be an object");
    for (auto it = j["properties"].begin(); it != j["properties"].end(); ++it) {
      std::shared_ptr<Node> child;
      GAPTRAIN_RETURN_IF_ERROR(ParseNode(it.value(), Join(path, "properties." + it.key()), &child));
      node->properties[it.key()] = std::move(child);
    }
  }
  if (j.contains("items")) {
    GAPTRAIN_RETURN_IF_ERROR(ParseNode(j["items"], Join(path, "items"), &node->items));
  }
  if (j.contains("additionalProperties")) {
    const json& ap = j["additionalProperties"];
    if (ap.is_boolean()) {
      node->additional_properties_allowed = ap.get<bool>();
    } else {
      GAPTRAIN_RETURN_IF_ERROR(
          ParseNode(ap, Join(path, "additionalProperties"), &node->additional_properties));
    }
  }
  *out = std::move(node);
  return Status::OK();
}

}  // namespace

Status StructuralSchema::Parse(const json& open_api_v3_schema,
                               std::unique_ptr<StructuralSchema>* out) {
  std::shared_ptr<Node> root;
  GAPTRAIN_RETURN_IF_ERROR(ParseNode(open_api_v3_schema, "", &root));
  out->reset(new StructuralSchema(std::move(root)));
  return Status::OK();
}

// Pruning, defaulting and validation walk the value and the schema together.
namespace {

struct Walker {
  using N = SchemaNode;
  static void Prune(const N* node, json* value, const std::string& path,
                    std::vector<std::string>* unknown) {
    if (node == nullptr) return;
    if (value->is_object()) {
      for (auto it = value->begin(); it != value->end();) {
        const std::string child_path = Join(path, it.key());
        auto prop = node->properties.find(it.key());
        const N* child = nullptr;
        if (prop != node->properties.end()) {
          child = prop->second.get();
        } else if (node->additional_properties) {
          child = node->additional_properties.get();
        } else if (!node->preserve_unknown_fields && !node->additional_properties_allowed) {
          unknown->push_back(child_path);
          it = value->erase(it);
          continue;
        }
        if (child != nullptr && it.value().is_null() && !child->nullable) {
          it = value->erase(it);
          continue;
        }
        Prune(child, &it.value(), child_path, unknown);
        ++it;
      }
    } else if (value->is_array() && node->items) {
      for (size_t i = 0; i < value->size(); ++i) {
        Prune(node->items.get(), &(*value)[i], path + "[" + std::to_string(i) + "]", unknown);
      }
    }
  }

  static void Default(const N* node, json* value) {
    if (node == nullptr) return;
    if (value->is_object()) {
      for (const auto& [name, child] : node->properties) {
        if (!value->contains(name) && child->default_value) (*value)[name] = *child->default_value;
      }
      for (auto it = value->begin(); it != value->end(); ++it) {
        Default(node->Child(it.key()), &it.value());
      }
    } else if (value->is_array() && node->items) {
      for (json& item : *value) Default(node->items.get(), &item);
    }
  }

  static void Validate(const N* node, const json& value, const std::string& path,
                       std::vector<StatusCause>* causes) {
    if (node == nullptr) return;
    if (value.is_null()) {
      if (!node->nullable && !node->type.empty()) {
        causes->push_back(InvalidField(path, "null", path + " in body must be of type " +
                                                         node->type + ": \"null\""));
      }
      return;
    }
    if (node->int_or_string) {
      if (!IsIntegral(value) && !value.is_string()) {
        const std::string actual = JsonTypeName(value);
        causes->push_back(InvalidField(path, actual, path + " in body must be of type "
                                                         "integer or string: \"" + actual + "\""));
        return;
      }
    } else if (!node->type.empty() && !HasType(value, node->type)) {
      const std::string actual = JsonTypeName(value);
      causes->push_back(InvalidField(
          path, actual, path + " in body must be of type " + node->type + ": \"" + actual + "\""));
      return;
    }
    if (!node->enum_values.empty()) {
      bool found = false;
      for (const json& allowed : node->enum_values) found = found || allowed == value;
      if (!found) {
        std::vector<std::string> supported;
        for (const json& allowed : node->enum_values) {
          supported.push_back(allowed.is_string() ? allowed.get<std::string>() : allowed.dump());
        }
        causes->push_back(UnsupportedField(path, value, supported));
      }
    }
    if (value.is_number()) {
      const double v = value.get<double>();
      if (node->minimum) {
        const double m = *node->minimum;
        if (node->exclusive_minimum ? !(v > m) : !(v >= m)) {
          causes->push_back(InvalidField(
              path, value, path + " in body should be greater than " +
                               (node->exclusive_minimum ? "" : "or equal to ") + NumberText(m)));
        }
      }
      if (node->maximum) {
        const double m = *node->maximum;
        if (node->exclusive_maximum ? !(v < m) : !(v <= m)) {
          causes->push_back(InvalidField(
              path, value, path + " in body should be less than " +
                               (node->exclusive_maximum ? "" : "or equal to ") + NumberText(m)));
        }
      }
    }
    if (value.is_string()) {
      const std::string s = value.get<std::string>();
      if (node->min_length && static_cast<int64_t>(s.size()) < *node->min_length) {
        causes->push_back(InvalidField(path, value,
                                       path + " in body should be at least " +
                                           std::to_string(*node->min_length) + " chars long"));
      }
      if (node->max_length && static_cast<int64_t>(s.size()) > *node->max_length) {
        causes->push_back(InvalidField(path, value,
                                       path + " in body should be at most " +
                                           std::to_string(*node->max_length) + " chars long"));
      }
      if (node->pattern && !std::regex_search(s, *node->pattern)) {
        causes->push_back(InvalidField(
            path, value, path + " in body should match '" + node->pattern_text + "'"));
      }
      if (!node->format.empty() && !MatchesFormat(node->format, s)) {
        causes->push_back(InvalidField(path, value, path + " in body must be of type " +
                                                        node->format + ": " + value.dump()));
      }
    }
    if (value.is_array()) {
      const int64_t n = static_cast<int64_t>(value.size());
      if (node->min_items && n < *node->min_items) {
        causes->push_back(InvalidField(path, n, path + " in body should have at least " +
                                                    std::to_string(*node->min_items) + " items"));
      }
      if (node->max_items && n > *node->max_items) {
        causes->push_back(InvalidField(path, n, path + " in body should have at most " +
                                                    std::to_string(*node->max_items) + " items"));
      }
      if (node->items) {
        for (size_t i = 0; i < value.size(); ++i) {
          Validate(node->items.get(), value[i], path + "[" + std::to_string(i) + "]", causes);
        }
      }
    }
    if (value.is_object()) {
      for (const std::string& name : node->required) {
        if (!value.contains(name)) causes->push_back(RequiredField(Join(path, name)));
      }
      for (auto it = value.begin(); it != value.end(); ++it) {
        Validate(node->Child(it.key()), it.value(), Join(path, it.key()), causes);
      }
    }
  }
};

bool IsRootMetaField(const std::string& key) {
  return key == "apiVersion" || key == "kind" || key == "metadata";
}

}  // namespace

void StructuralSchema::Prune(json* object, std::vector<std::string>* unknown_fields) const {
  if (!object->is_object()) return;
  json meta = json::object();
  for (const char* key : {"apiVersion", "kind", "metadata"}) {
    if (object->contains(key)) {
      meta[key] = std::move((*object)[key]);
      object->erase(key);
    }
  }
  Walker::Prune(root_.get(), object, "", unknown_fields);
  for (auto it = meta.begin(); it != meta.end(); ++it) (*object)[it.key()] = std::move(it.value());
}

void StructuralSchema::ApplyDefaults(json* object) const {
  if (!object->is_object()) return;
  for (const auto& [name, child] : root_->properties) {
    if (!IsRootMetaField(name) && !object->contains(name) && child->default_value) {
      (*object)[name] = *child->default_value;
    }
  }
  for (auto it = object->begin(); it != object->end(); ++it) {
    if (!IsRootMetaField(it.key())) Walker::Default(root_->Child(it.key()), &it.value());
  }
}

void StructuralSchema::Validate(const json& object, std::vector<StatusCause>* causes) const {
  if (!object.is_object()) return;
  for (const std::string& name : root_->required) {
    if (!IsRootMetaField(name) && !object.contains(name)) causes->push_back(RequiredField(name));
  }
  for (auto it = object.begin(); it != object.end(); ++it) {
    if (!IsRootMetaField(it.key())) {
      Walker::Validate(root_->Child(it.key()), it.value(), it.key(), causes);
    }
  }
}

StructuralSchema::Shape StructuralSchema::ShapeAt(const std::vector<std::string>& path) const {
  const SchemaNode* node = root_.get();
  for (const std::string& name : path) {
    if (node == nullptr) break;
    // Path elements name properties; list items are implied by the schema.
    if (node->type == "array" && node->items) node = node->items.get();
    if (node != nullptr) node = node->Child(name);
  }
  Shape shape;
  if (node == nullptr) return shape;
  shape.atomic = node->map_type == "atomic" || node->list_type == "atomic";
  if (node->list_type == "map") shape.list_keys = node->list_map_keys;
  shape.set = node->list_type == "set";
  return shape;
}

}  // namespace kube_testing
}  // namespace gaptrain
