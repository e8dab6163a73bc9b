// What `gaptrain run` tells the user: a live progress line while the job
// runs and a summary at its end, computed from the coordinator's status
// and the master's /metrics. Pure functions of their inputs, so the
// formats are tested without processes.

#ifndef GAPTRAIN_CLI_RUN_RUN_REPORT_H_
#define GAPTRAIN_CLI_RUN_RUN_REPORT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "proto/gaptrain.pb.h"
#include "services/api/training_job.h"
#include "services/net/metrics_text.h"

namespace gaptrain {

// The master's cumulative counters as one scrape of its /metrics shows
// them. A restarted master's start again from zero (its version from the
// checkpoint it restored).
struct MasterCounters {
  double pushes_accepted = 0;  // applied or accumulated
  double staleness_sum = 0, staleness_count = 0;
  double gap_sum = 0, gap_count = 0;  // 0 under rules that compute no Gap
  double model_version = -1;          // -1: the page has none
};

// A series the page lacks reads as 0; values are as the page wrote them
// (NaN included).
MasterCounters ReadMasterCounters(const MetricsSample& master_metrics);

// The same of a job whose θ several masters hold (spec.master.shards),
// from every shard's totals in the coordinator's status: its version (the
// least shard's), and the pushes, staleness and Gap sums weighted by each
// shard's share of θ, so they read as one master's (every push reaches
// every shard). An empty `masters`: nothing known (version -1).
MasterCounters MasterCountersOfShards(const proto::CoordinatorStatusResponse& status);

// The master's counters over the whole run. A restarted master's counters
// start again from zero; a drop is taken as a restart and what was seen
// before it is kept. With several masters (spec.master.shards) each
// shard's are kept so, from the coordinator's status, and the totals are
// their sums weighted by each shard's share of θ: one master's, as
// MasterCountersOfShards says.
class MasterTotals {
 public:
  void Observe(const MetricsSample& master_metrics);
  void ObserveShards(const proto::CoordinatorStatusResponse& status);

  double pushes_accepted() const { return Total(&Shard::pushes); }  // applied or accumulated
  double staleness_sum() const { return Total(&Shard::staleness_sum); }
  double staleness_count() const { return Total(&Shard::staleness_count); }
  double gap_sum() const { return Total(&Shard::gap_sum); }
  double gap_count() const { return Total(&Shard::gap_count); }
  uint64_t model_version() const { return version_; }
  // Means over the run; NaN before the first observation (and for the Gap
  // under rules that compute none).
  double mean_staleness() const;
  double mean_gap() const;

 private:
  struct Counter {
    double base = 0, last = 0;
    void Observe(double value);
    double total() const { return base + last; }
  };
  struct Shard {
    double weight = 1;
    Counter pushes, staleness_sum, staleness_count, gap_sum, gap_count;
    void Observe(const MasterCounters& c);
  };
  double Total(Counter Shard::*counter) const;

  std::vector<Shard> shards_ = std::vector<Shard>(1);
  uint64_t version_ = 0;
};

struct ProgressInput {
  proto::CoordinatorStatusResponse status;
  bool coordinator_reachable = true;
  bool master_reachable = true;
  double elapsed_seconds = 0;
  uint64_t master_version = 0;  // from the master's metrics, when reachable
  double updates_per_second = 0;
  double recent_gap = 0;  // mean Gap of the pushes since the last line; NaN: none
  uint32_t trainers = 0;  // the job's replicas; with autoscale, the current N
  // spec.workers.autoscale: the range N moves in; both 0: not autoscaled.
  uint32_t autoscale_floor = 0, autoscale_ceiling = 0;
  // A trainer silent for more than half its lease is shown apart: its
  // process is gone (killed, preempted) and its lease not yet expired. 0:
  // every live trainer counts.
  double lease_seconds = 0;
  uint64_t chaos_kills = 0;
  TargetSpec target;  // the job's (JobTarget); shown unless it is accuracy
};

// "[1m05s] epoch 2/3 61% | v4210 62 upd/s | loss 0.081 | acc 98.02% |
//  gap 1.31 | trainers 4/4"; with a target on another metric, "| top5
//  0.9312 (>= 0.95)" after acc; and "trainers 4/4 (+1 silent)" while a killed
//  trainer's lease runs out; autoscaled, "trainers 2/2 (autoscale 1-4)"
std::string ProgressLine(const ProgressInput& input);

// One fault `gaptrain run --chaos` injected, or a restart it made.
struct ChaosFault {
  double at_seconds = 0;  // since the run started
  std::string fault;      // SIGTERM | SIGKILL | restart
  std::string target;     // trainer-N | master
};

// A decision of spec.workers.autoscale that changed the number of trainers.
struct AutoscaleChange {
  double at_seconds = 0;  // since the run started
  std::string reason;     // ScaledUp | ScaledDown
  uint32_t from = 0, to = 0;
  std::string message;  // DecideTrainers's sentence, naming the measurements
};

struct RunSummary {
  std::string job_name;
  std::string outcome;  // Succeeded | Failed | Interrupted | Error
  std::string reason;   // the coordinator's, e.g. EpochsCompleted
  std::string message;
  double seconds = 0;
  bool has_accuracy = false;
  double accuracy = 0, eval_loss = 0;
  // The same evaluation's other metrics (the user's eval_fn's), and the
  // job's target ("perplexity <= 20"; "" = none).
  std::vector<proto::EvalMetric> eval_metrics;
  std::string target;
  uint64_t eval_version = 0;
  uint64_t version = 0;  // master updates
  double pushes_accepted = 0, mean_staleness = 0, mean_gap = 0;
  uint64_t joined = 0, preempted = 0, lease_expiries = 0, failed = 0;
  uint64_t tasks_reassigned = 0;
  uint64_t tasks_released = 0;  // handed back by trainers whose data was unavailable
  uint64_t chaos_sigterms = 0, chaos_sigkills = 0, master_restarts = 0;
  double chaos_started_at = -1;  // the first trainer's registration; < 0: never
  std::vector<ChaosFault> chaos_faults;
  // The master's push ledger over all its runs (PushLedger); absent when
  // the run has none.
  bool has_ledger = false;
  uint64_t ledger_pushes = 0, ledger_rejected = 0, ledger_updates = 0, ledger_updates_lost = 0;
  uint64_t ledger_restores = 0;
  // Work a master restore lost, done again (the coordinator's counts).
  uint64_t tasks_retrained = 0, samples_retrained = 0;
  uint64_t worker_restarts = 0;  // after crashes (restartPolicy)
  // spec.workers.autoscale (the rest unset when not enabled): its range
  // [minReplicas, maxReplicas], N when the run ended, the most trainers the
  // coordinator listed live at once, and the changes in order.
  bool autoscaled = false;
  uint32_t autoscale_floor = 0, autoscale_ceiling = 0;
  uint32_t trainers_at_end = 0;
  uint32_t max_live_trainers = 0;
  std::vector<AutoscaleChange> autoscale_changes;
  std::string checkpoint;        // the final checkpoint's path; "" if none
  std::string run_dir;
};

std::string SummaryText(const RunSummary& summary);
std::string SummaryJson(const RunSummary& summary);

// "1m05s", "42s", "2h03m".
std::string FormatDuration(double seconds);
// "Succeeded" for JOB_PHASE_SUCCEEDED.
std::string PhaseName(proto::JobPhase phase);

}  // namespace gaptrain

#endif  // GAPTRAIN_CLI_RUN_RUN_REPORT_H_
