#include "services/master/asgd_rule.h"

#include "services/master/kernel_util.h"
#include "services/master/tensor_ranges.h"

namespace gaptrain {

void AsgdStep(const RuleConfig& config, double learning_rate, float gradient_scale,
              const float* gradient, ParameterStore* store) {
  float* __restrict theta = store->params();
  const float* __restrict g = gradient;
  FlatBuffer* momentum = store->buffer(kMomentumBuffer);
  float* __restrict v = momentum ? momentum->f32() : nullptr;
  const float lr = static_cast<float>(learning_rate);
  const float mom = config.momentum;
  const float wd = config.weight_decay;
  const float scale = gradient_scale;

  DispatchStep(StepKindOf(config), [&](auto kind) {
    constexpr StepKind K = decltype(kind)::value;
    ForEachRange(store->layout(), config.num_threads,
                 [&](size_t begin, size_t end, GapAccumulator*) {
#pragma omp simd
                   for (size_t j = begin; j < end; ++j) {
                     float d = scale * g[j] + wd * theta[j];
                     MomentumStep<K>(d, v, theta, j, lr, mom);
                   }
                 },
                 nullptr);
  });
}

void AsgdRule::InitState(ParameterStore* store) const {
  if (config().momentum > 0.0f) EnsureBuffer(store, kMomentumBuffer);
}

void AsgdRule::Apply(const PushContext& push, ParameterStore* store, ApplyStats* stats) {
  AsgdStep(config(), push.learning_rate, 1.0f, push.gradient, store);
  stats->outcome = ApplyStats::Outcome::kApplied;
}

}  // namespace gaptrain
