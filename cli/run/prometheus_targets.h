// The scrape targets of a local job in Prometheus's file_sd_configs format
// (<run dir>/prometheus-targets.json), labelled the way Prometheus labels a
// cluster job's pods once it relabels them
// (deploy/monitoring/prometheus-scrape.yml), so the dashboards and rules
// in deploy/monitoring select a local job and a cluster job alike:
//
//   namespace                 "local" (a local job has no namespace)
//   pod                       the service: master, coordinator, evaluator,
//                             trainer-3
//   gaptrain_io_job_name      metadata.name, as the pod label
//                             gaptrain.io/job-name
//   gaptrain_io_replica_type  master | coordinator | evaluator | trainer, as
//                             the pod label gaptrain.io/replica-type
//   job                       gaptrain-master | gaptrain-coordinator |
//                             gaptrain-worker (as before the labels above)

#ifndef GAPTRAIN_CLI_RUN_PROMETHEUS_TARGETS_H_
#define GAPTRAIN_CLI_RUN_PROMETHEUS_TARGETS_H_

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/run/local_job.h"

namespace gaptrain {

// The namespace label of a local job's series.
constexpr char kLocalJobNamespace[] = "local";

// One target group per target, in the order given: a JSON array.
nlohmann::json PrometheusTargetGroups(const std::string& job_name,
                                      const std::vector<LocalJob::MetricsTarget>& targets);

}  // namespace gaptrain

#endif  // GAPTRAIN_CLI_RUN_PROMETHEUS_TARGETS_H_
