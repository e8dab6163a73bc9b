// DANA-Zero (Hakimi et al. 2019): look-ahead momentum kept at the master.
// One momentum v⁽ʲ⁾ per worker and their sum S. A push from worker i:
// d = g + λθ; v_new = γv⁽ⁱ⁾ + d; θ ← θ − η·v_new; S ← S + v_new − v⁽ⁱ⁾;
// v⁽ⁱ⁾ ← v_new. A pull returns θ̂ = θ − ηγS, the estimated point θ will be
// at when the worker's gradient arrives. The model to evaluate and save
// is θ, not θ̂.
//
// A worker that leaves takes its v⁽ⁱ⁾ out of S: left in, the momentum of a
// worker that no longer pushes would keep dragging θ̂ forever.
// Master memory: (N + 2)·P floats. GA + DANA (gap_aware_dana_rule.h) is
// this rule with its Apply penalised by the Gap.

#ifndef GAPTRAIN_SERVICES_ENGINE_RULES_DANA_ZERO_RULE_H_
#define GAPTRAIN_SERVICES_ENGINE_RULES_DANA_ZERO_RULE_H_

#include "services/engine/rules/update_rule.h"

namespace gaptrain {

class DanaZeroRule : public UpdateRule {
 public:
  explicit DanaZeroRule(const RuleConfig& config) : UpdateRule(config) {}

  void InitState(ParameterStore* store) const override;
  void AddWorker(WorkerId worker, ParameterStore* store) const override;
  void RemoveWorker(WorkerId worker, ParameterStore* store) const override;
  void WriteReply(WorkerId worker, double learning_rate, const ParameterStore& store,
                  float* out) const override;
  void Apply(const PushContext& push, ParameterStore* store, ApplyStats* stats) override;
};

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_ENGINE_RULES_DANA_ZERO_RULE_H_
