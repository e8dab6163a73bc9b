// LocalAutoscaler: spec.workers.autoscale for `gaptrain run`. Once a tick
// the launcher passes what it observed: the master's counters, the trainers
// running, the trainers lost so far. Every intervalSeconds this measures
// the window since the last decision, asks DecideTrainers
// (services/autoscale, the policy the simulator and the operator share)
// how many trainers to run next, keeps its memory between decisions, and
// lists the changes for the summary. It only decides; the launcher starts
// and stops the processes (TrainerSlotsToChange says which). No clock, no
// processes: a test replays a run's observations exactly. Not thread-safe.
//
// The window, as DecideTrainers gets it (AutoscaleWindow):
//   - It begins at the first observation with the master's counters and
//     ends at the first observation at least intervalSeconds later, which
//     decides; the next window begins at that same observation.
//   - replicas is the N wanted during the window; seconds its length;
//     updates, gap_sum and gap_count what the master's version and Gap
//     histogram moved by.
//   - running is the fewest trainers running at any observation of the
//     window, its first and last included: a window in which a trainer was
//     still starting, or down, did not see N trainers at work.
//   - preemptions is the trainers lost (killed, crashed) during the window.
//   - A master counter that went down (the master restarted and restored a
//     checkpoint) begins the window again at that observation, without a
//     decision. An observation without the master's counters (the master
//     down) counts towards `running` only.

#ifndef GAPTRAIN_CLI_RUN_LOCAL_AUTOSCALER_H_
#define GAPTRAIN_CLI_RUN_LOCAL_AUTOSCALER_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "cli/run/run_report.h"
#include "services/api/training_job.h"
#include "services/autoscale/autoscale_policy.h"

namespace gaptrain {

// What the launcher saw at one tick.
struct AutoscaleObservation {
  double seconds = 0;             // since the run started; never decreasing
  bool master_reachable = false;  // and `master` was read from its /metrics now
  MasterCounters master;
  uint32_t running = 0;        // trainers alive and registered with the coordinator
  uint64_t trainers_lost = 0;  // trainers killed or crashed since the run started
};

class LocalAutoscaler {
 public:
  // `workers.autoscale.enabled`, and `workers` valid (ParseTrainingJob
  // checked it). N starts at workers.replicas.
  explicit LocalAutoscaler(const WorkersSpec& workers);

  // Takes one observation. True when it ended a window: *decision is
  // DecideTrainers's (a hold included) and replicas() its N; a decision
  // that changed N is appended to changes() with the observation's time.
  bool Observe(const AutoscaleObservation& observation, AutoscaleDecision* decision);

  // The number of trainers wanted now.
  uint32_t replicas() const { return replicas_; }
  const std::vector<AutoscaleChange>& changes() const { return changes_; }

 private:
  void BeginWindow(const AutoscaleObservation& observation);

  WorkersSpec workers_;
  uint32_t replicas_;
  AutoscaleMemory memory_;
  bool window_open_ = false;
  AutoscaleObservation window_start_;
  uint32_t fewest_running_ = 0;
  std::vector<AutoscaleChange> changes_;
};

// The trainer slots (trainer-0, trainer-1, ...) a change from `from` to
// `to` trainers touches, as a StatefulSet scales: a growth starts slots
// [from, to) in ascending order; a shrink stops slots [to, from), the
// highest first. The slots below both run on.
std::vector<size_t> TrainerSlotsToChange(uint32_t from, uint32_t to);

}  // namespace gaptrain

#endif  // GAPTRAIN_CLI_RUN_LOCAL_AUTOSCALER_H_
