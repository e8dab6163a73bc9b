// GA + DANA: DANA-Zero whose gradients are first divided by the Gap, with
// Δ measured against the look-ahead point θ̂⁽ⁱ⁾ the worker actually used.
// The look-ahead makes Δ smaller, so GA penalises less, and momentum stays
// useful at large N.
//
// Which momentum feeds C is open in the papers. A worker's own v⁽ⁱ⁾ is zero
// on its first push, so feeding r with it would leave C ≈ 0 and erase each
// worker's first gradient. gaptrain computes C from r as it stands, skips
// the penalty while r was never fed, and feeds r after the step with the
// momentum just applied (v_new).
// Master memory: (N + 3)·P floats plus the worker copies when the engine
// keeps snapshots.

#ifndef GAPTRAIN_SERVICES_ENGINE_RULES_GAP_AWARE_DANA_RULE_H_
#define GAPTRAIN_SERVICES_ENGINE_RULES_GAP_AWARE_DANA_RULE_H_

#include "services/engine/rules/dana_zero_rule.h"

namespace gaptrain {

// DANA-Zero's workers, momenta and look-ahead replies; its own state (r)
// and push.
class GapAwareDanaRule : public DanaZeroRule {
 public:
  explicit GapAwareDanaRule(const RuleConfig& config) : DanaZeroRule(config) {}

  void InitState(ParameterStore* store) const override;
  void Apply(const PushContext& push, ParameterStore* store, ApplyStats* stats) override;
};

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_ENGINE_RULES_GAP_AWARE_DANA_RULE_H_
