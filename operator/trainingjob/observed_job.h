// ObservedJob: everything one reconcile of a TrainingJob looks at, as
// plain data: the job as the API server returned it and what the parser
// made of it, the children it owns by kind, what its coordinator and master
// report, and the time. The reconcile (reconcile.h) is a pure function of
// this; whoever reads the cluster fills it in.
//
// What callers may rely on:
//   - ObserveJob parses the object the way the services parse job.yaml
//     (ParseTrainingJob on its JSON); a parse error is kept, naming the
//     field, and never throws.
//   - ParseCoordinatorStatus and ParseMasterMetrics accept what the
//     services serve (services/coordinator/status_json.cc, the master's
//     Prometheus text) and refuse anything else with a clear error; the
//     caller then leaves the reading absent ("unreachable").

#ifndef GAPTRAIN_OPERATOR_TRAININGJOB_OBSERVED_JOB_H_
#define GAPTRAIN_OPERATOR_TRAININGJOB_OBSERVED_JOB_H_

#include <array>
#include <chrono>
#include <map>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "operator/trainingjob/job_tls.h"
#include "services/api/training_job.h"
#include "services/base/status.h"

namespace gaptrain {
namespace trainingjob {

// A trainer's data store could not be reached (the coordinator's
// "dataUnavailable": a trainer handed its task back; cleared by the next
// completed task).
struct DataUnavailableStatus {
  std::string since;    // RFC 3339, the episode's first release
  std::string message;  // what the trainer's dataset raised
  uint64_t worker = 0;  // the last releasing trainer's id and host
  std::string host;
  uint64_t releases = 0;  // tasks handed back in this episode
};

// The fields of the coordinator's GET /status the operator uses.
// One master shard as the coordinator's /status lists it: its run's
// totals (proto MasterTotals) from the membership feed's last reply.
struct MasterShardReading {
  uint64_t version = 0;
  double parameters = 0, updates = 0;
  double gap_sum = 0, gap_count = 0;
  double staleness_sum = 0, staleness_count = 0;
};

struct CoordinatorStatus {
  std::string phase;  // "Pending" | "Running" | "Succeeded" | "Failed"
  std::string reason;
  std::string message;
  uint64_t epoch = 0;  // epochs completed
  uint64_t samples_done_in_epoch = 0;
  uint64_t samples_in_epoch = 0;
  uint64_t master_version = 0;
  uint64_t live_trainers = 0;
  std::optional<double> test_accuracy;  // the evaluator's latest
  std::optional<double> test_loss;
  // The metrics beside accuracy and loss (the user's evaluation's), by name.
  std::map<std::string, double> test_metrics;
  uint64_t evaluation_version = 0;  // the master version that evaluation scored
  // When the phase became Succeeded or Failed (the lastTransitionTime of
  // that condition), when the coordinator says.
  std::optional<std::chrono::system_clock::time_point> finished_at;
  std::optional<DataUnavailableStatus> data_unavailable;  // absent: the data is available
  // The master shards (spec.master.shards), in shard order; empty from a
  // coordinator from before shards.
  std::vector<MasterShardReading> masters;

  bool finished() const { return phase == "Succeeded" || phase == "Failed"; }
  // Epochs done, fractional.
  double EpochsDone() const;
};

Status ParseCoordinatorStatus(const std::string& body, CoordinatorStatus* out);

// One reading of the master's /metrics: totals since the master started.
struct MasterScrape {
  std::chrono::system_clock::time_point at;
  double model_version = 0;
  double gap_sum = 0, gap_count = 0;
  double staleness_sum = 0, staleness_count = 0;
};

Status ParseMasterMetrics(const std::string& text, std::chrono::system_clock::time_point at,
                          MasterScrape* out);

// The job's totals over its master shards as the coordinator read them at
// `at`: its version (the least shard's), and the Gap's and staleness's
// sums and counts weighted by each shard's share of the parameters, so
// they read as one master's (every push reaches every shard) and the
// Gap's mean is one parameter's.
MasterScrape ScrapeOfShards(const CoordinatorStatus& status,
                            std::chrono::system_clock::time_point at);

// What the status's progress shows of the master; absent values are not
// known (no push yet, or a single reading for the rate).
struct MasterProgress {
  uint64_t model_version = 0;
  std::optional<double> mean_gap;
  std::optional<double> mean_staleness;
  std::optional<double> updates_per_second;
};

// The means of the pushes between `previous` and `current`, and the update
// rate between them. Without a previous reading, or when the master
// restarted in between (its totals went down), the means are over
// everything since it started and the rate is unknown.
MasterProgress ProgressBetween(const MasterScrape* previous, const MasterScrape& current);

struct ObservedJob {
  nlohmann::json job;         // the TrainingJob as read from the API
  Status parse_status;        // ParseTrainingJob's verdict on it
  TrainingJob spec;           // meaningful when parse_status is OK

  // Children: the objects labelled gaptrain.io/job-name=NAME, as read.
  // Not the token Secret: the operator reads no Secret (it may create them,
  // no more); the reconcile creates the token with the pods that mount it
  // (reconcile.h). NetworkPolicies only when the operator makes them.
  std::vector<nlohmann::json> pods;
  std::vector<nlohmann::json> services;
  std::vector<nlohmann::json> config_maps;
  std::vector<nlohmann::json> persistent_volume_claims;
  std::vector<nlohmann::json> network_policies;

  // Kueue (OperatorConfig::kueue): the job's Workloads (labelled as the
  // children), every ResourceFlavor (for an admission's node labels) and
  // every WorkloadPriorityClass (for the priority a job names).
  std::vector<nlohmann::json> workloads;
  std::vector<nlohmann::json> resource_flavors;
  std::vector<nlohmann::json> workload_priority_classes;
  // every PriorityClass (the pods' priorityClassName, when the job names
  // no WorkloadPriorityClass).
  std::vector<nlohmann::json> priority_classes;
  std::optional<CoordinatorStatus> coordinator;  // absent: not running or unreachable
  std::optional<MasterProgress> master;          // absent: not running or unreachable
  // The master's totals as read now (what `master` was measured from), for
  // Gap-aware autoscaling's window (job_autoscale.h); absent as `master` is.
  std::optional<MasterScrape> master_scrape;

  std::chrono::system_clock::time_point now;
  // Random bytes for the job token; used only when the Secret is missing
  // (a create of an existing Secret changes nothing).
  std::array<uint8_t, 32> token_bytes{};
  // Random bytes for a new job's status token (reconcile.h).
  std::array<uint8_t, 32> status_token_bytes{};
  // A certificate freshly issued for the job (JobTlsNames), used only when
  // the job's pods are made with TLS and its Secret NAME-tls is missing (a
  // create of an existing Secret changes nothing); empty when none could
  // be issued: then a new job runs plaintext.
  JobTls tls;
};

// An ObservedJob holding `job_object` and its parse.
ObservedJob ObserveJob(nlohmann::json job_object);

// spec.master.shards of a job that parses; 1 for one that does not (it has
// no pods: the reconcile fails it).
uint32_t MasterShardsOf(const ObservedJob& observed);

}  // namespace trainingjob
}  // namespace gaptrain

#endif  // GAPTRAIN_OPERATOR_TRAININGJOB_OBSERVED_JOB_H_
