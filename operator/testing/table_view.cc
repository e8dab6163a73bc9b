#include "operator/testing/table_view.h"
#include "operator/testing/json_fields.h"

#include <time.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace gaptrain {
namespace kube_testing {

using nlohmann::json;
using nlohmann::ordered_json;

namespace {

const char kNameDescription[] =
    "Name must be unique within a namespace. Is required when creating resources, although "
    "some resources may allow a client to request the generation of an appropriate name "
    "automatically. Name is primarily intended for creation idempotence and configuration "
    "definition. Cannot be updated. More info: "
    "http://kubernetes.io/docs/user-guide/identifiers#names";

bool ParseTimestamp(const std::string& text, std::chrono::system_clock::time_point* out) {
  struct tm t = {};
  int consumed = 0;
  if (std::sscanf(text.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%n", &t.tm_year, &t.tm_mon, &t.tm_mday,
                  &t.tm_hour, &t.tm_min, &t.tm_sec, &consumed) != 6) {
    return false;
  }
  t.tm_year -= 1900;
  t.tm_mon -= 1;
  const time_t seconds = timegm(&t);
  if (seconds == static_cast<time_t>(-1)) return false;
  *out = std::chrono::system_clock::from_time_t(seconds);
  return true;
}

json Cell(const PrinterColumn& column, const json& object,
          std::chrono::system_clock::time_point now) {
  const std::vector<json> results = EvaluateJsonPath(object, column.json_path);
  if (results.empty() || results[0].is_null()) return nullptr;
  const json& value = results[0];
  if (column.type == "integer") {
    if (value.is_number()) return static_cast<int64_t>(value.get<double>());
    return nullptr;
  }
  if (column.type == "number") {
    if (value.is_number_integer() || value.is_number_unsigned()) return value;
    if (value.is_number()) return value.get<double>();
    return nullptr;
  }
  if (column.type == "boolean") return value.is_boolean() ? value : json();
  if (column.type == "string") return value.is_string() ? value.get<std::string>() : value.dump();
  if (column.type == "date") {
    if (!value.is_string()) return nullptr;
    std::chrono::system_clock::time_point when;
    if (!ParseTimestamp(value.get<std::string>(), &when)) return "<invalid>";
    return HumanDuration(std::chrono::duration_cast<std::chrono::seconds>(now - when));
  }
  return nullptr;
}

ordered_json ColumnDefinition(const std::string& name, const std::string& type,
                              const std::string& format, const std::string& description,
                              int priority) {
  ordered_json c;
  c["name"] = name;
  c["type"] = type;
  c["format"] = format;
  c["description"] = description;
  c["priority"] = priority;
  return c;
}

}  // namespace

std::vector<json> EvaluateJsonPath(const json& object, const std::string& path) {
  std::vector<json> current = {object};
  size_t i = 0;
  while (i < path.size()) {
    std::vector<json> next;
    if (path[i] == '.') {
      size_t end = path.find_first_of(".[", i + 1);
      if (end == std::string::npos) end = path.size();
      const std::string field = path.substr(i + 1, end - i - 1);
      for (const json& v : current) {
        if (v.is_object() && v.contains(field)) next.push_back(v[field]);
      }
      i = end;
    } else if (path[i] == '[') {
      const size_t end = path.find(']', i);
      if (end == std::string::npos) return {};
      const std::string inside = path.substr(i + 1, end - i - 1);
      const size_t colon = inside.find(':');
      for (const json& v : current) {
        if (!v.is_array()) continue;
        const long n = static_cast<long>(v.size());
        auto index = [n](const std::string& s, long fallback) {
          if (s.empty()) return fallback;
          long k = std::strtol(s.c_str(), nullptr, 10);
          if (k < 0) k += n;
          return std::max(0L, std::min(k, n));
        };
        if (colon == std::string::npos) {
          long k = std::strtol(inside.c_str(), nullptr, 10);
          if (k < 0) k += n;
          if (k >= 0 && k < n) next.push_back(v[static_cast<size_t>(k)]);
        } else {
          const long from = index(inside.substr(0, colon), 0);
          const long to = index(inside.substr(colon + 1), n);
          for (long k = from; k < to; ++k) next.push_back(v[static_cast<size_t>(k)]);
        }
      }
      i = end + 1;
    } else {
      return {};
    }
    current = std::move(next);
  }
  return current;
}

std::string HumanDuration(std::chrono::seconds age) {
  const long long seconds = age.count();
  if (seconds < -1) return "<invalid>";
  if (seconds < 0) return "0s";
  if (seconds < 60 * 2) return std::to_string(seconds) + "s";
  const long long minutes = seconds / 60;
  if (minutes < 10) {
    const long long s = seconds % 60;
    return s == 0 ? std::to_string(minutes) + "m"
                  : std::to_string(minutes) + "m" + std::to_string(s) + "s";
  }
  if (minutes < 60 * 3) return std::to_string(minutes) + "m";
  const long long hours = seconds / 3600;
  if (hours < 8) {
    const long long m = minutes % 60;
    return m == 0 ? std::to_string(hours) + "h"
                  : std::to_string(hours) + "h" + std::to_string(m) + "m";
  }
  if (hours < 48) return std::to_string(hours) + "h";
  if (hours < 24 * 8) {
    const long long h = hours % 24;
    return h == 0 ? std::to_string(hours / 24) + "d"
                  : std::to_string(hours / 24) + "d" + std::to_string(h) + "h";
  }
  if (hours < 24 * 365 * 2) return std::to_string(hours / 24) + "d";
  if (hours < 24 * 365 * 8) {
    const long long days = (hours / 24) % 365;
    return days == 0 ? std::to_string(hours / 24 / 365) + "y"
                     : std::to_string(hours / 24 / 365) + "y" + std::to_string(days) + "d";
  }
  return std::to_string(hours / 24 / 365) + "y";
}

ordered_json TableView(const ResourceType& type, const std::vector<json>& objects,
                       const std::string& resource_version, const std::string& continue_token,
                       const std::string& include_object,
                       std::chrono::system_clock::time_point now) {
  ordered_json table;
  table["kind"] = "Table";
  table["apiVersion"] = "meta.k8s.io/v1";
  ordered_json meta;
  meta["resourceVersion"] = resource_version;
  if (!continue_token.empty()) meta["continue"] = continue_token;
  table["metadata"] = meta;
  ordered_json columns = ordered_json::array();
  columns.push_back(ColumnDefinition("Name", "string", "name", kNameDescription, 0));
  for (const PrinterColumn& c : type.printer_columns) {
    columns.push_back(ColumnDefinition(c.name, c.type, c.format, c.description, c.priority));
  }
  table["columnDefinitions"] = columns;
  ordered_json rows = ordered_json::array();
  for (const json& object : objects) {
    ordered_json row;
    ordered_json cells = ordered_json::array();
    cells.push_back(StringField(object, {"metadata", "name"}));
    for (const PrinterColumn& c : type.printer_columns) {
      cells.push_back(ordered_json::parse(Cell(c, object, now).dump()));
    }
    row["cells"] = cells;
    if (include_object == "Object") {
      row["object"] = ordered_json::parse(object.dump());
    } else if (include_object != "None") {
      ordered_json partial;
      partial["kind"] = "PartialObjectMetadata";
      partial["apiVersion"] = "meta.k8s.io/v1";
      partial["metadata"] = ordered_json::parse(object["metadata"].dump());
      row["object"] = partial;
    }
    rows.push_back(row);
  }
  table["rows"] = rows;
  return table;
}

}  // namespace kube_testing
}  // namespace gaptrain
