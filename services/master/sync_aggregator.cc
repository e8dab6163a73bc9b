#include "services/master/sync_aggregator.h"

#include "services/master/kernel_util.h"
#include "services/master/tensor_ranges.h"

namespace gaptrain {

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
    Step(count, push.gradient, push.learning_rate, store, stats);
    return;
  }
  float* __restrict sum = store->buffer(kGradientSumBuffer)->f32();
  const float* __restrict g = push.gradient;
  ForEachRange(store->layout(), config().num_threads,
               [&](size_t begin, size_t end, GapAccumulator*) {
#pragma omp simd
                 for (size_t j = begin; j < end; ++j) sum[j] += g[j];
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

void SyncAggregator::Step(size_t count, const float* last, double learning_rate,
                          ParameterStore* store, ApplyStats* stats) const {
  const RuleConfig& c = config();
  float* __restrict theta = store->params();
  float* __restrict sum = store->buffer(kGradientSumBuffer)->f32();
  FlatBuffer* momentum = store->buffer(kMomentumBuffer);
  float* __restrict v = momentum ? momentum->f32() : nullptr;
  const float* __restrict g = last;
  const float lr = static_cast<float>(learning_rate);
  const float inv_count = 1.0f / static_cast<float>(count);
  const float mom = c.momentum;
  const float wd = c.weight_decay;

  DispatchStep(StepKindOf(c), [&](auto kind) {
    constexpr StepKind K = decltype(kind)::value;
    ForEachRange(store->layout(), c.num_threads,
                 [&](size_t begin, size_t end, GapAccumulator*) {
                   if (g != nullptr) {
#pragma omp simd
                     for (size_t j = begin; j < end; ++j) {
                       const float d = (sum[j] + g[j]) * inv_count + wd * theta[j];
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
                 },
                 nullptr);
  });
  store->set_scalar(kSyncCountScalar, 0.0);
  stats->outcome = ApplyStats::Outcome::kApplied;
  stats->aggregated = static_cast<uint32_t>(count);
}

}  // namespace gaptrain
