// Synchronous SGD with backup workers (Chen et al. 2016). The version is the
// step k. Gradients tagged k are summed until the first N of them arrive,
// N = max(1, live workers − backupWorkers); then their mean takes one ASGD
// step (momentum, Nesterov, weight decay as configured) and k advances.
// Gradients tagged < k arrive late and are discarded (counted, not errors).
//
// N follows membership, so churn never deadlocks a step: when a member
// leaves, the pending step completes if it already has enough gradients.
// The engine rejects a second gradient from one worker for the same step.
// Master memory: θ, the gradient sum, and v when γ > 0.

#ifndef GAPTRAIN_SERVICES_ENGINE_RULES_SYNC_AGGREGATOR_H_
#define GAPTRAIN_SERVICES_ENGINE_RULES_SYNC_AGGREGATOR_H_

#include <cstddef>

#include "services/engine/rules/update_rule.h"

namespace gaptrain {

class SyncAggregator : public UpdateRule {
 public:
  explicit SyncAggregator(const RuleConfig& config) : UpdateRule(config) {}

  // Gradients a step needs with `live_workers` members.
  size_t RequiredGradients(size_t live_workers) const;

  void InitState(ParameterStore* store) const override;
  void Apply(const PushContext& push, ParameterStore* store, ApplyStats* stats) override;
  bool OnMembershipChange(size_t live_workers, double learning_rate, ParameterStore* store,
                          ApplyStats* stats) override;

 private:
  // Averages the sum (plus `last`, when not null, in the same pass), takes
  // the step and clears the sum.
  void Step(size_t count, const GradientView* last, double learning_rate, ParameterStore* store,
            ApplyStats* stats) const;
};

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_ENGINE_RULES_SYNC_AGGREGATOR_H_
