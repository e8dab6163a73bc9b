// DANA-Slim, master side: the master stores only the look-ahead point x and
// applies x ← x − η·u, where each worker sends u = g + γv⁽ⁱ⁾ from its own
// momentum (DanaSlimWorkerStep, services/engine/rules/dana_slim_worker.h) and
// adds weight decay λx itself. Equals DANA-Zero when η is constant.
// Master memory: P floats; a worker that leaves takes its momentum along.

#ifndef GAPTRAIN_SERVICES_ENGINE_RULES_DANA_SLIM_RULE_H_
#define GAPTRAIN_SERVICES_ENGINE_RULES_DANA_SLIM_RULE_H_

#include "services/engine/rules/update_rule.h"

namespace gaptrain {

class DanaSlimRule : public UpdateRule {
 public:
  explicit DanaSlimRule(const RuleConfig& config) : UpdateRule(config) {}

  void InitState(ParameterStore*) const override {}
  void Apply(const PushContext& push, ParameterStore* store, ApplyStats* stats) override;
};

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_ENGINE_RULES_DANA_SLIM_RULE_H_
