#include "services/master/master_metrics.h"

#include <algorithm>
#include <limits>
#include <set>
#include <string>

#include "services/api/master_metric_names.h"

namespace gaptrain {
namespace {

// Per-tensor Gap and penalty are exported as exponential moving averages
// over pushes: a scrape sees recent behaviour, not one push's noise.
constexpr double kTensorSmoothing = 0.05;

prometheus::Histogram* Histogram(prometheus::Registry& r, const std::string& name,
                                 const std::string& help,
                                 const prometheus::Histogram::BucketBoundaries& buckets) {
  return &prometheus::BuildHistogram().Name(name).Help(help).Register(r).Add({}, buckets);
}

prometheus::Counter* Counter(prometheus::Registry& r, const std::string& name,
                             const std::string& help) {
  return &prometheus::BuildCounter().Name(name).Help(help).Register(r).Add({});
}

prometheus::Gauge* Gauge(prometheus::Registry& r, const std::string& name,
                         const std::string& help) {
  return &prometheus::BuildGauge().Name(name).Help(help).Register(r).Add({});
}

}  // namespace

MasterMetrics::MasterMetrics(std::shared_ptr<prometheus::Registry> registry,
                             const ParameterLayout& layout)
    : registry_(std::move(registry)) {
  prometheus::Registry& r = *registry_;
  staleness_ = Histogram(r, master_metric::kStaleness,
                         "Staleness tau of each push: updates applied since the worker pulled.",
                         {0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024});
  gap_ = Histogram(r, master_metric::kGap,
                   "Mean Gap G = 1 + |theta - theta_i| / C of each push (Gap rules).",
                   {1, 1.1, 1.25, 1.5, 2, 3, 5, 10, 20, 50, 100, 1000});
  penalty_ = Histogram(r, master_metric::kPenaltyFactor,
                       "Mean factor each push's gradient was scaled by (1 = none).",
                       {0.001, 0.01, 0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 0.9, 0.99, 1});
  push_seconds_ = Histogram(r, master_metric::kPushDurationSeconds,
                            "Push latency from the first chunk to the reply.",
                            prometheus::Histogram::BucketBoundaries{
                                0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                                1, 2.5, 5});
  pull_seconds_ = Histogram(r, master_metric::kPullDurationSeconds,
                            "Pull latency until the last chunk is written.",
                            prometheus::Histogram::BucketBoundaries{
                                0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                                1, 2.5, 5});
  auto& pushes = prometheus::BuildCounter()
                     .Name(master_metric::kPushesTotal)
                     .Help("Pushes by outcome: applied, accumulated (sync), discarded_late "
                           "(sync), discarded_finished (after maxUpdates), rejected (see "
                           "gaptrain_master_pushes_rejected_total).")
                     .Register(r);
  applied_ = &pushes.Add({{master_metric::kOutcome, master_metric::kApplied}});
  accumulated_ = &pushes.Add({{master_metric::kOutcome, master_metric::kAccumulated}});
  discarded_late_ = &pushes.Add({{master_metric::kOutcome, master_metric::kDiscardedLate}});
  discarded_finished_ =
      &pushes.Add({{master_metric::kOutcome, master_metric::kDiscardedFinished}});
  auto& rejected = prometheus::BuildCounter()
                       .Name(master_metric::kPushesRejectedTotal)
                       .Help("Pushes rejected before touching the model, by reason.")
                       .Register(r);
  for (size_t i = 0; i < rejected_.size(); ++i) {
    rejected_[i] = &rejected.Add({{"reason", RejectReasonName(static_cast<RejectReason>(i))}});
  }
  auto& pulls = prometheus::BuildCounter()
                    .Name(master_metric::kPullsTotal)
                    .Help("Pulls; not_modified when the worker already held the version.")
                    .Register(r);
  pulls_ = &pulls.Add({{"result", "sent"}});
  pulls_not_modified_ = &pulls.Add({{"result", "not_modified"}});
  auto& pulls_rejected = prometheus::BuildCounter()
                             .Name(master_metric::kPullsRejectedTotal)
                             .Help("Pulls refused, by reason.")
                             .Register(r);
  pulls_malformed_ = &pulls_rejected.Add({{"reason", RejectReasonName(RejectReason::kMalformed)}});
  pulls_unknown_worker_ =
      &pulls_rejected.Add({{"reason", RejectReasonName(RejectReason::kUnknownWorker)}});
  received_bytes_ = Counter(r, master_metric::kReceivedBytesTotal,
                            "Gradient and echo payload bytes received.");
  sent_bytes_ = Counter(r, master_metric::kSentBytesTotal, "Parameter payload bytes sent.");
  version_ = Gauge(r, master_metric::kModelVersion, "Model version (updates applied).");
  learning_rate_ = Gauge(r, master_metric::kLearningRate, "Learning rate of the next update.");
  live_workers_ = Gauge(r, master_metric::kLiveWorkers, "Workers the master holds state for.");
  checkpoints_ = Counter(r, master_metric::kCheckpointsTotal, "Checkpoints written.");
  checkpoint_failures_ = Counter(r, master_metric::kCheckpointFailuresTotal,
                                 "Checkpoint attempts that failed.");
  buffer_merges_ = Counter(r, master_metric::kBufferMergesTotal,
                           "Trainers' module buffers (BatchNorm statistics) folded in.");
  last_checkpoint_time_ = Gauge(r, master_metric::kLastCheckpointTimestampSeconds,
                                "Unix time of the last checkpoint written (or resumed from).");
  checkpoint_interval_ = Gauge(r, master_metric::kCheckpointIntervalSeconds,
                               "The job's spec.master.checkpoint.intervalSeconds.");
  start_time_ = Gauge(r, master_metric::kStartTimeSeconds,
                      "Unix time this master process started.");
  checkpoint_seconds_ = Histogram(r, master_metric::kCheckpointDurationSeconds,
                                  "Time to write a checkpoint.",
                                  {0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60});
  first_update_seconds_ = Gauge(r, master_metric::kFirstUpdateSeconds,
                                "Seconds from this run serving to its first applied update "
                                "(NaN until then): how soon workers came back after a restart.");
  first_update_seconds_->Set(std::numeric_limits<double>::quiet_NaN());
  // Gauges, not counters: they come from the ledger file, continue across
  // runs, and a run starts from the values its predecessor left.
  job_pushes_ = Gauge(r, master_metric::kJobPushes,
                      "Pushes answered (accepted or refused) by every run of the job's master.");
  job_rejected_ = Gauge(r, master_metric::kJobPushesRejected,
                        "Pushes refused by every run of the job's master.");
  job_updates_ = Gauge(r, master_metric::kJobUpdates,
                       "Updates (version increments) applied by every run of the job's master.");
  job_updates_lost_ = Gauge(r, master_metric::kJobUpdatesLost,
                            "Updates lost when a run resumed from a checkpoint older than its "
                            "predecessor's last update.");
  job_restores_ = Gauge(r, master_metric::kJobRestarts,
                        "Runs of the job's master that followed an earlier one.");

  tensor_gap_family_ = &prometheus::BuildGauge()
                            .Name(master_metric::kTensorGap)
                            .Help("Mean Gap per tensor (moving average over pushes).")
                            .Register(r);
  tensor_penalty_family_ = &prometheus::BuildGauge()
                                .Name(master_metric::kTensorPenaltyFactor)
                                .Help("Mean penalty factor per tensor (moving average).")
                                .Register(r);
  for (const TensorSpec& t : layout.tensors()) {
    tensor_gap_.push_back(&tensor_gap_family_->Add({{"tensor", t.name}}));
    tensor_penalty_.push_back(&tensor_penalty_family_->Add({{"tensor", t.name}}));
  }
  tensor_gap_avg_.assign(layout.num_tensors(), 1.0);
  tensor_penalty_avg_.assign(layout.num_tensors(), 1.0);
  worker_staleness_family_ = &prometheus::BuildGauge()
                                  .Name(master_metric::kWorkerStaleness)
                                  .Help("Staleness of each live worker's last push.")
                                  .Register(r);
}

void MasterMetrics::RecordPush(const ApplyStats& stats, double seconds) {
  push_seconds_->Observe(seconds);
  switch (stats.outcome) {
    case ApplyStats::Outcome::kApplied: applied_->Increment(); break;
    case ApplyStats::Outcome::kAccumulated: accumulated_->Increment(); break;
    case ApplyStats::Outcome::kDiscardedLate:
      discarded_late_->Increment();
      return;
    case ApplyStats::Outcome::kDiscardedFinished:
      discarded_finished_->Increment();
      return;
  }
  staleness_->Observe(static_cast<double>(stats.staleness));
  penalty_->Observe(stats.penalty_mean);
  if (stats.has_gap) gap_->Observe(stats.gap.gap_mean);

  std::lock_guard<std::mutex> lock(mu_);
  if (stats.has_gap && stats.per_tensor.size() == tensor_gap_.size()) {
    const double a = have_tensor_avg_ ? kTensorSmoothing : 1.0;
    for (size_t t = 0; t < tensor_gap_.size(); ++t) {
      tensor_gap_avg_[t] += a * (stats.per_tensor[t].gap_mean - tensor_gap_avg_[t]);
      tensor_penalty_avg_[t] += a * (stats.per_tensor[t].penalty_mean - tensor_penalty_avg_[t]);
      tensor_gap_[t]->Set(tensor_gap_avg_[t]);
      tensor_penalty_[t]->Set(tensor_penalty_avg_[t]);
    }
    have_tensor_avg_ = true;
  }
}

void MasterMetrics::SetWorkerStaleness(WorkerId worker, const ApplyStats& stats) {
  if (stats.outcome == ApplyStats::Outcome::kDiscardedLate ||
      stats.outcome == ApplyStats::Outcome::kDiscardedFinished) {
    return;
  }
  std::lock_guard<std::mutex> lock(mu_);
  auto it = worker_staleness_.find(worker);
  if (it == worker_staleness_.end()) {
    it = worker_staleness_
             .emplace(worker, &worker_staleness_family_->Add({{"worker", std::to_string(worker)}}))
             .first;
  }
  it->second->Set(static_cast<double>(stats.staleness));
}

void MasterMetrics::RecordPullRejected(RejectReason reason) {
  (reason == RejectReason::kUnknownWorker ? pulls_unknown_worker_ : pulls_malformed_)->Increment();
}

void MasterMetrics::RecordRejected(RejectReason reason) {
  rejected_[static_cast<size_t>(reason)]->Increment();
}

void MasterMetrics::RecordPull(double seconds, bool had_payload) {
  pull_seconds_->Observe(seconds);
  (had_payload ? pulls_ : pulls_not_modified_)->Increment();
}

void MasterMetrics::SetModel(uint64_t version, double learning_rate, size_t live_workers) {
  version_->Set(static_cast<double>(version));
  learning_rate_->Set(learning_rate);
  live_workers_->Set(static_cast<double>(live_workers));
}

void MasterMetrics::SetStart(double unix_seconds, double checkpoint_interval_seconds) {
  start_time_->Set(unix_seconds);
  checkpoint_interval_->Set(checkpoint_interval_seconds);
}

void MasterMetrics::RecordCheckpoint(double unix_seconds, double seconds) {
  checkpoints_->Increment();
  last_checkpoint_time_->Set(unix_seconds);
  checkpoint_seconds_->Observe(seconds);
}

void MasterMetrics::SetJobTotals(uint64_t pushes, uint64_t rejected, uint64_t updates,
                                 uint64_t updates_lost, uint64_t restores) {
  job_pushes_->Set(static_cast<double>(pushes));
  job_rejected_->Set(static_cast<double>(rejected));
  job_updates_->Set(static_cast<double>(updates));
  job_updates_lost_->Set(static_cast<double>(updates_lost));
  job_restores_->Set(static_cast<double>(restores));
}

void MasterMetrics::SetMembers(const std::vector<WorkerId>& members) {
  std::set<WorkerId> live(members.begin(), members.end());
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = worker_staleness_.begin(); it != worker_staleness_.end();) {
    if (live.count(it->first) == 0) {
      worker_staleness_family_->Remove(it->second);
      it = worker_staleness_.erase(it);
    } else {
      ++it;
    }
  }
}

}  // namespace gaptrain
