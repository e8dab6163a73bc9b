// ASGD, the baseline ("none"): d = g + λθ; v ← γv + d; θ ← θ − ηv, or the
// Nesterov step θ ← θ − η(d + γv). Stale gradients are applied as they are.
// Master memory: θ, plus v when γ > 0.

#ifndef GAPTRAIN_SERVICES_ENGINE_RULES_ASGD_RULE_H_
#define GAPTRAIN_SERVICES_ENGINE_RULES_ASGD_RULE_H_

#include "services/engine/rules/update_rule.h"

namespace gaptrain {

// One fused ASGD pass with d = scale·g + λθ. SA (scale 1/max(1, τ)) and the
// sync aggregator (scale 1/count) reuse it.
void AsgdStep(const RuleConfig& config, double learning_rate, float gradient_scale,
              const GradientView& gradient, ParameterStore* store);

class AsgdRule : public UpdateRule {
 public:
  explicit AsgdRule(const RuleConfig& config) : UpdateRule(config) {}

  void InitState(ParameterStore* store) const override;
  void Apply(const PushContext& push, ParameterStore* store, ApplyStats* stats) override;
};

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_ENGINE_RULES_ASGD_RULE_H_
