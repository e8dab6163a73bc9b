#include "operator/crd/schema_check.h"

#include <cstdlib>
#include <regex>
#include <set>

namespace gaptrain {
namespace {

const std::set<std::string> kKeywords = {
    "description", "type",  "format",    "enum",      "default",          "minimum",
    "maximum",     "exclusiveMinimum",   "exclusiveMaximum",              "minLength",
    "maxLength",   "pattern",            "required",  "properties",       "additionalProperties",
    "items",       "maxItems",           "x-kubernetes-preserve-unknown-fields",
    "x-kubernetes-list-type",             "x-kubernetes-list-map-keys",
    "x-kubernetes-validations"};

std::string Join(const std::string& path, const std::string& key) {
  return path.empty() ? key : path + "." + key;
}

bool Flag(const YAML::Node& schema, const char* key) {
  return schema[key] && schema[key].as<std::string>() == "true";
}

double Number(const YAML::Node& scalar) { return std::strtod(scalar.Scalar().c_str(), nullptr); }

bool TypeMatches(const std::string& want, const std::string& have) {
  return want == have || (want == "number" && have == "integer");
}

void CheckScalarRules(const YAML::Node& schema, const YAML::Node& value, const std::string& path,
                      const std::string& type, std::vector<std::string>* errors) {
  if (schema["enum"]) {
    bool found = false;
    for (const YAML::Node& choice : schema["enum"]) found |= choice.Scalar() == value.Scalar();
    if (!found) errors->push_back(path + ": unsupported value '" + value.Scalar() + "'");
  }
  if (type == "integer" || type == "number") {
    const double v = Number(value);
    if (schema["minimum"]) {
      const double lo = Number(schema["minimum"]);
      if (Flag(schema, "exclusiveMinimum") ? !(v > lo) : !(v >= lo)) {
        errors->push_back(path + ": should be greater than " +
                          (Flag(schema, "exclusiveMinimum") ? "" : "or equal to ") +
                          schema["minimum"].Scalar());
      }
    }
    if (schema["maximum"]) {
      const double hi = Number(schema["maximum"]);
      if (Flag(schema, "exclusiveMaximum") ? !(v < hi) : !(v <= hi)) {
        errors->push_back(path + ": should be less than " +
                          (Flag(schema, "exclusiveMaximum") ? "" : "or equal to ") +
                          schema["maximum"].Scalar());
      }
    }
  }
  if (type == "string") {
    const std::string& s = value.Scalar();
    if (schema["minLength"] && s.size() < schema["minLength"].as<size_t>()) {
      errors->push_back(path + ": should be at least " + schema["minLength"].Scalar() +
                        " chars long");
    }
    if (schema["maxLength"] && s.size() > schema["maxLength"].as<size_t>()) {
      errors->push_back(path + ": may not be longer than " + schema["maxLength"].Scalar());
    }
    if (schema["pattern"] && !std::regex_search(s, std::regex(schema["pattern"].Scalar()))) {
      errors->push_back(path + ": should match '" + schema["pattern"].Scalar() + "'");
    }
  }
}

void Check(const YAML::Node& schema, const YAML::Node& value, const std::string& path,
           std::vector<std::string>* errors) {
  for (const auto& keyword : schema) {
    if (kKeywords.count(keyword.first.Scalar()) == 0) {
      errors->push_back(path + ": the schema uses '" + keyword.first.Scalar() +
                        "', which this checker does not know");
    }
  }
  const std::string have = JsonTypeOf(value);
  if (have == "null") return;
  if (schema["type"] && !TypeMatches(schema["type"].Scalar(), have)) {
    errors->push_back(path + ": must be of type " + schema["type"].Scalar() + ", got " + have);
    return;
  }
  if (value.IsScalar()) return CheckScalarRules(schema, value, path, have, errors);

  if (value.IsSequence()) {
    if (schema["maxItems"] && value.size() > schema["maxItems"].as<size_t>()) {
      errors->push_back(path + ": must have at most " + schema["maxItems"].Scalar() + " items");
    }
    if (!schema["items"]) return;
    for (size_t i = 0; i < value.size(); ++i) {
      Check(schema["items"], value[i], path + "[" + std::to_string(i) + "]", errors);
    }
    return;
  }
  const YAML::Node properties = schema["properties"];
  const YAML::Node additional = schema["additionalProperties"];
  for (const auto& item : value) {
    const std::string key = item.first.Scalar();
    if (properties && properties[key]) {
      Check(properties[key], item.second, Join(path, key), errors);
    } else if (additional) {
      Check(additional, item.second, Join(path, key), errors);
    } else if (!Flag(schema, "x-kubernetes-preserve-unknown-fields") && path != "metadata") {
      errors->push_back(Join(path, key) + ": unknown field");
    }
  }
  if (schema["required"]) {
    for (const YAML::Node& key : schema["required"]) {
      const YAML::Node field = value[key.Scalar()];
      if (!field || field.IsNull()) {
        errors->push_back(Join(path, key.Scalar()) + ": Required value");
      }
    }
  }
}

void Structural(const YAML::Node& schema, const std::string& path, bool root,
                std::vector<std::string>* problems) {
  if (!schema["type"] && !Flag(schema, "x-kubernetes-preserve-unknown-fields")) {
    problems->push_back((path.empty() ? "<root>" : path) + ": no type");
  }
  if (schema["properties"]) {
    for (const auto& item : schema["properties"]) {
      const std::string key = item.first.Scalar();
      const std::string child = Join(path, "properties." + key);
      if (root && key == "metadata") {
        for (const auto& m : item.second) {
          if (m.first.Scalar() != "type" && m.first.Scalar() != "properties") {
            problems->push_back(child + ": may only restrict name and generateName, has '" +
                                m.first.Scalar() + "'");
          }
        }
        for (const auto& field : item.second["properties"]) {
          if (field.first.Scalar() != "name" && field.first.Scalar() != "generateName") {
            problems->push_back(child + ": may only restrict name and generateName, has '" +
                                field.first.Scalar() + "'");
          }
        }
      }
      Structural(item.second, child, false, problems);
    }
  }
  if (schema["additionalProperties"]) {
    Structural(schema["additionalProperties"], Join(path, "additionalProperties"), false, problems);
  }
  if (schema["items"]) Structural(schema["items"], Join(path, "items"), false, problems);
}

}  // namespace

std::string JsonTypeOf(const YAML::Node& value) {
  if (!value || value.IsNull()) return "null";
  if (value.IsSequence()) return "array";
  if (value.IsMap()) return "object";
  if (value.Tag() == "!") return "string";  // quoted
  static const std::regex kBoolean("true|True|TRUE|false|False|FALSE");
  static const std::regex kInteger("[-+]?[0-9]+");
  static const std::regex kNumber(
      "[-+]?(\\.[0-9]+|[0-9]+(\\.[0-9]*)?)([eE][-+]?[0-9]+)?"
      "|[-+]?\\.(inf|Inf|INF)|\\.(nan|NaN|NAN)");
  const std::string& s = value.Scalar();
  if (std::regex_match(s, kBoolean)) return "boolean";
  if (std::regex_match(s, kInteger)) return "integer";
  if (std::regex_match(s, kNumber)) return "number";
  return "string";
}

std::vector<std::string> CheckAgainstSchema(const YAML::Node& schema, const YAML::Node& value,
                                            const std::string& path) {
  std::vector<std::string> errors;
  Check(schema, value, path, &errors);
  return errors;
}

std::vector<std::string> StructuralProblems(const YAML::Node& schema) {
  std::vector<std::string> problems;
  Structural(schema, "", true, &problems);
  return problems;
}

}  // namespace gaptrain
