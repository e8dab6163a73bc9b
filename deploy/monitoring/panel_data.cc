#include "deploy/monitoring/panel_data.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>

namespace gaptrain {
namespace {

using nlohmann::json;

// Prometheus writes sample values as strings: "1.5", "NaN", "+Inf".
bool ReadPoint(const json& pair, std::pair<double, double>* point) {
  if (!pair.is_array() || pair.size() != 2 || !pair[0].is_number() || !pair[1].is_string()) {
    return false;
  }
  const std::string text = pair[1].get<std::string>();
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || *end != '\0') return false;
  *point = {pair[0].get<double>(), value};
  return true;
}

// The series of a query_range (matrix) or query (vector) answer.
Status ReadSeries(const std::string& body, const DashboardTarget& target,
                  std::vector<SeriesData>* series) {
  const json answer = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (answer.is_discarded() || answer.value("status", "") != "success" ||
      !answer.contains("data") || !answer["data"].is_object()) {
    return Status::DataLoss("unexpected answer: " + body.substr(0, 500));
  }
  const json& data = answer["data"];
  const std::string type = data.value("resultType", "");
  if (type == "scalar") {
    SeriesData s;
    std::pair<double, double> point;
    if (!ReadPoint(data["result"], &point)) return Status::DataLoss("bad scalar: " + body);
    s.points.push_back(point);
    s.legend = FormatLegend(target.legend_format, s.labels);
    series->push_back(std::move(s));
    return Status::OK();
  }
  if ((type != "matrix" && type != "vector") || !data["result"].is_array()) {
    return Status::DataLoss("unexpected result type '" + type + "'");
  }
  for (const json& item : data["result"]) {
    SeriesData s;
    if (item.contains("metric") && item["metric"].is_object()) {
      for (const auto& [key, value] : item["metric"].items()) {
        if (value.is_string()) s.labels[key] = value.get<std::string>();
      }
    }
    const json samples = type == "matrix" ? item.value("values", json::array())
                                          : json::array({item.value("value", json())});
    for (const json& pair : samples) {
      std::pair<double, double> point;
      if (!ReadPoint(pair, &point)) return Status::DataLoss("bad sample: " + pair.dump());
      s.points.push_back(point);
    }
    s.legend = FormatLegend(target.legend_format, s.labels);
    series->push_back(std::move(s));
  }
  return Status::OK();
}

std::string Describe(const TargetData& t) {
  return "panel " + std::to_string(t.panel->id) + " \"" + t.panel->title + "\" query " +
         t.target->ref_id + " (" + (t.promql.empty() ? t.target->expr : t.promql) + ")";
}

}  // namespace

bool SeriesData::HasFiniteValue() const {
  for (const auto& point : points) {
    if (std::isfinite(point.second)) return true;
  }
  return false;
}

std::vector<TargetData> FetchPanelData(PrometheusTestServer* prometheus,
                                       const GrafanaDashboard& dashboard,
                                       const std::map<std::string, std::string>& variables,
                                       const PanelRange& range) {
  QueryInterval interval;
  interval.step_seconds = range.step_seconds;
  interval.scrape_interval_seconds = range.scrape_interval_seconds;
  interval.range_seconds = range.end - range.start;
  std::vector<TargetData> all;
  for (const DashboardPanel& panel : dashboard.panels()) {
    for (const DashboardTarget& target : panel.targets) {
      TargetData t;
      t.panel = &panel;
      t.target = &target;
      t.status = ExpandQuery(target.expr, variables, interval, &t.promql);
      std::string body;
      if (t.status.ok()) {
        if (target.instant) {
          char at[32];
          std::snprintf(at, sizeof at, "%.3f", range.end);
          t.status = prometheus->Api("query", {{"query", t.promql}, {"time", at}}, &body);
        } else {
          t.status =
              prometheus->QueryRange(t.promql, range.start, range.end, range.step_seconds, &body);
        }
      }
      if (t.status.ok()) t.status = ReadSeries(body, target, &t.series);
      all.push_back(std::move(t));
    }
  }
  return all;
}

std::vector<std::string> EmptyTargets(const std::vector<TargetData>& data) {
  std::vector<std::string> empty;
  for (const TargetData& t : data) {
    if (!t.status.ok()) {
      empty.push_back(Describe(t) + ": " + t.status.ToString());
      continue;
    }
    bool finite = false;
    for (const SeriesData& s : t.series) finite = finite || s.HasFiniteValue();
    if (t.series.empty()) {
      empty.push_back(Describe(t) + ": no series");
    } else if (!finite) {
      empty.push_back(Describe(t) + ": " + std::to_string(t.series.size()) +
                      " series, none with a finite value");
    }
  }
  return empty;
}

Status VariableValues(PrometheusTestServer* prometheus, const GrafanaDashboard& dashboard,
                      const std::string& name, const std::map<std::string, std::string>& chosen,
                      const PanelRange& range, std::vector<std::string>* values) {
  const DashboardVariable* variable = nullptr;
  for (const DashboardVariable& v : dashboard.variables()) {
    if (v.name == name && v.type == "query") variable = &v;
  }
  if (variable == nullptr) return Status::NotFound(name + ": no query variable of that name");
  std::string query, selector, label;
  QueryInterval interval;
  interval.range_seconds = range.end - range.start;
  GAPTRAIN_RETURN_IF_ERROR(ExpandQuery(variable->query, chosen, interval, &query));
  GAPTRAIN_RETURN_IF_ERROR(ParseLabelValuesQuery(query, &selector, &label));
  char start[32], end[32];
  std::snprintf(start, sizeof start, "%.3f", range.start);
  std::snprintf(end, sizeof end, "%.3f", range.end);
  std::vector<std::pair<std::string, std::string>> params = {{"start", start}, {"end", end}};
  if (!selector.empty()) params.push_back({"match[]", selector});
  std::string body;
  GAPTRAIN_RETURN_IF_ERROR(prometheus->Api("label/" + label + "/values", params, &body));
  const json answer = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (answer.is_discarded() || !answer.contains("data") || !answer["data"].is_array()) {
    return Status::DataLoss("unexpected answer for " + query + ": " + body.substr(0, 500));
  }
  values->clear();
  for (const json& v : answer["data"]) {
    if (v.is_string()) values->push_back(v.get<std::string>());
  }
  return Status::OK();
}

}  // namespace gaptrain
