#include "services/engine/rules/dana_slim_rule.h"

#include "services/engine/tensor_ranges.h"

namespace gaptrain {
namespace {

// x ← x − η·u; parameters stay in registers (see AsgdKernel).
void DanaSlimKernel(float lr, const float* __restrict u, float* __restrict x, size_t begin,
                    size_t end) {
#pragma omp simd
  for (size_t j = begin; j < end; ++j) x[j] -= lr * u[j - begin];
}

}  // namespace

void DanaSlimRule::Apply(const PushContext& push, ParameterStore* store, ApplyStats* stats) {
  float* __restrict x = store->params();
  const float lr = static_cast<float>(push.learning_rate);
  ForEachRange(store->layout(), config().num_threads, &push.gradient,
               [&](size_t begin, size_t end, const float* u, GapAccumulator*) {
                 DanaSlimKernel(lr, u, x, begin, end);
               },
               nullptr);
  stats->outcome = ApplyStats::Outcome::kApplied;
}

}  // namespace gaptrain
