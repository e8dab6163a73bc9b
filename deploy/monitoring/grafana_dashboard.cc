#include "deploy/monitoring/grafana_dashboard.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <set>

namespace gaptrain {
namespace {

using nlohmann::json;

// Grafana's core panel plugins (a type Grafana does not know shows as
// "Panel plugin not found").
const std::set<std::string> kCorePanelTypes = {
    "barchart", "bargauge",     "gauge",          "heatmap", "histogram", "logs",
    "piechart", "row",          "state-timeline", "stat",    "status-history",
    "table",    "text",         "timeseries"};

const json kDatasourceRef = {{"type", "prometheus"}, {"uid", "${datasource}"}};

// Grafana's interval and range macros.
const std::set<std::string> kMacros = {"__interval",      "__interval_ms", "__rate_interval",
                                       "__rate_interval_ms", "__range",    "__range_s",
                                       "__range_ms"};

bool IsIdentifierStart(char c) {
  return std::isalpha(static_cast<unsigned char>(c)) || c == '_';
}
bool IsIdentifierChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// Calls `variable(name, begin, end)` for each $name or ${name...} in
// `expr` ([begin, end) is the reference's text); "$1" (label_replace) and
// a lone '$' are text. An unterminated "${" is an error.
template <typename Fn>
Status ForEachVariable(const std::string& expr, Fn variable) {
  for (size_t i = 0; i < expr.size(); ++i) {
    if (expr[i] != '$' || i + 1 >= expr.size()) continue;
    if (expr[i + 1] == '{') {
      const size_t close = expr.find('}', i + 2);
      if (close == std::string::npos) {
        return Status::InvalidArgument("unterminated ${ at offset " + std::to_string(i));
      }
      GAPTRAIN_RETURN_IF_ERROR(variable(expr.substr(i + 2, close - i - 2), i, close + 1));
      i = close;
    } else if (IsIdentifierStart(expr[i + 1])) {
      size_t end = i + 1;
      while (end < expr.size() && IsIdentifierChar(expr[end])) ++end;
      GAPTRAIN_RETURN_IF_ERROR(variable(expr.substr(i + 1, end - i - 1), i, end));
      i = end - 1;
    }
  }
  return Status::OK();
}

std::string PanelName(const json& panel, size_t index) {
  std::string name = "panels[" + std::to_string(index) + "]";
  if (panel.is_object() && panel.contains("id") && panel["id"].is_number_integer()) {
    name += " (id " + std::to_string(panel["id"].get<int64_t>());
    if (panel.contains("title") && panel["title"].is_string()) {
      name += ", \"" + panel["title"].get<std::string>() + "\"";
    }
    name += ")";
  }
  return name;
}

bool NonEmptyString(const json& object, const char* key) {
  return object.contains(key) && object[key].is_string() && !object[key].get<std::string>().empty();
}

Status ReadGridPos(const json& panel, const std::string& name, GridPos* grid) {
  if (!panel.contains("gridPos") || !panel["gridPos"].is_object()) {
    return Status::InvalidArgument(name + ".gridPos: missing or not an object");
  }
  const json& g = panel["gridPos"];
  int* fields[] = {&grid->x, &grid->y, &grid->w, &grid->h};
  const char* keys[] = {"x", "y", "w", "h"};
  for (int k = 0; k < 4; ++k) {
    if (!g.contains(keys[k]) || !g[keys[k]].is_number_integer()) {
      return Status::InvalidArgument(name + ".gridPos." + keys[k] + ": missing or not an integer");
    }
    *fields[k] = g[keys[k]].get<int>();
  }
  if (grid->x < 0 || grid->y < 0 || grid->w < 1 || grid->h < 1 || grid->x + grid->w > 24) {
    return Status::InvalidArgument(name + ".gridPos: must lie within the 24 columns (x >= 0, "
                                          "y >= 0, w and h >= 1, x + w <= 24)");
  }
  return Status::OK();
}

bool Overlap(const GridPos& a, const GridPos& b) {
  return a.x < b.x + b.w && b.x < a.x + a.w && a.y < b.y + b.h && b.y < a.y + a.h;
}

Status ReadTargets(const json& panel, const std::string& name,
                   const std::set<std::string>& variables, DashboardPanel* out) {
  if (!panel.contains("targets") || !panel["targets"].is_array() || panel["targets"].empty()) {
    return Status::InvalidArgument(name + ".targets: a panel needs at least one query");
  }
  std::set<std::string> ref_ids;
  for (size_t t = 0; t < panel["targets"].size(); ++t) {
    const json& target = panel["targets"][t];
    const std::string at = name + ".targets[" + std::to_string(t) + "]";
    if (!target.is_object()) return Status::InvalidArgument(at + ": not an object");
    if (!NonEmptyString(target, "refId")) return Status::InvalidArgument(at + ".refId: missing");
    DashboardTarget out_target;
    out_target.ref_id = target["refId"];
    if (!ref_ids.insert(out_target.ref_id).second) {
      return Status::InvalidArgument(at + ".refId: \"" + out_target.ref_id +
                                     "\" is used twice in the panel");
    }
    if (!NonEmptyString(target, "expr")) {
      return Status::InvalidArgument(at + ".expr: missing or empty");
    }
    out_target.expr = target["expr"];
    if (target.contains("datasource") && target["datasource"] != kDatasourceRef) {
      return Status::InvalidArgument(at + ".datasource: must be the panel's, " +
                                     kDatasourceRef.dump() + ", got " + target["datasource"].dump());
    }
    if (target.contains("legendFormat")) {
      if (!target["legendFormat"].is_string()) {
        return Status::InvalidArgument(at + ".legendFormat: not a string");
      }
      out_target.legend_format = target["legendFormat"];
    }
    out_target.instant = target.value("instant", false) && !target.value("range", false);
    out_target.heatmap = target.value("format", "") == "heatmap";
    GAPTRAIN_RETURN_IF_ERROR(ForEachVariable(
        out_target.expr, [&](const std::string& variable, size_t, size_t) {
          if (kMacros.count(variable) || variables.count(variable)) return Status::OK();
          return Status::InvalidArgument(at + ".expr: $" + variable +
                                         " is neither a templating variable nor a Grafana macro");
        }));
    out->targets.push_back(std::move(out_target));
  }
  return Status::OK();
}

Status ReadVariables(const json& dashboard, std::vector<DashboardVariable>* variables) {
  if (!dashboard.contains("templating") || !dashboard["templating"].is_object() ||
      !dashboard["templating"].contains("list") || !dashboard["templating"]["list"].is_array()) {
    return Status::InvalidArgument("templating.list: missing or not a list");
  }
  std::set<std::string> names;
  bool have_datasource = false;
  const json& list = dashboard["templating"]["list"];
  for (size_t i = 0; i < list.size(); ++i) {
    const json& v = list[i];
    const std::string at = "templating.list[" + std::to_string(i) + "]";
    if (!v.is_object() || !NonEmptyString(v, "name") || !NonEmptyString(v, "type")) {
      return Status::InvalidArgument(at + ": a variable needs a name and a type");
    }
    DashboardVariable out{v["name"], v["type"], ""};
    if (!names.insert(out.name).second) {
      return Status::InvalidArgument(at + ".name: \"" + out.name + "\" is defined twice");
    }
    if (out.type == "datasource") {
      if (v.value("query", "") != "prometheus") {
        return Status::InvalidArgument(at + ".query: a datasource variable must list prometheus");
      }
      out.query = "prometheus";
      have_datasource = have_datasource || out.name == "datasource";
    } else if (out.type == "query") {
      if (!v.contains("datasource") || v["datasource"] != kDatasourceRef) {
        return Status::InvalidArgument(at + ".datasource: must be " + kDatasourceRef.dump());
      }
      // Grafana exports the query as {"query": ..., "refId": ...}; older
      // versions as a string.
      const json& q = v.contains("query") ? v["query"] : json();
      if (q.is_object() && q.contains("query") && q["query"].is_string()) {
        out.query = q["query"];
      } else if (q.is_string()) {
        out.query = q;
      }
      if (out.query.empty()) return Status::InvalidArgument(at + ".query: missing");
    }
    variables->push_back(std::move(out));
  }
  if (!have_datasource) {
    return Status::InvalidArgument(
        "templating.list: needs a variable \"datasource\" of type datasource (query "
        "prometheus), so the dashboard imports into any Grafana");
  }
  return Status::OK();
}

void ReadDisplay(const json& panel, PanelDisplay* display) {
  const json defaults = panel.contains("fieldConfig") && panel["fieldConfig"].is_object()
                            ? panel["fieldConfig"].value("defaults", json::object())
                            : json::object();
  if (defaults.is_object()) {
    if (defaults.contains("unit") && defaults["unit"].is_string()) display->unit = defaults["unit"];
    if (defaults.contains("decimals") && defaults["decimals"].is_number_integer()) {
      display->decimals = defaults["decimals"];
    }
    for (const json& mapping : defaults.value("mappings", json::array())) {
      if (!mapping.is_object() || mapping.value("type", "") != "value" ||
          !mapping.contains("options") || !mapping["options"].is_object()) {
        continue;
      }
      for (const auto& [value, shown] : mapping["options"].items()) {
        if (shown.is_object() && shown.contains("text") && shown["text"].is_string()) {
          display->value_text[value] = shown["text"];
        }
      }
    }
  }
  if (panel.contains("options") && panel["options"].is_object() &&
      panel["options"].contains("textMode") && panel["options"]["textMode"].is_string()) {
    display->text_mode = panel["options"]["textMode"];
  }
  const json overrides = panel.contains("fieldConfig") && panel["fieldConfig"].is_object()
                             ? panel["fieldConfig"].value("overrides", json::array())
                             : json::array();
  for (const json& o : overrides) {
    if (!o.is_object() || !o.contains("matcher") || !o["matcher"].is_object() ||
        o["matcher"].value("id", "") != "byName" || !o["matcher"].contains("options") ||
        !o["matcher"]["options"].is_string() || !o.contains("properties") ||
        !o["properties"].is_array()) {
      continue;
    }
    for (const json& property : o["properties"]) {
      if (property.is_object() && property.value("id", "") == "custom.axisPlacement" &&
          property.value("value", "") == "right") {
        display->right_axis.push_back(o["matcher"]["options"]);
      }
    }
  }
}

Status ReadPanel(const json& panel, const std::string& name, const std::set<std::string>& variables,
                 DashboardPanel* out) {
  if (!panel.is_object()) return Status::InvalidArgument(name + ": not an object");
  if (!panel.contains("id") || !panel["id"].is_number_integer() || panel["id"].get<int64_t>() < 1) {
    return Status::InvalidArgument(name + ".id: missing or not a positive integer");
  }
  out->id = panel["id"].get<int>();
  if (!NonEmptyString(panel, "type") || kCorePanelTypes.count(panel["type"]) == 0) {
    return Status::InvalidArgument(name + ".type: missing or not a core Grafana panel type");
  }
  out->type = panel["type"];
  if (!NonEmptyString(panel, "title")) return Status::InvalidArgument(name + ".title: missing");
  out->title = panel["title"];
  GAPTRAIN_RETURN_IF_ERROR(ReadGridPos(panel, name, &out->grid));
  if (out->type == "row") {
    if (out->grid.w != 24 || out->grid.h != 1 || out->grid.x != 0) {
      return Status::InvalidArgument(name + ".gridPos: a row spans the 24 columns, 1 high");
    }
    return Status::OK();
  }
  if (!NonEmptyString(panel, "description") ||
      panel["description"].get<std::string>().find("Healthy") == std::string::npos) {
    return Status::InvalidArgument(name + ".description: must say what a healthy value looks "
                                          "like (\"Healthy: ...\")");
  }
  out->description = panel["description"];
  ReadDisplay(panel, &out->display);
  if (!panel.contains("datasource") || panel["datasource"] != kDatasourceRef) {
    return Status::InvalidArgument(name + ".datasource: must be " + kDatasourceRef.dump());
  }
  return ReadTargets(panel, name, variables, out);
}

std::string FormatNumber(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.0f", value);
  return text;
}

}  // namespace

Status GrafanaDashboard::Parse(const std::string& json_text, GrafanaDashboard* dashboard) {
  const json d = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (d.is_discarded() || !d.is_object()) {
    return Status::InvalidArgument("not a JSON object");
  }
  GrafanaDashboard out;
  if (!NonEmptyString(d, "uid")) return Status::InvalidArgument("uid: missing");
  out.uid_ = d["uid"];
  if (out.uid_.size() > 40 ||
      !std::all_of(out.uid_.begin(), out.uid_.end(),
                   [](char c) { return IsIdentifierChar(c) || c == '-'; })) {
    return Status::InvalidArgument("uid: \"" + out.uid_ +
                                   "\" must be 1 to 40 letters, digits, '-' or '_'");
  }
  if (!NonEmptyString(d, "title")) return Status::InvalidArgument("title: missing");
  out.title_ = d["title"];
  if (d.contains("id") && !d["id"].is_null()) {
    return Status::InvalidArgument("id: must be null: an import with an id overwrites the "
                                   "dashboard that has it");
  }
  if (!d.contains("schemaVersion") || !d["schemaVersion"].is_number_integer() ||
      d["schemaVersion"].get<int>() < kMinSchemaVersion) {
    return Status::InvalidArgument("schemaVersion: missing or below " +
                                   std::to_string(kMinSchemaVersion));
  }
  out.schema_version_ = d["schemaVersion"];
  if (!d.contains("refresh") || !d["refresh"].is_string()) {
    return Status::InvalidArgument("refresh: must be a string (\"\" for none)");
  }
  if (d.contains("timepicker") && d["timepicker"].is_object() &&
      d["timepicker"].contains("time_options")) {
    return Status::InvalidArgument("timepicker.time_options: removed in schema version 41");
  }
  if (!d.contains("time") || !d["time"].is_object() || !NonEmptyString(d["time"], "from") ||
      !NonEmptyString(d["time"], "to")) {
    return Status::InvalidArgument("time: needs from and to");
  }
  GAPTRAIN_RETURN_IF_ERROR(ReadVariables(d, &out.variables_));
  std::set<std::string> variable_names;
  for (const DashboardVariable& v : out.variables_) variable_names.insert(v.name);

  if (!d.contains("panels") || !d["panels"].is_array() || d["panels"].empty()) {
    return Status::InvalidArgument("panels: missing or empty");
  }
  std::set<int> ids;
  std::vector<GridPos> placed;  // top-level panels: they share the grid
  for (size_t i = 0; i < d["panels"].size(); ++i) {
    const json& panel = d["panels"][i];
    const std::string name = PanelName(panel, i);
    DashboardPanel p;
    GAPTRAIN_RETURN_IF_ERROR(ReadPanel(panel, name, variable_names, &p));
    for (const GridPos& other : placed) {
      if (Overlap(p.grid, other)) {
        return Status::InvalidArgument(name + ".gridPos: overlaps another panel");
      }
    }
    placed.push_back(p.grid);
    std::vector<DashboardPanel> found = {p};
    // A row keeps its panels in "panels" while collapsed.
    if (p.type == "row" && panel.contains("panels") && panel["panels"].is_array()) {
      for (size_t j = 0; j < panel["panels"].size(); ++j) {
        DashboardPanel nested;
        GAPTRAIN_RETURN_IF_ERROR(ReadPanel(panel["panels"][j],
                                           name + "." + PanelName(panel["panels"][j], j),
                                           variable_names, &nested));
        if (nested.type == "row") {
          return Status::InvalidArgument(name + ": a row cannot hold a row");
        }
        found.push_back(nested);
      }
    }
    for (DashboardPanel& f : found) {
      if (!ids.insert(f.id).second) {
        return Status::InvalidArgument(name + ": panel id " + std::to_string(f.id) +
                                       " is used twice");
      }
      out.panels_.push_back(std::move(f));
    }
  }
  *dashboard = std::move(out);
  return Status::OK();
}

std::string PrometheusDuration(double seconds) {
  const double ms = std::max(1.0, std::round(seconds * 1000));
  if (std::fmod(ms, 1000) == 0) return FormatNumber(ms / 1000) + "s";
  return FormatNumber(ms) + "ms";
}

Status ExpandQuery(const std::string& expr, const std::map<std::string, std::string>& variables,
                   const QueryInterval& interval, std::string* promql) {
  const double rate_interval = std::max(interval.step_seconds + interval.scrape_interval_seconds,
                                        4 * interval.scrape_interval_seconds);
  const double range_s = std::round(interval.range_seconds);
  const std::map<std::string, std::string> macros = {
      {"__interval", PrometheusDuration(interval.step_seconds)},
      {"__interval_ms", FormatNumber(std::round(interval.step_seconds * 1000))},
      {"__rate_interval", PrometheusDuration(rate_interval)},
      {"__rate_interval_ms", FormatNumber(std::round(rate_interval * 1000))},
      {"__range", FormatNumber(range_s) + "s"},
      {"__range_s", FormatNumber(range_s)},
      {"__range_ms", FormatNumber(std::round(interval.range_seconds * 1000))},
  };
  std::string out;
  size_t copied = 0;
  Status s = ForEachVariable(expr, [&](const std::string& name, size_t begin, size_t end) {
    if (name.find(':') != std::string::npos || name.find('.') != std::string::npos) {
      return Status::InvalidArgument("${" + name + "}: formats and fields are not supported");
    }
    auto macro = macros.find(name);
    auto variable = variables.find(name);
    if (macro == macros.end() && variable == variables.end()) {
      return Status::InvalidArgument("$" + name + ": no such variable or macro");
    }
    out += expr.substr(copied, begin - copied) +
           (macro != macros.end() ? macro->second : variable->second);
    copied = end;
    return Status::OK();
  });
  if (!s.ok()) return Status(s.code(), "query '" + expr + "': " + s.message());
  *promql = out + expr.substr(copied);
  return Status::OK();
}

Status ParseLabelValuesQuery(const std::string& query, std::string* selector,
                             std::string* label) {
  static const std::string kPrefix = "label_values(";
  const auto bad = [&] {
    return Status::InvalidArgument("'" + query +
                                   "': expected label_values(SELECTOR, LABEL) or "
                                   "label_values(LABEL)");
  };
  std::string q = query;
  while (!q.empty() && std::isspace(static_cast<unsigned char>(q.back()))) q.pop_back();
  if (q.compare(0, kPrefix.size(), kPrefix) != 0 || q.back() != ')') return bad();
  const std::string inside = q.substr(kPrefix.size(), q.size() - kPrefix.size() - 1);
  const size_t comma = inside.rfind(',');
  std::string name = comma == std::string::npos ? inside : inside.substr(comma + 1);
  std::string sel = comma == std::string::npos ? "" : inside.substr(0, comma);
  const auto trim = [](std::string* s) {
    while (!s->empty() && std::isspace(static_cast<unsigned char>(s->front()))) s->erase(0, 1);
    while (!s->empty() && std::isspace(static_cast<unsigned char>(s->back()))) s->pop_back();
  };
  trim(&name);
  trim(&sel);
  if (name.empty() || !IsIdentifierStart(name[0]) ||
      !std::all_of(name.begin(), name.end(), IsIdentifierChar) ||
      (comma != std::string::npos && sel.empty())) {
    return bad();
  }
  *selector = sel;
  *label = name;
  return Status::OK();
}

std::string FormatLegend(const std::string& legend_format,
                         const std::map<std::string, std::string>& labels) {
  if (legend_format.empty()) {
    std::string text = "{";
    for (const auto& [key, value] : labels) {
      if (key == "__name__") continue;
      text += (text.size() > 1 ? ", " : "") + key + "=\"" + value + "\"";
    }
    return text + "}";
  }
  std::string out;
  size_t i = 0;
  while (i < legend_format.size()) {
    const size_t open = legend_format.find("{{", i);
    if (open == std::string::npos) break;
    const size_t close = legend_format.find("}}", open + 2);
    if (close == std::string::npos) break;
    out += legend_format.substr(i, open - i);
    std::string key = legend_format.substr(open + 2, close - open - 2);
    key.erase(std::remove_if(key.begin(), key.end(),
                             [](char c) { return std::isspace(static_cast<unsigned char>(c)); }),
              key.end());
    auto it = labels.find(key);
    if (it != labels.end()) out += it->second;
    i = close + 2;
  }
  return out + legend_format.substr(i);
}

}  // namespace gaptrain
