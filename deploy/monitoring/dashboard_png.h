// RenderDashboardPng: a picture of a dashboard as Grafana lays it out, its
// rows and panels at their gridPos, each panel drawn by gnuplot from the
// data its queries returned (PanelData): time series as lines (an
// override's right-axis series on a second axis), heatmaps as a colour map
// of the buckets' rates (de-accumulated, as Grafana's heatmap shows
// Prometheus buckets), stats as their last value. It stands in for a
// screenshot in docs/monitoring.md: Grafana is not installable here.

#ifndef GAPTRAIN_DEPLOY_MONITORING_DASHBOARD_PNG_H_
#define GAPTRAIN_DEPLOY_MONITORING_DASHBOARD_PNG_H_

#include <string>
#include <vector>

#include "deploy/monitoring/grafana_dashboard.h"
#include "deploy/monitoring/panel_data.h"
#include "services/base/status.h"

namespace gaptrain {

struct DashboardPicture {
  std::string title;           // above the panels
  int width_pixels = 1000;     // 24 columns
  int row_unit_pixels = 20;    // one gridPos unit of height
};

// Writes `png_path`, with the data files and the gnuplot script in the
// directory `png_path`.data/ (kept, to see what was drawn). `data` is
// FetchPanelData's answer for `dashboard`; times are drawn in seconds from
// `range_start`. Needs gnuplot (see RunGnuplot).
Status RenderDashboardPng(const GrafanaDashboard& dashboard, const std::vector<TargetData>& data,
                          double range_start, const DashboardPicture& picture,
                          const std::string& png_path);

}  // namespace gaptrain

#endif  // GAPTRAIN_DEPLOY_MONITORING_DASHBOARD_PNG_H_
