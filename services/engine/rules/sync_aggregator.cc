#include "services/engine/rules/sync_aggregator.h"

#include "services/engine/rules/asgd_rule.h"
#include "services/engine/rules/kernel_util.h"
#include "services/engine/tensor_ranges.h"

namespace gaptrain {
namespace {

// Scalars and pointers are parameters so they stay in registers (see
// AsgdKernel in asgd_rule.cc).
void AccumulateKernel(const float* __restrict g, float* __restrict sum, size_t begin,
                      size_t end) {
#pragma omp simd
  for (size_t j = begin; j < end; ++j) sum[j] += g[j - begin];
}

// The step on the mean of sum (+ last, when not null), clearing the sum.
template <StepKind K>
void SyncStepKernel(float lr, float mom, float wd, float inv_count, const float* __restrict last,
                    float* __restrict sum, float* __restrict theta, float* __restrict v,
                    size_t begin, size_t end) {
  if (last != nullptr) {
#pragma omp simd
    for (size_t j = begin; j < end; ++j) {
      const float d = (sum[j] + last[j - begin]) * inv_count + wd * theta[j];
      sum[j] = 0.0f;
      MomentumStep<K>(d, v, theta, j, lr, mom);
    }
  } else {
#pragma omp simd
    for (size_t j = begin; j < end; ++j) {
      const float d = sum[j] * inv_count + wd * theta[j];
      sum[j] = 0.0f;
      MomentumStep<K>(d, v, theta, j, lr, mom);
    }
  }
}

}  // namespace

size_t SyncAggregator::RequiredGradients(size_t live_workers) const {
  size_t backups = config().backup_workers;
  return live_workers > backups + 1 ? live_workers - backups : 1;
}

void SyncAggregator::InitState(ParameterStore* store) const {
  if (config().momentum > 0.0f) EnsureBuffer(store, kMomentumBuffer);
  EnsureBuffer(store, kGradientSumBuffer);
}

void SyncAggregator::Apply(const PushContext& push, ParameterStore* store,
                           ApplyStats* stats) {
  if (push.base_version < store->version()) {
    stats->outcome = ApplyStats::Outcome::kDiscardedLate;
    return;
  }
  const size_t count = static_cast<size_t>(store->scalar(kSyncCountScalar)) + 1;
  if (count >= RequiredGradients(push.live_workers)) {
    Step(count, &push.gradient, push.learning_rate, store, stats);
    return;
  }
  float* sum = store->buffer(kGradientSumBuffer)->f32();
  ForEachRange(store->layout(), config().num_threads, &push.gradient,
               [&](size_t begin, size_t end, const float* g, GapAccumulator*) {
                 AccumulateKernel(g, sum, begin, end);
               },
               nullptr);
  store->set_scalar(kSyncCountScalar, static_cast<double>(count));
  stats->outcome = ApplyStats::Outcome::kAccumulated;
}

bool SyncAggregator::OnMembershipChange(size_t live_workers, double learning_rate,
                                        ParameterStore* store, ApplyStats* stats) {
  const size_t count = static_cast<size_t>(store->scalar(kSyncCountScalar));
  if (count == 0 || count < RequiredGradients(live_workers)) return false;
  Step(count, nullptr, learning_rate, store, stats);
  return true;
}

void SyncAggregator::Step(size_t count, const GradientView* last, double learning_rate,
                          ParameterStore* store, ApplyStats* stats) const {
  const RuleConfig& c = config();
  const float lr = static_cast<float>(learning_rate);
  if (count == 1 && last != nullptr) {
    // The sum is still all zero: a plain ASGD step on this gradient moves
    // 20 bytes per parameter instead of 28.
    AsgdStep(c, learning_rate, 1.0f, *last, store);
  } else {
    float* theta = store->params();
    float* sum = store->buffer(kGradientSumBuffer)->f32();
    FlatBuffer* momentum = store->buffer(kMomentumBuffer);
    float* v = momentum ? momentum->f32() : nullptr;
    const float inv_count = 1.0f / static_cast<float>(count);
    DispatchStep(StepKindOf(c), [&](auto kind) {
      constexpr StepKind K = decltype(kind)::value;
      ForEachRange(store->layout(), c.num_threads, last,
                   [&](size_t begin, size_t end, const float* g, GapAccumulator*) {
                     SyncStepKernel<K>(lr, c.momentum, c.weight_decay, inv_count, g, sum, theta,
                                       v, begin, end);
                   },
                   nullptr);
    });
  }
  store->set_scalar(kSyncCountScalar, 0.0);
  stats->outcome = ApplyStats::Outcome::kApplied;
  stats->aggregated = static_cast<uint32_t>(count);
}

}  // namespace gaptrain
