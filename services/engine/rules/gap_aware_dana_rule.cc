#include "services/engine/rules/gap_aware_dana_rule.h"

#include <algorithm>

#include "services/engine/rules/dana_zero_rule.h"
#include "services/engine/rules/kernel_util.h"
#include "services/engine/tensor_ranges.h"

namespace gaptrain {
namespace {

template <bool kPenalizeWeightDecay, class CopyT>
GAPTRAIN_KERNEL_CLONES
void GapAwareDanaKernel(const RuleConfig& config, const GapParams& gp, float lr,
                        const float* __restrict g, const CopyT* __restrict copy,
                        float* __restrict theta, float* __restrict vi,
                        float* __restrict s, float* __restrict r, size_t begin,
                        size_t end, GapAccumulator* acc) {
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
      const float v_old = vi[j];
      const float v_new = mom * v_old + d;
      theta[j] -= lr * v_new;
      s[j] += v_new - v_old;
      vi[j] = v_new;
      r[j] = beta * r[j] + one_minus_beta * v_new * v_new;
      gap_sum += gap;
      penalty_sum += inv_gap;
      gap_max = std::max(gap_max, gap);
      penalised += gap >= kPenalisedGap ? 1u : 0u;
    }
    acc->AddBlock(gap_sum, penalty_sum, gap_max, penalised, b1 - b0);
  }
}

}  // namespace

void GapAwareDanaRule::InitState(ParameterStore* store) const {
  EnsureBuffer(store, kMomentumSumBuffer);
  EnsureBuffer(store, kStepSquareBuffer);
}

void GapAwareDanaRule::AddWorker(WorkerId worker, ParameterStore* store) const {
  DanaAddWorker(worker, store);
}

void GapAwareDanaRule::RemoveWorker(WorkerId worker, ParameterStore* store) const {
  DanaRemoveWorker(worker, store);
}

void GapAwareDanaRule::WriteReply(WorkerId, double learning_rate,
                                  const ParameterStore& store, float* out) const {
  DanaWriteLookAhead(config(), learning_rate, store, out);
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
                     GapAwareDanaKernel<true>(c, gp, lr, g, copy, theta, vi, s, r, begin, end,
                                              acc);
                   } else {
                     GapAwareDanaKernel<false>(c, gp, lr, g, copy, theta, vi, s, r, begin, end,
                                               acc);
                   }
                 },
                 stats);
  });
  EndGapStep(store);
  stats->outcome = ApplyStats::Outcome::kApplied;
}

}  // namespace gaptrain
