// LearningRateSchedule: η as a pure function of the master's update count.
// Linear warm-up from η·warmup_start_factor (1/N in the papers) to η over
// the first warmup_updates, then ×decay_factor at each listed fraction of
// total_updates (step decay). GA's η_max is tracked by the rule, not here.

#ifndef GAPTRAIN_SERVICES_ENGINE_LEARNING_RATE_SCHEDULE_H_
#define GAPTRAIN_SERVICES_ENGINE_LEARNING_RATE_SCHEDULE_H_

#include <cstdint>
#include <vector>

#include "services/base/status.h"

namespace gaptrain {

struct ScheduleConfig {
  double learning_rate = 0.1;          // η after warm-up, before decay
  uint64_t warmup_updates = 0;         // 0: no warm-up
  double warmup_start_factor = 1.0;    // η starts at η·factor (1/N)
  std::vector<double> decay_at_fractions;  // increasing, in (0, 1)
  double decay_factor = 0.1;
  uint64_t total_updates = 0;          // needed when decay_at_fractions is set

  Status Validate() const;
};

class LearningRateSchedule {
 public:
  LearningRateSchedule() = default;  // constant 0.1
  // `config` must be valid (Validate()).
  explicit LearningRateSchedule(ScheduleConfig config);

  // η for the update that takes the model from version `update` to update+1.
  double At(uint64_t update) const;

  const ScheduleConfig& config() const { return config_; }

 private:
  ScheduleConfig config_;
};

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_ENGINE_LEARNING_RATE_SCHEDULE_H_
