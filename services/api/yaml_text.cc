#include "services/api/yaml_text.h"

#include <cctype>
#include <set>

#include "services/api/job_fields.h"

namespace gaptrain {
namespace {

using Json = nlohmann::ordered_json;

// Words that a YAML 1.1 reader resolves to a boolean, null or float.
bool IsReservedWord(const std::string& s) {
  static const std::set<std::string> kWords = {
      "y",     "Y",     "yes",  "Yes",  "YES",  "n",    "N",    "no",   "No",    "NO",
      "true",  "True",  "TRUE", "false", "False", "FALSE", "on", "On",  "ON",    "off",
      "Off",   "OFF",   "null", "Null", "NULL", ".inf", ".Inf", ".INF", ".nan",  ".NaN",
      ".NAN"};
  return kWords.count(s) > 0;
}

bool IsPlainSafe(const std::string& s) {
  if (s.empty() || IsReservedWord(s)) return false;
  const auto letter = [](char c) { return std::isalpha(static_cast<unsigned char>(c)) != 0; };
  // A leading '.' only before a letter: ".5" is a number.
  if (!letter(s[0]) && s[0] != '/' && !(s[0] == '.' && s.size() > 1 && letter(s[1]))) {
    return false;
  }
  for (unsigned char c : s) {
    if (!std::isalnum(c) && c != '-' && c != '_' && c != '.' && c != '/') return false;
  }
  return true;
}

std::string Scalar(const Json& value) {
  switch (value.type()) {
    case Json::value_t::string: {
      const std::string& s = value.get_ref<const std::string&>();
      return IsPlainSafe(s) ? s : value.dump();  // dump(): JSON's escapes, valid YAML
    }
    case Json::value_t::number_float:
      return FormatNumber(value.get<double>());
    case Json::value_t::object:
      return "{}";
    case Json::value_t::array:
      return "[]";
    default:  // booleans, integers, null
      return value.dump();
  }
}

bool IsBlock(const Json& value) {
  return (value.is_object() || value.is_array()) && !value.empty();
}

void Write(const Json& value, int indent, std::string* out);

// `value` after "key:" or "- " on a line at `indent`.
void WriteAfterKey(const Json& value, int indent, std::string* out) {
  if (!IsBlock(value)) {
    *out += " " + Scalar(value) + "\n";
    return;
  }
  *out += "\n";
  // Sequences sit at their key's indentation, mappings two deeper.
  Write(value, value.is_array() ? indent : indent + 2, out);
}

void Write(const Json& value, int indent, std::string* out) {
  const std::string pad(indent, ' ');
  if (value.is_object()) {
    for (const auto& item : value.items()) {
      *out += pad + Scalar(Json(item.key())) + ":";
      WriteAfterKey(item.value(), indent, out);
    }
    return;
  }
  for (const Json& item : value) {
    if (item.is_object() && !item.empty()) {
      // "- key: value" then the other keys under the first.
      bool first = true;
      for (const auto& field : item.items()) {
        *out += (first ? pad + "- " : pad + "  ") + Scalar(Json(field.key())) + ":";
        WriteAfterKey(field.value(), indent + 2, out);
        first = false;
      }
    } else if (item.is_array() && !item.empty()) {
      *out += pad + "-\n";
      Write(item, indent + 2, out);
    } else {
      *out += pad + "- " + Scalar(item) + "\n";
    }
  }
}

}  // namespace

std::string YamlText(const nlohmann::ordered_json& value) {
  if (!IsBlock(value)) return Scalar(value) + "\n";
  std::string out;
  Write(value, 0, &out);
  return out;
}

}  // namespace gaptrain
