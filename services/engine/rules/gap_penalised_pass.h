// GapPenalisedPass: the one fused loop of the rules that divide gradients
// by the Gap (GA and GA + DANA), with the rule's own step passed in. Only
// the rules' kernels include it: they are compiled with -fopenmp-simd
// (KERNEL_COPTS), which its `#pragma omp simd` needs.

#ifndef GAPTRAIN_SERVICES_ENGINE_RULES_GAP_PENALISED_PASS_H_
#define GAPTRAIN_SERVICES_ENGINE_RULES_GAP_PENALISED_PASS_H_

#include <algorithm>
#include <cstddef>

#include "services/engine/apply_stats.h"
#include "services/engine/rules/kernel_util.h"
#include "services/engine/tensor_ranges.h"

namespace gaptrain {

// The Gap-penalised pass that GA and GA + DANA share, over the elements
// [begin, end) of one tensor (g[0] is element `begin`'s gradient): for each
// element, G and the penalised direction d (PenalisedDirection), then
// `step(theta, j, g_j, d)`, the rule's own update of θ[j] and its momentum,
// which returns what feeds r; then r ← βr + (1 − β)·fed², and the Gap
// statistics, summed in float by kStatsBlock blocks into *acc. One pass
// over the buffers, nothing allocated. A rule calls it from its
// GAPTRAIN_KERNEL_CLONES kernel, with scalars and pointers as that kernel's
// parameters and `step` a lambda capturing them by value, so the pass and
// the step are inlined into each clone and vectorised as one loop. `gp` is
// taken by value: the step's stores (through pointers the compiler cannot
// prove apart from a reference) would otherwise reload it every iteration.
template <bool kPenalizeWeightDecay, class CopyT, class StepFn>
__attribute__((always_inline)) inline void GapPenalisedPass(
    const GapParams gp, float weight_decay, const float* __restrict g,
    const CopyT* __restrict copy, float* __restrict theta, float* __restrict r, size_t begin,
    size_t end, GapAccumulator* acc, StepFn step) {
  const float beta = gp.beta;
  const float one_minus_beta = 1.0f - gp.beta;
  for (size_t b0 = begin; b0 < end; b0 += kStatsBlock) {
    const size_t b1 = std::min(end, b0 + kStatsBlock);
    float gap_sum = 0.0f, penalty_sum = 0.0f, gap_max = 1.0f;
    unsigned penalised = 0;
#pragma omp simd reduction(+ : gap_sum, penalty_sum, penalised) reduction(max : gap_max)
    for (size_t j = b0; j < b1; ++j) {
      float gap, inv_gap;
      const float d = PenalisedDirection<kPenalizeWeightDecay>(
          g[j - begin], theta[j], CopyDistance(theta[j], copy, j), r[j], weight_decay, gp, &gap,
          &inv_gap);
      const float fed = step(theta, j, g[j - begin], d);
      r[j] = beta * r[j] + one_minus_beta * fed * fed;
      gap_sum += gap;
      penalty_sum += inv_gap;
      gap_max = std::max(gap_max, gap);
      penalised += gap >= kPenalisedGap ? 1u : 0u;
    }
    acc->AddBlock(gap_sum, penalty_sum, gap_max, penalised, b1 - b0);
  }
}

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_ENGINE_RULES_GAP_PENALISED_PASS_H_
