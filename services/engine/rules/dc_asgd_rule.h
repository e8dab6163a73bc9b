// DC-ASGD, delay compensation (Zheng et al., ICML 2017): a first-order
// Taylor correction of the stale gradient towards θ_t using the diagonal
// approximation g⊙g of the Hessian: g' = g + λ·g⊙g⊙(θ_t − θ⁽ⁱ⁾), then the
// ASGD step. λ is constant, or adaptive per element: λ₀ / √(MeanSquare + ε)
// with MeanSquare an EMA of g² (updated with this g first).
// Master memory: θ, v if γ > 0, MeanSquare if adaptive, plus the worker
// copies when the engine keeps snapshots.

#ifndef GAPTRAIN_SERVICES_ENGINE_RULES_DC_ASGD_RULE_H_
#define GAPTRAIN_SERVICES_ENGINE_RULES_DC_ASGD_RULE_H_

#include "services/engine/rules/update_rule.h"

namespace gaptrain {

class DcAsgdRule : public UpdateRule {
 public:
  explicit DcAsgdRule(const RuleConfig& config) : UpdateRule(config) {}

  void InitState(ParameterStore* store) const override;
  void Apply(const PushContext& push, ParameterStore* store, ApplyStats* stats) override;
};

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_ENGINE_RULES_DC_ASGD_RULE_H_
