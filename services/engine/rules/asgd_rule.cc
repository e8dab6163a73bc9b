#include "services/engine/rules/asgd_rule.h"

#include "services/engine/rules/kernel_util.h"
#include "services/engine/tensor_ranges.h"

namespace gaptrain {

namespace {

// Scalars and pointers are parameters (locals), so the compiler keeps them
// in registers; captured by reference in a lambda they were reloaded on
// every iteration, as a store to θ might have changed them.
template <StepKind K>
void AsgdKernel(float lr, float mom, float wd, float scale, const float* __restrict g,
                float* __restrict theta, float* __restrict v, size_t begin, size_t end) {
#pragma omp simd
  for (size_t j = begin; j < end; ++j) {
    const float d = scale * g[j - begin] + wd * theta[j];
    MomentumStep<K>(d, v, theta, j, lr, mom);
  }
}

}  // namespace

void AsgdStep(const RuleConfig& config, double learning_rate, float gradient_scale,
              const GradientView& gradient, ParameterStore* store) {
  float* theta = store->params();
  FlatBuffer* momentum = store->buffer(kMomentumBuffer);
  float* v = momentum ? momentum->f32() : nullptr;
  const float lr = static_cast<float>(learning_rate);

  DispatchStep(StepKindOf(config), [&](auto kind) {
    constexpr StepKind K = decltype(kind)::value;
    ForEachRange(store->layout(), config.num_threads, &gradient,
                 [&](size_t begin, size_t end, const float* g, GapAccumulator*) {
                   AsgdKernel<K>(lr, config.momentum, config.weight_decay, gradient_scale, g,
                                 theta, v, begin, end);
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
