// ApplyStats: what applying one push did, as the master exports it
// (staleness, Gap and penalty; docs/metrics.md).

#ifndef GAPTRAIN_SERVICES_ENGINE_APPLY_STATS_H_
#define GAPTRAIN_SERVICES_ENGINE_APPLY_STATS_H_

#include <cstdint>
#include <vector>

namespace gaptrain {

// A parameter counts as penalised when G >= kPenalisedGap, i.e. it moved at
// least one typical step C since the worker's copy (its gradient is at
// least halved).
inline constexpr float kPenalisedGap = 2.0f;

// Gap statistics over a set of parameters (one tensor, or the whole model).
struct GapStats {
  double gap_mean = 1.0;            // mean G
  double gap_max = 1.0;             // max G
  double penalty_mean = 1.0;        // mean factor 1/G applied to the gradient
  double penalised_fraction = 0.0;  // fraction with G >= kPenalisedGap
};

struct ApplyStats {
  enum class Outcome {
    kApplied,        // θ changed and the version advanced
    kAccumulated,    // sync: buffered for the current step
    kDiscardedLate,  // sync: the gradient was for an earlier step
    kDiscardedFinished,  // θ is at the job's maxUpdates: nothing more is applied
  };
  Outcome outcome = Outcome::kApplied;
  uint64_t staleness = 0;      // τ = t − s at arrival
  double learning_rate = 0.0;  // η of the update (0 when nothing applied)

  // Mean factor the gradient was scaled by (1 = none): 1/max(1,τ) for SA,
  // mean 1/G for the Gap rules.
  double penalty_mean = 1.0;

  // Gap rules only: the whole model and each tensor (layout order).
  bool has_gap = false;
  GapStats gap;
  std::vector<GapStats> per_tensor;

  // Sync: how many gradients the applied step averaged.
  uint32_t aggregated = 0;
};

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_ENGINE_APPLY_STATS_H_
