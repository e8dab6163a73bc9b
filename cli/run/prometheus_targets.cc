#include "cli/run/prometheus_targets.h"

namespace gaptrain {

nlohmann::json PrometheusTargetGroups(const std::string& job_name,
                                      const std::vector<LocalJob::MetricsTarget>& targets) {
  nlohmann::json groups = nlohmann::json::array();
  for (const LocalJob::MetricsTarget& t : targets) {
    groups.push_back({{"targets", {t.address}},
                      {"labels",
                       {{"job", "gaptrain-" + t.role},
                        {"namespace", kLocalJobNamespace},
                        {"pod", t.service},
                        {"gaptrain_io_job_name", job_name},
                        {"gaptrain_io_replica_type", t.replica_type}}}});
  }
  return groups;
}

}  // namespace gaptrain
