// JobRunner: `gaptrain run`'s supervisor. It starts a LocalJob, then once a
// second reads the coordinator's status and the master's /metrics, prints
// the progress line, restarts processes that crashed (the job's
// restartPolicy and backoffLimit, as the operator does, during start-up
// or later), carries out the chaos monkey's faults (its clock starts at the
// first trainer's registration; summary.json lists each fault with its
// time), scales the trainers as spec.workers.autoscale decides
// (LocalAutoscaler: new trainers start as trainer-N, N the next slot; a
// shrink sends SIGTERM to the highest-numbered ones, which hand their
// tasks back and leave: neither restarted nor counted as failures; each
// change is printed and listed in the summary), and ends the run:
//   - when the job succeeds or fails: it waits for the workers to leave
//     (the evaluator scores the final model first);
//   - on SIGINT or SIGTERM: the workers are stopped with SIGTERM (they
//     leave as preempted), then the master, which writes a final
//     checkpoint; `gaptrain run --resume` continues from there.
// Either way the master and the coordinator are stopped last, the summary
// is printed and written to summary.json, and no child outlives the
// launcher.

#ifndef GAPTRAIN_CLI_RUN_JOB_RUNNER_H_
#define GAPTRAIN_CLI_RUN_JOB_RUNNER_H_

#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cli/run/chaos_monkey.h"
#include "cli/run/local_autoscaler.h"
#include "cli/run/local_job.h"
#include "cli/run/run_dir.h"
#include "cli/run/run_report.h"
#include "services/api/training_job.h"
#include "services/coordinator/coordinator_client.h"
#include "services/jobplan/restart_rule.h"

namespace gaptrain {

class JobRunner {
 public:
  struct Options {
    ChaosOptions chaos;          // disabled by default
    bool live_line = false;      // rewrite one line in place (a terminal)
    double print_every_seconds = 10;  // without live_line
  };

  // `run_dir` and `job` must outlive the runner; `local` is its options
  // (run_dir, token, binaries...). Output goes to `out`.
  JobRunner(const TrainingJob& job, RunDir* run_dir, LocalJob::Options local, Options options,
            std::FILE* out);

  // Runs the job to its end; fills *summary. The exit code: 0 succeeded,
  // 1 failed (or could not run), 130 interrupted.
  int Run(RunSummary* summary);

 private:
  double Elapsed() const;
  // Reads the coordinator's status and the master's metrics.
  void Observe();
  // Restarts crashed processes; false when the restart budget is spent.
  bool Supervise();
  void ApplyChaos();
  // Feeds the autoscaler this tick's observation and applies its decision.
  void Autoscale();
  // Starts trainer `slot` for a growth (after the SIGTERM'd process there
  // left, if one is still leaving); stops it for a shrink.
  bool StartScaledTrainer(size_t slot);
  void StopScaledTrainer(size_t slot);
  // Whether the coordinator lists trainer `index`'s current process.
  bool TrainerRegistered(size_t index) const;
  // Trainers alive, registered, and neither killed by chaos nor stopped by
  // the autoscaler.
  uint32_t RunningTrainers();
  // The trainers the job wants now: replicas, or the autoscaler's N.
  uint32_t WantedTrainers() const;
  void PrintProgress(bool force);
  bool WorkersGone();
  // Stops everything in order and fills *summary.
  void Finish(bool interrupted, RunSummary* summary);
  // After a process ended on its own: counts the failure against
  // backoffLimit and restarts it, as the restart rules (services/jobplan,
  // the operator's too) decide. False when the run ends: the limit is
  // spent, too few trainers can still run, or it cannot be restarted.
  bool RestartAfterFailure(JobProcess process, const std::string& service, Process* ended,
                           const std::function<Status()>& start);
  bool RestartTrainerAfterFailure(size_t index);
  // Whether the job's losses so far end it (services/jobplan); sets
  // error_ and failure_reason_ when they do. `service`: the last lost.
  bool FailedAfterLosses(const std::string& service);
  void Say(const std::string& line);
  // The highest worker id in the last status (0: none).
  uint32_t HighestWorkerId() const;

  const TrainingJob& job_;
  RunDir* run_dir_;
  Options options_;
  std::FILE* out_;
  LocalJob local_;
  ChaosMonkey monkey_;
  std::unique_ptr<CoordinatorClient> coordinator_;

  std::chrono::steady_clock::time_point start_;
  proto::CoordinatorStatusResponse status_;
  bool coordinator_reachable_ = false;
  bool master_reachable_ = false;
  MasterTotals totals_;
  MasterCounters master_counters_;  // the last scrape's, when master_reachable_

  struct TrainerSlot {
    bool down_by_chaos = false;
    bool scaled_away = false;  // stopped by the autoscaler: not restarted
    bool given_up = false;     // crashed and not restarted (restartPolicy)
    // Its current process registered once the coordinator lists its host
    // with an id above this (the highest id seen when it was started).
    uint32_t registered_above = 0;
  };
  std::vector<TrainerSlot> trainer_slots_;       // one per LocalJob trainer
  std::unique_ptr<LocalAutoscaler> autoscaler_;  // null unless autoscale is enabled
  uint64_t trainers_lost_ = 0;                   // killed by chaos or crashed
  uint32_t max_live_trainers_ = 0;               // the coordinator's count, over the run
  bool master_down_by_chaos_ = false;
  bool evaluator_given_up_ = false;  // crashed and not restarted (restartPolicy)
  uint64_t failures_ = 0;  // crashes, against backoffLimit
  uint64_t permanently_failed_trainers_ = 0;  // crashed and not restarted
  uint64_t master_restarts_ = 0;
  uint64_t worker_restarts_ = 0;
  std::string error_;  // why the run ends early, if it does
  // With error_: the job failed by its losses (BackoffLimitExceeded,
  // TrainingJobFailed), as the operator would fail it.
  std::string failure_reason_;

  // For rates between two progress lines.
  double last_print_ = -1e9;
  double last_rate_time_ = 0;
  uint64_t last_rate_version_ = 0;
  double last_gap_sum_ = 0, last_gap_count_ = 0;
  bool live_line_open_ = false;
};

}  // namespace gaptrain

#endif  // GAPTRAIN_CLI_RUN_JOB_RUNNER_H_
