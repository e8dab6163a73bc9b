#include "services/engine/rules/staleness_aware_rule.h"

#include <algorithm>

#include "services/engine/rules/asgd_rule.h"
#include "services/engine/rules/kernel_util.h"

namespace gaptrain {

void StalenessAwareRule::InitState(ParameterStore* store) const {
  if (config().momentum > 0.0f) EnsureBuffer(store, kMomentumBuffer);
}

void StalenessAwareRule::Apply(const PushContext& push, ParameterStore* store,
                               ApplyStats* stats) {
  float scale = 1.0f / static_cast<float>(std::max<uint64_t>(1, push.staleness));
  AsgdStep(config(), push.learning_rate, scale, push.gradient, store);
  stats->outcome = ApplyStats::Outcome::kApplied;
  stats->penalty_mean = scale;
}

}  // namespace gaptrain
