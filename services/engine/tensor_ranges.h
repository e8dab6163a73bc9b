// ForEachRange: runs a rule's fused kernel over [0, P) in units of 64Ki
// elements cut at tensor boundaries, so each unit's Gap statistics land in
// its tensor's accumulator; idle cores help (HelpingPool). It hands the kernel the
// pushed gradient's values for each piece (GradientView), decoding wire
// values block by block where the push still holds them.

#ifndef GAPTRAIN_SERVICES_ENGINE_TENSOR_RANGES_H_
#define GAPTRAIN_SERVICES_ENGINE_TENSOR_RANGES_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "services/engine/apply_stats.h"
#include "services/engine/gradient_view.h"
#include "services/engine/parameter_layout.h"

namespace gaptrain {

// Running sums of G over some parameters; kernels add one block at a time.
struct GapAccumulator {
  double gap_sum = 0.0;
  double penalty_sum = 0.0;  // Σ 1/G
  double gap_max = 1.0;
  uint64_t penalised = 0;    // count of G >= kPenalisedGap
  uint64_t count = 0;

  void AddBlock(float block_gap_sum, float block_penalty_sum, float block_gap_max,
                uint64_t block_penalised, size_t block_count) {
    gap_sum += block_gap_sum;
    penalty_sum += block_penalty_sum;
    if (block_gap_max > gap_max) gap_max = block_gap_max;
    penalised += block_penalised;
    count += block_count;
  }
  void Merge(const GapAccumulator& o);
  GapStats ToStats() const;
};

// fn(begin, end, g, acc) processes elements [begin, end), all in one
// tensor, adding its Gap sums to *acc (kernels without a Gap ignore it).
// g[0 .. end − begin) are the gradient's values of those elements (g[0] is
// element `begin`), or null when no gradient was given.
using RangeKernel =
    std::function<void(size_t begin, size_t end, const float* g, GapAccumulator* acc)>;

// Runs `kernel` over every element of `layout` exactly once, on this thread
// and up to `num_threads` − 1 helpers that are free (fewer for small
// models: a helper is worth waking only for a large enough range). θ, the
// state and the statistics are the same for any `num_threads`. `gradient`
// (null, or P values) is read as the kernel reaches each piece; wire values
// come in pieces of at most GradientView::kBlock, each starting a multiple
// of kBlock past its tensor's start, so a kernel's kStatsBlock sums are the
// same either way. With `stats`, fills stats->per_tensor and stats->gap and sets
// has_gap and penalty_mean.
void ForEachRange(const ParameterLayout& layout, int num_threads, const GradientView* gradient,
                  const RangeKernel& kernel, ApplyStats* stats);

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_ENGINE_TENSOR_RANGES_H_
