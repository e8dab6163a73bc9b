// PanelData: what a dashboard's panels show over a time range, fetched from
// a real Prometheus as Grafana fetches it: each target's query with the
// template variables substituted and the interval macros expanded, run as
// a range query (an instant one at the range's end for instant targets).
// The no-empty-panel tests check it; RenderDashboardPng draws it.

#ifndef GAPTRAIN_DEPLOY_MONITORING_PANEL_DATA_H_
#define GAPTRAIN_DEPLOY_MONITORING_PANEL_DATA_H_

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "deploy/monitoring/grafana_dashboard.h"
#include "services/base/status.h"
#include "services/testing/prometheus_test_server.h"

namespace gaptrain {

struct SeriesData {
  std::map<std::string, std::string> labels;
  std::string legend;                              // the target's legendFormat applied
  std::vector<std::pair<double, double>> points;  // (Unix time, value); NaN kept

  bool HasFiniteValue() const;
};

struct TargetData {
  const DashboardPanel* panel = nullptr;  // in the dashboard passed in
  const DashboardTarget* target = nullptr;
  std::string promql;  // as sent
  Status status;       // the query's outcome
  std::vector<SeriesData> series;
};

struct PanelRange {
  double start = 0;  // Unix seconds
  double end = 0;
  double step_seconds = 15;             // $__interval
  double scrape_interval_seconds = 15;  // the data source's, for $__rate_interval
};

// Every target of every panel of `dashboard`, in panel order. A query that
// cannot be expanded or that Prometheus refuses has that error in
// TargetData::status; the others are OK. `dashboard` must outlive the
// result.
std::vector<TargetData> FetchPanelData(PrometheusTestServer* prometheus,
                                       const GrafanaDashboard& dashboard,
                                       const std::map<std::string, std::string>& variables,
                                       const PanelRange& range);

// One line per target that would leave its panel (or its part of it)
// empty: an error, no series, or no finite value. Empty when every panel
// is filled.
std::vector<std::string> EmptyTargets(const std::vector<TargetData>& data);

// The values Grafana offers for the query variable `name`: its
// label_values() query, with the variables in `chosen` substituted, over
// `range`. NOT_FOUND for a variable that is not a query variable.
Status VariableValues(PrometheusTestServer* prometheus, const GrafanaDashboard& dashboard,
                      const std::string& name, const std::map<std::string, std::string>& chosen,
                      const PanelRange& range, std::vector<std::string>* values);

}  // namespace gaptrain

#endif  // GAPTRAIN_DEPLOY_MONITORING_PANEL_DATA_H_
