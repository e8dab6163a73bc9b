// MasterMetrics: what the master exports on /metrics (docs/metrics.md):
// staleness, Gap and penalty per push (histograms), per-tensor Gap and
// penalty (so a user sees which layers suffer), push outcomes, traffic,
// latency, model version, learning rate, live workers and checkpoints;
// the job's push accounting over every run of the master (PushLedger) and
// how soon a restarted master applied its first update.
// Per-worker series exist only for live workers.
//
// Thread-safe: prometheus-cpp metrics are atomic; the per-worker and
// per-tensor maps are guarded here.

#ifndef GAPTRAIN_SERVICES_MASTER_MASTER_METRICS_H_
#define GAPTRAIN_SERVICES_MASTER_MASTER_METRICS_H_

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <array>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "services/engine/apply_stats.h"
#include "services/engine/parameter_layout.h"
#include "services/engine/parameter_store.h"
#include "services/engine/update_engine.h"

namespace gaptrain {

class MasterMetrics {
 public:
  MasterMetrics(std::shared_ptr<prometheus::Registry> registry, const ParameterLayout& layout);

  const std::shared_ptr<prometheus::Registry>& registry() const { return registry_; }

  // One push that passed validation, with what the engine reported.
  void RecordPush(const ApplyStats& stats, double seconds);
  // The worker's staleness gauge. Calls of this and SetMembers must come in
  // the order the engine saw the push and the membership change (the
  // master makes both under its engine mutex), so a series dropped for a
  // worker that left is never re-created by a push that finished late.
  void SetWorkerStaleness(WorkerId worker, const ApplyStats& stats);
  void RecordRejected(RejectReason reason);
  void RecordPull(double seconds, bool had_payload);
  // A pull refused: kMalformed or kUnknownWorker.
  void RecordPullRejected(RejectReason reason);
  void AddReceivedBytes(uint64_t bytes) { received_bytes_->Increment(static_cast<double>(bytes)); }
  void AddSentBytes(uint64_t bytes) { sent_bytes_->Increment(static_cast<double>(bytes)); }
  void SetModel(uint64_t version, double learning_rate, size_t live_workers);
  // When the master started and how often it checkpoints, so an alert can
  // tell an overdue checkpoint from a master that has not run one interval.
  void SetStart(double unix_seconds, double checkpoint_interval_seconds);
  // The checkpoint a restarted master resumed from is its last one.
  void RecordRestoredCheckpoint(double unix_seconds) { last_checkpoint_time_->Set(unix_seconds); }
  void RecordCheckpoint(double unix_seconds, double seconds);
  void RecordCheckpointFailure() { checkpoint_failures_->Increment(); }
  void RecordBufferMerge() { buffer_merges_->Increment(); }
  // Drops series of workers that left.
  void SetMembers(const std::vector<WorkerId>& members);
  // Seconds from serving to the first update this run applied.
  void SetFirstUpdateSeconds(double seconds) { first_update_seconds_->Set(seconds); }
  // The job's totals over every run of the master (PushLedger).
  void SetJobTotals(uint64_t pushes, uint64_t rejected, uint64_t updates, uint64_t updates_lost,
                    uint64_t restores);

 private:
  std::shared_ptr<prometheus::Registry> registry_;

  prometheus::Histogram* staleness_;
  prometheus::Histogram* gap_;
  prometheus::Histogram* penalty_;
  prometheus::Histogram* push_seconds_;
  prometheus::Histogram* pull_seconds_;
  prometheus::Counter* applied_;
  prometheus::Counter* accumulated_;
  prometheus::Counter* discarded_late_;
  prometheus::Counter* discarded_finished_;
  std::array<prometheus::Counter*, static_cast<size_t>(RejectReason::kNumReasons)> rejected_;
  prometheus::Counter* pulls_;
  prometheus::Counter* pulls_not_modified_;
  prometheus::Counter* pulls_malformed_;
  prometheus::Counter* pulls_unknown_worker_;
  prometheus::Counter* received_bytes_;
  prometheus::Counter* sent_bytes_;
  prometheus::Gauge* version_;
  prometheus::Gauge* learning_rate_;
  prometheus::Gauge* live_workers_;
  prometheus::Counter* checkpoints_;
  prometheus::Counter* checkpoint_failures_;
  prometheus::Counter* buffer_merges_;
  prometheus::Gauge* last_checkpoint_time_;
  prometheus::Gauge* checkpoint_interval_;
  prometheus::Gauge* start_time_;
  prometheus::Histogram* checkpoint_seconds_;
  prometheus::Gauge* first_update_seconds_;
  prometheus::Gauge* job_pushes_;
  prometheus::Gauge* job_rejected_;
  prometheus::Gauge* job_updates_;
  prometheus::Gauge* job_updates_lost_;
  prometheus::Gauge* job_restores_;

  // Per tensor: moving averages (weight kTensorSmoothing per push).
  prometheus::Family<prometheus::Gauge>* tensor_gap_family_;
  prometheus::Family<prometheus::Gauge>* tensor_penalty_family_;
  std::vector<prometheus::Gauge*> tensor_gap_;
  std::vector<prometheus::Gauge*> tensor_penalty_;

  prometheus::Family<prometheus::Gauge>* worker_staleness_family_;
  std::mutex mu_;  // guards the maps below and the per-tensor averages
  std::map<WorkerId, prometheus::Gauge*> worker_staleness_;
  std::vector<double> tensor_gap_avg_;
  std::vector<double> tensor_penalty_avg_;
  bool have_tensor_avg_ = false;
};

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_MASTER_MASTER_METRICS_H_
