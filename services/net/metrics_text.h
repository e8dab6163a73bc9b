// Reading a service's /metrics (Prometheus text exposition format 0.0.4)
// back into numbers: for `gaptrain run`'s progress line and summary, and
// the operator's reading of the master's progress.

#ifndef GAPTRAIN_SERVICES_NET_METRICS_TEXT_H_
#define GAPTRAIN_SERVICES_NET_METRICS_TEXT_H_

#include <map>
#include <string>

namespace gaptrain {

// Series → value. The key is the series as exposed, labels included, e.g.
// `gaptrain_master_pushes_total{outcome="applied"}`. Comments, blank lines
// and lines that do not parse are skipped; a timestamp after the value is
// ignored.
using MetricsSample = std::map<std::string, double>;
MetricsSample ParseMetricsText(const std::string& text);

// The value of `series` (exact key), or `absent`.
double MetricValue(const MetricsSample& sample, const std::string& series, double absent = 0);

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_NET_METRICS_TEXT_H_
