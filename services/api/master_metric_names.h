// The names of the metrics gaptrain-master serves on /metrics
// (docs/metrics.md), defined once: the master registers them
// (services/master/master_metrics.cc) and its readers look them up by the
// same constants (the operator's progress in operator/trainingjob/
// observed_job.cc, `gaptrain run`'s report in cli/run/run_report.cc).
// Dashboards, alerts and docs/metrics.md name them as text; their own tests
// check those against a real master.
//
// What callers may rely on: every constant is a valid Prometheus metric or
// label name, the same for every run of the master. A histogram NAME is
// also served as NAME_sum, NAME_count and NAME_bucket{le="..."}:
// HistogramSum and HistogramCount spell the first two. Series() spells one
// labelled series as the text format prints it, the key that
// services/net/metrics_text.h's MetricValue looks up.

#ifndef GAPTRAIN_SERVICES_API_MASTER_METRIC_NAMES_H_
#define GAPTRAIN_SERVICES_API_MASTER_METRIC_NAMES_H_

#include <string>

namespace gaptrain {
namespace master_metric {

// Histograms, one observation per push (the Gap and the penalty: a push's
// mean over its parameters).
inline constexpr char kStaleness[] = "gaptrain_master_staleness";
inline constexpr char kGap[] = "gaptrain_master_gap";
inline constexpr char kPenaltyFactor[] = "gaptrain_master_penalty_factor";
inline constexpr char kPushDurationSeconds[] = "gaptrain_master_push_duration_seconds";
inline constexpr char kPullDurationSeconds[] = "gaptrain_master_pull_duration_seconds";
inline constexpr char kCheckpointDurationSeconds[] =
    "gaptrain_master_checkpoint_duration_seconds";

// Pushes by kOutcome: kApplied, kAccumulated (sync), kDiscardedLate (sync),
// kDiscardedFinished (after spec.training.maxUpdates).
inline constexpr char kPushesTotal[] = "gaptrain_master_pushes_total";
inline constexpr char kOutcome[] = "outcome";
inline constexpr char kApplied[] = "applied";
inline constexpr char kAccumulated[] = "accumulated";
inline constexpr char kDiscardedLate[] = "discarded_late";
inline constexpr char kDiscardedFinished[] = "discarded_finished";
// Pushes refused before touching the model, by "reason".
inline constexpr char kPushesRejectedTotal[] = "gaptrain_master_pushes_rejected_total";
// Pulls by "result" (sent, not_modified); refused pulls by "reason".
inline constexpr char kPullsTotal[] = "gaptrain_master_pulls_total";
inline constexpr char kPullsRejectedTotal[] = "gaptrain_master_pulls_rejected_total";

// Counters and gauges of this run of the master.
inline constexpr char kReceivedBytesTotal[] = "gaptrain_master_received_bytes_total";
inline constexpr char kSentBytesTotal[] = "gaptrain_master_sent_bytes_total";
inline constexpr char kModelVersion[] = "gaptrain_master_model_version";
inline constexpr char kLearningRate[] = "gaptrain_master_learning_rate";
inline constexpr char kLiveWorkers[] = "gaptrain_master_live_workers";
inline constexpr char kCheckpointsTotal[] = "gaptrain_master_checkpoints_total";
inline constexpr char kCheckpointFailuresTotal[] = "gaptrain_master_checkpoint_failures_total";
inline constexpr char kBufferMergesTotal[] = "gaptrain_master_buffer_merges_total";
inline constexpr char kLastCheckpointTimestampSeconds[] =
    "gaptrain_master_last_checkpoint_timestamp_seconds";
inline constexpr char kCheckpointIntervalSeconds[] =
    "gaptrain_master_checkpoint_interval_seconds";
inline constexpr char kStartTimeSeconds[] = "gaptrain_master_start_time_seconds";
inline constexpr char kFirstUpdateSeconds[] = "gaptrain_master_first_update_seconds";

// The job's totals over every run of its master (the push ledger).
inline constexpr char kJobPushes[] = "gaptrain_master_job_pushes";
inline constexpr char kJobPushesRejected[] = "gaptrain_master_job_pushes_rejected";
inline constexpr char kJobUpdates[] = "gaptrain_master_job_updates";
inline constexpr char kJobUpdatesLost[] = "gaptrain_master_job_updates_lost";
inline constexpr char kJobRestarts[] = "gaptrain_master_job_restarts";

// Per "tensor" moving averages, and per live "worker" staleness.
inline constexpr char kTensorGap[] = "gaptrain_master_tensor_gap";
inline constexpr char kTensorPenaltyFactor[] = "gaptrain_master_tensor_penalty_factor";
inline constexpr char kWorkerStaleness[] = "gaptrain_master_worker_staleness";

// NAME_sum and NAME_count of the histogram NAME.
inline std::string HistogramSum(const char* histogram) {
  return std::string(histogram) + "_sum";
}
inline std::string HistogramCount(const char* histogram) {
  return std::string(histogram) + "_count";
}

// NAME{LABEL="VALUE"}.
inline std::string Series(const char* name, const char* label, const char* value) {
  return std::string(name) + "{" + label + "=\"" + value + "\"}";
}

}  // namespace master_metric
}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_API_MASTER_METRIC_NAMES_H_
