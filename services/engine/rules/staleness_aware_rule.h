// SA, staleness-aware ASGD (Zhang et al. 2016): the gradient is divided by
// max(1, τ) before the ASGD step. With N workers τ ≈ N − 1, so every
// gradient shrinks about N-fold, even late in training; GA exists to fix
// that. Master memory: as ASGD.

#ifndef GAPTRAIN_SERVICES_ENGINE_RULES_STALENESS_AWARE_RULE_H_
#define GAPTRAIN_SERVICES_ENGINE_RULES_STALENESS_AWARE_RULE_H_

#include "services/engine/rules/update_rule.h"

namespace gaptrain {

class StalenessAwareRule : public UpdateRule {
 public:
  explicit StalenessAwareRule(const RuleConfig& config) : UpdateRule(config) {}

  void InitState(ParameterStore* store) const override;
  void Apply(const PushContext& push, ParameterStore* store, ApplyStats* stats) override;
};

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_ENGINE_RULES_STALENESS_AWARE_RULE_H_
