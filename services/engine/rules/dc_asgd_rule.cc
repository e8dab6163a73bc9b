#include "services/engine/rules/dc_asgd_rule.h"

#include <cmath>

#include "services/engine/rules/kernel_util.h"
#include "services/engine/tensor_ranges.h"

namespace gaptrain {
namespace {

template <StepKind K, bool kAdaptive, class CopyT>
GAPTRAIN_KERNEL_CLONES
void DcAsgdKernel(const RuleConfig& config, float lr, const float* __restrict g,
                  const CopyT* __restrict copy, float* __restrict theta,
                  float* __restrict v, float* __restrict mean_square, size_t begin,
                  size_t end) {
  const float mom = config.momentum;
  const float wd = config.weight_decay;
  const float lambda = config.dc_lambda;
  const float decay = config.dc_mean_square_decay;
  const float eps = config.dc_epsilon;
#pragma omp simd
  for (size_t j = begin; j < end; ++j) {
    const float t = theta[j];
    const float gj = g[j - begin];
    float lam = lambda;
    if constexpr (kAdaptive) {
      const float ms = decay * mean_square[j] + (1.0f - decay) * gj * gj;
      mean_square[j] = ms;
      lam = lambda / std::sqrt(ms + eps);
    }
    const float compensated = gj + lam * gj * gj * (t - LoadAsFloat(copy, j));
    MomentumStep<K>(compensated + wd * t, v, theta, j, lr, mom);
  }
}

}  // namespace

void DcAsgdRule::InitState(ParameterStore* store) const {
  if (config().momentum > 0.0f) EnsureBuffer(store, kMomentumBuffer);
  if (config().dc_adaptive) EnsureBuffer(store, kMeanSquareBuffer);
}

void DcAsgdRule::Apply(const PushContext& push, ParameterStore* store, ApplyStats* stats) {
  const RuleConfig& c = config();
  const float lr = static_cast<float>(push.learning_rate);
  float* theta = store->params();
  FlatBuffer* momentum = store->buffer(kMomentumBuffer);
  float* v = momentum ? momentum->f32() : nullptr;
  FlatBuffer* ms_buffer = store->buffer(kMeanSquareBuffer);
  float* ms = ms_buffer ? ms_buffer->f32() : nullptr;

  DispatchStep(StepKindOf(c), [&](auto kind) {
    constexpr StepKind K = decltype(kind)::value;
    DispatchCopy(push.copy, [&](auto copy) {
      ForEachRange(store->layout(), c.num_threads, &push.gradient,
                   [&](size_t begin, size_t end, const float* g, GapAccumulator*) {
                     if (c.dc_adaptive) {
                       DcAsgdKernel<K, true>(c, lr, g, copy, theta, v, ms, begin, end);
                     } else {
                       DcAsgdKernel<K, false>(c, lr, g, copy, theta, v, ms, begin, end);
                     }
                   },
                   nullptr);
    });
  });
  stats->outcome = ApplyStats::Outcome::kApplied;
}

}  // namespace gaptrain
