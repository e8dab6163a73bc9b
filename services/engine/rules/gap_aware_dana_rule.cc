#include "services/engine/rules/gap_aware_dana_rule.h"

#include "services/engine/rules/gap_penalised_pass.h"
#include "services/engine/rules/kernel_util.h"

namespace gaptrain {
namespace {

// The Gap-penalised pass (gap_penalised_pass.h) with DANA-Zero's step on the
// pushing worker's momentum vi and their sum s; r is fed with v_new.
template <bool kPenalizeWeightDecay, class CopyT>
GAPTRAIN_KERNEL_CLONES
void GapAwareDanaKernel(float lr, float mom, float wd, const GapParams& gp,
                        const float* __restrict g, const CopyT* __restrict copy,
                        float* __restrict theta, float* __restrict vi,
                        float* __restrict s, float* __restrict r, size_t begin,
                        size_t end, GapAccumulator* acc) {
  GapPenalisedPass<kPenalizeWeightDecay>(
      gp, wd, g, copy, theta, r, begin, end, acc,
      [vi, s, lr, mom](float* __restrict th, size_t j, float, float d) {
        return DanaStep(d, vi, s, th, j, lr, mom);
      });
}

}  // namespace

void GapAwareDanaRule::InitState(ParameterStore* store) const {
  DanaZeroRule::InitState(store);
  EnsureBuffer(store, kStepSquareBuffer);
}

void GapAwareDanaRule::Apply(const PushContext& push, ParameterStore* store,
                             ApplyStats* stats) {
  const RuleConfig& c = config();
  const GapParams gp = BeginGapStep(c, push.learning_rate, store);
  const float lr = static_cast<float>(push.learning_rate);
  float* theta = store->params();
  float* s = store->buffer(kMomentumSumBuffer)->f32();
  float* r = store->buffer(kStepSquareBuffer)->f32();
  float* vi = store->buffer(WorkerStateName(push.worker, kWorkerMomentum))->f32();

  DispatchCopy(push.copy, [&](auto copy) {
    ForEachRange(store->layout(), c.num_threads, &push.gradient,
                 [&](size_t begin, size_t end, const float* g, GapAccumulator* acc) {
                   if (c.penalize_weight_decay) {
                     GapAwareDanaKernel<true>(lr, c.momentum, c.weight_decay, gp, g, copy,
                                              theta, vi, s, r, begin, end, acc);
                   } else {
                     GapAwareDanaKernel<false>(lr, c.momentum, c.weight_decay, gp, g, copy,
                                               theta, vi, s, r, begin, end, acc);
                   }
                 },
                 stats);
  });
  EndGapStep(store);
  stats->outcome = ApplyStats::Outcome::kApplied;
}

}  // namespace gaptrain
