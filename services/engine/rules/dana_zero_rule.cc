#include "services/engine/rules/dana_zero_rule.h"

#include "services/engine/rules/kernel_util.h"
#include "services/engine/tensor_ranges.h"

namespace gaptrain {

namespace {

// Scalars and pointers as parameters stay in registers (see AsgdKernel).
void DanaZeroKernel(float lr, float mom, float wd, const float* __restrict g,
                    float* __restrict theta, float* __restrict s, float* __restrict vi,
                    size_t begin, size_t end) {
#pragma omp simd
  for (size_t j = begin; j < end; ++j) {
    DanaStep(g[j - begin] + wd * theta[j], vi, s, theta, j, lr, mom);
  }
}

}  // namespace

void DanaZeroRule::InitState(ParameterStore* store) const {
  EnsureBuffer(store, kMomentumSumBuffer);
}

void DanaZeroRule::AddWorker(WorkerId worker, ParameterStore* store) const {
  store->AddBuffer(WorkerStateName(worker, kWorkerMomentum), DType::kFloat32);
}

void DanaZeroRule::RemoveWorker(WorkerId worker, ParameterStore* store) const {
  const std::string name = WorkerStateName(worker, kWorkerMomentum);
  FlatBuffer* vi = store->buffer(name);
  if (vi == nullptr) return;
  float* __restrict s = store->buffer(kMomentumSumBuffer)->f32();
  const float* __restrict v = vi->f32();
  for (size_t j = 0; j < store->size(); ++j) s[j] -= v[j];
  store->RemoveBuffer(name);
}

// out = θ − η·γ·S in one pass.
void DanaZeroRule::WriteReply(WorkerId, double learning_rate, const ParameterStore& store,
                              float* __restrict out) const {
  const float* __restrict theta = store.params();
  const float* __restrict s = store.buffer(kMomentumSumBuffer)->f32();
  const float k = static_cast<float>(learning_rate) * config().momentum;
  for (size_t j = 0; j < store.size(); ++j) out[j] = theta[j] - k * s[j];
}

void DanaZeroRule::Apply(const PushContext& push, ParameterStore* store, ApplyStats* stats) {
  float* __restrict theta = store->params();
  float* __restrict s = store->buffer(kMomentumSumBuffer)->f32();
  float* __restrict vi = store->buffer(WorkerStateName(push.worker, kWorkerMomentum))->f32();
  const float lr = static_cast<float>(push.learning_rate);
  const float mom = config().momentum;
  const float wd = config().weight_decay;
  ForEachRange(store->layout(), config().num_threads, &push.gradient,
               [&](size_t begin, size_t end, const float* g, GapAccumulator*) {
                 DanaZeroKernel(lr, mom, wd, g, theta, s, vi, begin, end);
               },
               nullptr);
  stats->outcome = ApplyStats::Outcome::kApplied;
}

}  // namespace gaptrain
