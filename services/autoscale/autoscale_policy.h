// DecideTrainers: how many trainers an asynchronous job should run next,
// from what it measured at its current number (spec.workers.autoscale).
// One pure function, used alike by the simulator (virtual time), `gaptrain
// run` (processes) and the operator (the scale subresource), so the three
// cannot disagree.
//
// Why the Gap: one more asynchronous worker adds updates/s but makes every
// push staler. Gap-Aware measures what that staleness costs, as the mean
// per-parameter Gap G = 1 + |Δ|/C of recent pushes (docs/algorithms.md):
// it grows with N − 1 and falls when the learning rate decays. The policy
// projects G − 1 in proportion to N − 1, which overestimates the growth
// when G is above 1 already at one trainer (GA+DANA measures Δ against its
// look-ahead point): conservative for growing. The policy keeps the projected Gap under maxGap and
// keeps a growth only while the added trainers still add updates/s (a master or a network that
// saturates), in the spirit of Pollux's goodput, for asynchronous training.
//
// The rules, in order (docs/operator.md, "Autoscaling"):
//   1. no push measured in the window: hold;
//   2. mean Gap above maxGap: shrink to the largest N whose projected Gap
//      1 + (G − 1)(N − 1)/(N₀ − 1) is at most maxGap (at least one fewer);
//   3. trainers wanted but not running (Pending: no capacity yet, or being
//      replaced after a preemption) or preempted in the window: hold; the
//      window says nothing about N trainers;
//   4. the last growth, from n to N, added less than minGain of one
//      trainer's updates/s per added trainer: back to n, and never N again;
//   5. room under maxGap: grow, at most doubling, to the largest N whose
//      projected Gap stays under 1 + 0.9 (maxGap − 1) (a margin, so a
//      growth is not undone by noise); from one trainer, where there is no
//      staleness to project from, double while the Gap is under that;
//   6. otherwise hold.
// Every result lies in [spec.Floor(), spec.Ceiling()]. What the caller
// must keep between decisions is AutoscaleMemory (the operator keeps it in
// the job's status, so a new leader decides as the old one would have).

#ifndef GAPTRAIN_SERVICES_AUTOSCALE_AUTOSCALE_POLICY_H_
#define GAPTRAIN_SERVICES_AUTOSCALE_AUTOSCALE_POLICY_H_

#include <cstdint>
#include <string>

#include "services/api/training_job.h"

namespace gaptrain {

// What happened since the last decision, at `replicas` trainers wanted.
struct AutoscaleWindow {
  uint32_t replicas = 0;     // trainers wanted (spec.workers.replicas)
  uint32_t running = 0;      // of those, running now
  uint32_t preemptions = 0;  // trainers preempted during the window
  double seconds = 0;        // the window's length
  double updates = 0;        // master updates during the window
  double gap_sum = 0;        // sum and count of the pushes' mean Gaps
  double gap_count = 0;

  double UpdatesPerSecond() const { return seconds > 0 ? updates / seconds : 0; }
  double MeanGap() const { return gap_count > 0 ? gap_sum / gap_count : 1; }
};

// Cumulative counts read at one moment; a window is the difference of two
// readings.
struct AutoscaleReading {
  double seconds = 0;        // when, on any clock the two readings share
  double model_version = 0;  // the master's updates so far
  double gap_sum = 0;        // the master's Gap histogram so far
  double gap_count = 0;
  uint64_t preemptions = 0;  // trainers preempted so far
};

// The window from `start` to `now`, `replicas` wanted and `running` of them
// running. False, leaving *window alone, when `now` is earlier or a master
// counter went down (the master restarted and restored a checkpoint): the
// caller begins a new window at `now`, without a decision.
bool MeasureWindow(const AutoscaleReading& start, const AutoscaleReading& now, uint32_t replicas,
                   uint32_t running, AutoscaleWindow* window);

// Kept from one decision to the next.
struct AutoscaleMemory {
  uint32_t grown_from = 0;    // N before the last decision, when it grew; else 0
  double rate_before = 0;     // updates/s measured at grown_from
  uint32_t unprofitable = 0;  // the smallest N a growth to did not pay; 0: none
};

struct AutoscaleDecision {
  enum class Action { kHold, kGrow, kShrink };
  Action action = Action::kHold;
  uint32_t replicas = 0;  // the number to run next
  // Event reason: "ScaledUp", "ScaledDown" or "Holding".
  const char* Reason() const;
  // Why, in a sentence that names the measurements: "Gap 1.21 leaves room
  // under maxGap 1.5 (projected 1.42 at 8): 4 -> 8 trainers".
  std::string message;
};

// `workers.autoscale` must be enabled and `workers` valid (ParseTrainingJob
// checked it). Updates *memory.
AutoscaleDecision DecideTrainers(const WorkersSpec& workers, const AutoscaleWindow& window,
                                 AutoscaleMemory* memory);

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_AUTOSCALE_AUTOSCALE_POLICY_H_
