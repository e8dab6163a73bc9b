// JobStatus: a TrainingJob's status, typed, as the reconcile reads the
// observed one and writes the next; JobStatusSchema, beside it, is the
// CRD's schema of status (docs/trainingjob.md lists it). One table per
// struct (job_status.cc, status_fields.h) makes the writer, the reader and
// the schema, so a status field is added in one line.
//
// What callers may rely on:
//   - ReadJobStatus never fails: a status written by an older operator, or
//     edited by hand, gives what it can; a field of another JSON type reads
//     as unset (a count as 0), and fields this operator does not know are
//     dropped (the API server prunes them anyway).
//   - ToJson writes the fields that are set (a count always, as the
//     schema's counters are never absent), and reading it back writes the
//     same: ReadJobStatus(s.ToJson()).ToJson() == s.ToJson().
//   - Sections that other files compute stay JSON objects here, {} meaning
//     absent: conditions (job_conditions.h), display (progress_display.h),
//     output (the export), autoscale (job_autoscale.h), gang
//     (gang_release.h).
//   - Every status the reconcile writes is checked against the schema by
//     reconcile_test; job_status_test checks a full JobStatus writes every
//     property the schema has.

#ifndef GAPTRAIN_OPERATOR_TRAININGJOB_JOB_STATUS_H_
#define GAPTRAIN_OPERATOR_TRAININGJOB_JOB_STATUS_H_

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace gaptrain {
namespace trainingjob {

// status.replicaStatuses.<Type>: pods of one replica type.
struct ReplicaCounts {
  int64_t active = 0, ready = 0, succeeded = 0, failed = 0;
};

// status.workers: the trainers, for the scale subresource and kubectl get.
struct WorkersStatus {
  int64_t active = 0, ready = 0, desired = 0;
  std::string selector;  // the trainers' pods' label selector
  std::string summary;   // "ready/desired"
};

// status.progress: training as the coordinator and the master report it.
struct JobProgress {
  std::optional<double> epoch;  // epochs done, fractional
  std::optional<uint64_t> model_version;
  std::optional<double> test_accuracy, test_loss;
  std::map<std::string, double> test_metrics;  // the latest evaluation's others
  std::optional<double> mean_gap, mean_staleness, updates_per_second;

  nlohmann::json ToJson() const;
};

struct JobStatus {
  std::string phase;  // "" before the first reconcile
  nlohmann::json conditions = nlohmann::json::array();
  std::optional<int64_t> observed_generation;
  std::string start_time, completion_time;  // RFC 3339; "" unset
  // By ReplicaTypeStatusKey ("Master", "Coordinator", "Evaluator", "Trainer").
  std::map<std::string, ReplicaCounts> replica_statuses;
  std::optional<WorkersStatus> workers;
  int64_t preemptions = 0, failures = 0, restarts = 0;
  JobProgress progress;
  nlohmann::json display = nlohmann::json::object();
  nlohmann::json output = nlohmann::json::object();
  nlohmann::json autoscale = nlohmann::json::object();
  nlohmann::json gang = nlohmann::json::object();
  std::string image;  // "" unset
  bool tls = false;

  nlohmann::json ToJson() const;
};

JobStatus ReadJobStatus(const nlohmann::json& status);

// The CRD's schema of status (operator/crd puts it in the CRD;
// docs/trainingjob.md lists it), from the same tables as ToJson and
// ReadJobStatus.
nlohmann::ordered_json JobStatusSchema();

}  // namespace trainingjob
}  // namespace gaptrain

#endif  // GAPTRAIN_OPERATOR_TRAININGJOB_JOB_STATUS_H_
