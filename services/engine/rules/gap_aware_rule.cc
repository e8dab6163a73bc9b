#include "services/engine/rules/gap_aware_rule.h"

#include <algorithm>

#include "services/engine/rules/kernel_util.h"
#include "services/engine/tensor_ranges.h"

namespace gaptrain {
namespace {

template <StepKind K, bool kPenalizeWeightDecay, class CopyT>
GAPTRAIN_KERNEL_CLONES
void GapAwareKernel(const RuleConfig& config, const GapParams& gp, float lr,
                    const float* __restrict g, const CopyT* __restrict copy,
                    float* __restrict theta, float* __restrict v, float* __restrict r,
                    size_t begin, size_t end, GapAccumulator* acc) {
  const float mom = config.momentum;
  const float wd = config.weight_decay;
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
          g[j - begin], theta[j], CopyDistance(theta[j], copy, j), r[j], wd, gp, &gap, &inv_gap);
      const float step = MomentumStep<K>(d, v, theta, j, lr, mom);
      const float fed = K == StepKind::kPlain ? g[j - begin] : step;
      r[j] = beta * r[j] + one_minus_beta * fed * fed;
      gap_sum += gap;
      penalty_sum += inv_gap;
      gap_max = std::max(gap_max, gap);
      penalised += gap >= kPenalisedGap ? 1u : 0u;
    }
    acc->AddBlock(gap_sum, penalty_sum, gap_max, penalised, b1 - b0);
  }
}

}  // namespace

void GapAwareRule::InitState(ParameterStore* store) const {
  if (config().momentum > 0.0f) EnsureBuffer(store, kMomentumBuffer);
  EnsureBuffer(store, kStepSquareBuffer);
}

void GapAwareRule::Apply(const PushContext& push, ParameterStore* store, ApplyStats* stats) {
  const RuleConfig& c = config();
  const GapParams gp = BeginGapStep(c, push.learning_rate, store);
  const float lr = static_cast<float>(push.learning_rate);
  float* theta = store->params();
  FlatBuffer* momentum = store->buffer(kMomentumBuffer);
  float* v = momentum ? momentum->f32() : nullptr;
  float* r = store->buffer(kStepSquareBuffer)->f32();

  DispatchStep(StepKindOf(c), [&](auto kind) {
    constexpr StepKind K = decltype(kind)::value;
    DispatchCopy(push.copy, [&](auto copy) {
      ForEachRange(store->layout(), c.num_threads, &push.gradient,
                   [&](size_t begin, size_t end, const float* g, GapAccumulator* acc) {
                     if (c.penalize_weight_decay) {
                       GapAwareKernel<K, true>(c, gp, lr, g, copy, theta, v, r, begin, end, acc);
                     } else {
                       GapAwareKernel<K, false>(c, gp, lr, g, copy, theta, v, r, begin, end,
                                                acc);
                     }
                   },
                   stats);
    });
  });
  EndGapStep(store);
  stats->outcome = ApplyStats::Outcome::kApplied;
}

}  // namespace gaptrain
