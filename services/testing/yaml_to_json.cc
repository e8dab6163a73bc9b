#include "services/testing/yaml_to_json.h"

#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <regex>
#include <set>
#include <vector>

namespace gaptrain {
namespace kube_testing {

using nlohmann::json;

namespace {

// go-yaml v2's resolve table for plain scalars.
json ResolvePlainScalar(const std::string& s) {
  static const std::set<std::string> kNull = {"", "~", "null", "Null", "NULL"};
  static const std::set<std::string> kTrue = {"y", "Y", "yes", "Yes", "YES", "true", "True",
                                              "TRUE", "on", "On", "ON"};
  static const std::set<std::string> kFalse = {"n", "N", "no", "No", "NO", "false", "False",
                                               "FALSE", "off", "Off", "OFF"};
  if (kNull.count(s)) return nullptr;
  if (kTrue.count(s)) return true;
  if (kFalse.count(s)) return false;
  static const std::regex kInt("[-+]?(0|[1-9][0-9_]*)");
  static const std::regex kHex("[-+]?0x[0-9a-fA-F_]+");
  static const std::regex kFloat(
      "[-+]?(\\.[0-9]+|[0-9][0-9_]*(\\.[0-9_]*)?)([eE][-+]?[0-9]+)?");
  if (std::regex_match(s, kInt) || std::regex_match(s, kHex)) {
    std::string digits;
    for (char c : s) {
      if (c != '_') digits += c;
    }
    errno = 0;
    char* end = nullptr;
    const long long v = std::strtoll(digits.c_str(), &end, 0);
    if (errno == 0 && end != nullptr && *end == '\0') return static_cast<int64_t>(v);
  }
  if (std::regex_match(s, kFloat)) {
    std::string digits;
    for (char c : s) {
      if (c != '_') digits += c;
    }
    return std::strtod(digits.c_str(), nullptr);
  }
  if (s == ".inf" || s == ".Inf" || s == ".INF" || s == "+.inf" || s == "+.Inf" ||
      s == "+.INF") {
    return HUGE_VAL;
  }
  if (s == "-.inf" || s == "-.Inf" || s == "-.INF") return -HUGE_VAL;
  return s;
}

Status Convert(const YAML::Node& node, const std::string& path, json* out) {
  const std::string where =
      "line " + std::to_string(node.Mark().line + 1) + (path.empty() ? "" : " (" + path + ")");
  switch (node.Type()) {
    case YAML::NodeType::Undefined:
    case YAML::NodeType::Null:
      *out = nullptr;
      return Status::OK();
    case YAML::NodeType::Scalar:
      // "!" marks a quoted scalar (or an explicit !!str): always a string.
      if (node.Tag() == "?") {
        *out = ResolvePlainScalar(node.Scalar());
      } else {
        *out = node.Scalar();
      }
      return Status::OK();
    case YAML::NodeType::Sequence: {
      *out = json::array();
      for (size_t i = 0; i < node.size(); ++i) {
        json item;
        GAPTRAIN_RETURN_IF_ERROR(Convert(node[i], path + "[" + std::to_string(i) + "]", &item));
        out->push_back(std::move(item));
      }
      return Status::OK();
    }
    case YAML::NodeType::Map: {
      *out = json::object();
      for (const auto& kv : node) {
        if (!kv.first.IsScalar()) {
          return Status::InvalidArgument("YAML " + where + ": a mapping key must be a scalar");
        }
        const std::string key = kv.first.Scalar();
        if (out->contains(key)) {
          return Status::InvalidArgument("YAML " + where + ": duplicate key \"" + key + "\"");
        }
        json value;
        GAPTRAIN_RETURN_IF_ERROR(
            Convert(kv.second, path.empty() ? key : path + "." + key, &value));
        (*out)[key] = std::move(value);
      }
      return Status::OK();
    }
  }
  return Status::InvalidArgument("YAML " + where + ": unsupported node");
}

}  // namespace

Status YamlToJson(const std::string& yaml_text, json* out) {
  std::vector<YAML::Node> documents;
  try {
    documents = YAML::LoadAll(yaml_text);
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument(std::string("malformed YAML: ") + e.what());
  }
  if (documents.size() > 1) {
    return Status::InvalidArgument("YAML holds " + std::to_string(documents.size()) +
                                   " documents; exactly one is expected");
  }
  if (documents.empty()) {
    *out = nullptr;
    return Status::OK();
  }
  try {
    return Convert(documents[0], "", out);
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument(std::string("malformed YAML: ") + e.what());
  }
}

}  // namespace kube_testing
}  // namespace gaptrain
