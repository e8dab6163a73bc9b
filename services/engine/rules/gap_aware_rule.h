// GA, Gap-Aware (Barkai et al., ICLR 2020): each parameter's gradient is
// divided by its Gap G = 1 + |θ_t − θ⁽ⁱ⁾| / C, where C = η_max(√r̂ + ε) is
// the typical size of one step of that parameter (r a bias-corrected
// running mean of squared momentum). Unlike SA the penalty follows how far
// the model really moved, so it relaxes once the learning rate decays.
//
// Order within one push (docs/algorithms.md): η_max ← max(η_max, η); C
// from r as it stands (no penalty while r was never fed); the fused pass
// computes G, d = (g + λθ)/G (or g/G + λθ), the momentum step, and feeds
// r with this step's momentum (the raw g when γ = 0).
// Master memory: θ, r, v if γ > 0, and the worker copies when the engine
// keeps snapshots (N·P in fp32 or bf16).

#ifndef GAPTRAIN_SERVICES_ENGINE_RULES_GAP_AWARE_RULE_H_
#define GAPTRAIN_SERVICES_ENGINE_RULES_GAP_AWARE_RULE_H_

#include "services/engine/rules/update_rule.h"

namespace gaptrain {

class GapAwareRule : public UpdateRule {
 public:
  explicit GapAwareRule(const RuleConfig& config) : UpdateRule(config) {}

  void InitState(ParameterStore* store) const override;
  void Apply(const PushContext& push, ParameterStore* store, ApplyStats* stats) override;
};

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_ENGINE_RULES_GAP_AWARE_RULE_H_
