#include "services/engine/rules/gap_aware_rule.h"

#include "services/engine/rules/gap_penalised_pass.h"
#include "services/engine/rules/kernel_util.h"

namespace gaptrain {
namespace {

// The Gap-penalised pass (gap_penalised_pass.h) with the ASGD step; r is fed with
// this step's momentum, or the raw gradient when γ = 0.
template <StepKind K, bool kPenalizeWeightDecay, class CopyT>
GAPTRAIN_KERNEL_CLONES
void GapAwareKernel(float lr, float mom, float wd, const GapParams& gp,
                    const float* __restrict g, const CopyT* __restrict copy,
                    float* __restrict theta, float* __restrict v, float* __restrict r,
                    size_t begin, size_t end, GapAccumulator* acc) {
  GapPenalisedPass<kPenalizeWeightDecay>(
      gp, wd, g, copy, theta, r, begin, end, acc,
      [v, lr, mom](float* __restrict th, size_t j, float gj, float d) {
        const float step = MomentumStep<K>(d, v, th, j, lr, mom);
        return K == StepKind::kPlain ? gj : step;
      });
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
                       GapAwareKernel<K, true>(lr, c.momentum, c.weight_decay, gp, g, copy,
                                               theta, v, r, begin, end, acc);
                     } else {
                       GapAwareKernel<K, false>(lr, c.momentum, c.weight_decay, gp, g, copy,
                                                theta, v, r, begin, end, acc);
                     }
                   },
                   stats);
    });
  });
  EndGapStep(store);
  stats->outcome = ApplyStats::Outcome::kApplied;
}

}  // namespace gaptrain
