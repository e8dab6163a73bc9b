// GrafanaDashboard: a Grafana dashboard in the classic JSON model, read and
// checked for what importing it into a stock Grafana with a Prometheus data
// source needs, and its panels' queries as Grafana sends them to
// Prometheus. The tests of deploy/monitoring's dashboards use it; Grafana
// itself is not installable here.
//
// What Parse() checks (an error names the panel, by id and title, and the
// field):
//   - the dashboard: a uid of 1 to 40 letters, digits, '-' or '_'; a title;
//     no numeric id (import would overwrite that dashboard); a
//     schemaVersion of at least kMinSchemaVersion; refresh a string and no
//     timepicker.time_options (what schema versions 40 and 41 require);
//     time.from and time.to;
//   - templating: a variable "datasource" of type datasource for
//     prometheus; query variables on ${datasource}; unique names;
//   - panels: a unique positive id each (rows' nested panels included), a
//     known core panel type, a title, a gridPos inside the 24 columns that
//     overlaps no other panel; rows one unit high and 24 wide;
//   - every panel but a row: a description that says what a healthy value
//     looks like (it contains "Healthy"), the data source ${datasource},
//     at least one target, each with a unique refId, a non-empty expr, the
//     panel's data source or none, and only $variables the dashboard
//     defines.

#ifndef GAPTRAIN_DEPLOY_MONITORING_GRAFANA_DASHBOARD_H_
#define GAPTRAIN_DEPLOY_MONITORING_GRAFANA_DASHBOARD_H_

#include <map>
#include <string>
#include <vector>

#include "services/base/status.h"

namespace gaptrain {

// Grafana 10.4's schema version; newer Grafana migrates older dashboards on
// load, but a dashboard older than this one misses fields we rely on.
constexpr int kMinSchemaVersion = 39;

struct GridPos {
  int x = 0;
  int y = 0;
  int w = 0;
  int h = 0;
};

struct DashboardTarget {
  std::string ref_id;
  std::string expr;           // PromQL with $variables and Grafana's macros
  std::string legend_format;  // "{{label}} text"; "" for Grafana's default
  bool instant = false;       // an instant query at the end of the range
  bool heatmap = false;       // format "heatmap": cumulative le buckets
};

// How a panel shows its values (read leniently: all optional).
struct PanelDisplay {
  std::string unit;       // fieldConfig.defaults.unit: "s", "percentunit", ...
  int decimals = -1;      // fieldConfig.defaults.decimals; -1: automatic
  std::string text_mode;  // a stat's options.textMode: "value", "name", ...
  // Series (by legend) an override puts on the right axis.
  std::vector<std::string> right_axis;
  // Value mappings: the text shown for a value ("2" -> "Running").
  std::map<std::string, std::string> value_text;
};

struct DashboardPanel {
  int id = 0;
  std::string type;  // timeseries, stat, heatmap, row, ...
  std::string title;
  std::string description;
  GridPos grid;
  PanelDisplay display;
  std::vector<DashboardTarget> targets;  // none for a row
};

struct DashboardVariable {
  std::string name;
  std::string type;   // datasource, query, ...
  std::string query;  // datasource: the plugin; query: label_values(...)
};

class GrafanaDashboard {
 public:
  // Reads and checks `json_text` (see the file comment).
  static Status Parse(const std::string& json_text, GrafanaDashboard* dashboard);

  const std::string& uid() const { return uid_; }
  const std::string& title() const { return title_; }
  int schema_version() const { return schema_version_; }
  // Every panel, rows' nested panels included, in the file's order.
  const std::vector<DashboardPanel>& panels() const { return panels_; }
  const std::vector<DashboardVariable>& variables() const { return variables_; }

 private:
  std::string uid_;
  std::string title_;
  int schema_version_ = 0;
  std::vector<DashboardPanel> panels_;
  std::vector<DashboardVariable> variables_;
};

// What Grafana substitutes for its interval macros in a query.
struct QueryInterval {
  double step_seconds = 15;             // $__interval: the range's step
  double scrape_interval_seconds = 15;  // the data source's scrape interval
  double range_seconds = 3600;          // $__range: the dashboard's time range
};

// `expr` as Grafana sends it: $__interval, $__interval_ms,
// $__rate_interval (max(step + scrape interval, 4 x scrape interval)),
// $__range, $__range_s and $__range_ms expanded, and $name and ${name}
// replaced by `variables`. INVALID_ARGUMENT names a variable or macro it
// does not know, or a ${name:format} (not used here, so not supported).
Status ExpandQuery(const std::string& expr, const std::map<std::string, std::string>& variables,
                   const QueryInterval& interval, std::string* promql);

// A Prometheus duration for `seconds`: "15s", "90s", "1500ms" (whole
// milliseconds, at least 1ms).
std::string PrometheusDuration(double seconds);

// The parts of a variable's "label_values(SELECTOR, LABEL)" (or
// "label_values(LABEL)": *selector is then empty). INVALID_ARGUMENT for any
// other query.
Status ParseLabelValuesQuery(const std::string& query, std::string* selector,
                             std::string* label);

// A series' name in a legend: `legend_format` with each {{label}} replaced
// by the series' value of that label ("" when absent); an empty format
// gives Grafana's default, the labels as {a="1", b="2"}.
std::string FormatLegend(const std::string& legend_format,
                         const std::map<std::string, std::string>& labels);

}  // namespace gaptrain

#endif  // GAPTRAIN_DEPLOY_MONITORING_GRAFANA_DASHBOARD_H_
