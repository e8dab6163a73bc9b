#include "services/engine/rules/update_rule.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "services/engine/rules/asgd_rule.h"
#include "services/engine/rules/dana_slim_rule.h"
#include "services/engine/rules/dana_zero_rule.h"
#include "services/engine/rules/dc_asgd_rule.h"
#include "services/engine/rules/gap_aware_dana_rule.h"
#include "services/engine/rules/gap_aware_rule.h"
#include "services/engine/rules/kernel_util.h"
#include "services/engine/rules/staleness_aware_rule.h"
#include "services/engine/rules/sync_aggregator.h"

namespace gaptrain {

void UpdateRule::AddWorker(WorkerId, ParameterStore*) const {}

void UpdateRule::RemoveWorker(WorkerId, ParameterStore*) const {}

void UpdateRule::WriteReply(WorkerId, double, const ParameterStore& store,
                            float* out) const {
  std::memcpy(out, store.params(), store.size() * sizeof(float));
}

bool UpdateRule::OnMembershipChange(size_t, double, ParameterStore*, ApplyStats*) {
  return false;
}

std::unique_ptr<UpdateRule> CreateUpdateRule(const RuleConfig& config) {
  switch (config.kind) {
    case RuleKind::kAsgd: return std::make_unique<AsgdRule>(config);
    case RuleKind::kStalenessAware: return std::make_unique<StalenessAwareRule>(config);
    case RuleKind::kGapAware: return std::make_unique<GapAwareRule>(config);
    case RuleKind::kDanaZero: return std::make_unique<DanaZeroRule>(config);
    case RuleKind::kDanaSlim: return std::make_unique<DanaSlimRule>(config);
    case RuleKind::kGapAwareDana: return std::make_unique<GapAwareDanaRule>(config);
    case RuleKind::kDcAsgd: return std::make_unique<DcAsgdRule>(config);
    case RuleKind::kSync: return std::make_unique<SyncAggregator>(config);
  }
  return nullptr;
}

GapParams BeginGapStep(const RuleConfig& config, double learning_rate,
                       ParameterStore* store) {
  double eta_max = std::max(store->scalar(kGapEtaMaxScalar), learning_rate);
  store->set_scalar(kGapEtaMaxScalar, eta_max);
  double feeds = store->scalar(kGapFeedsScalar);

  GapParams p;
  p.eta_max = static_cast<float>(eta_max);
  p.epsilon = static_cast<float>(config.gap_epsilon);
  p.beta = static_cast<float>(config.gap_beta);
  if (feeds > 0) {
    p.enabled = 1.0f;
    // The kernels feed r with the float β; correct with that same β.
    const double beta = p.beta;
    p.bias_correction = static_cast<float>(1.0 / (1.0 - std::pow(beta, feeds)));
  }
  return p;
}

void EndGapStep(ParameterStore* store) {
  store->set_scalar(kGapFeedsScalar, store->scalar(kGapFeedsScalar) + 1);
}

FlatBuffer* EnsureBuffer(ParameterStore* store, const char* name) {
  FlatBuffer* b = store->buffer(name);
  return b != nullptr ? b : store->AddBuffer(name, DType::kFloat32);
}

}  // namespace gaptrain
