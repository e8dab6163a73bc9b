#include "services/engine/learning_rate_schedule.h"

#include <cmath>
#include <string>
#include <utility>

namespace gaptrain {

Status ScheduleConfig::Validate() const {
  if (!(learning_rate > 0.0 && std::isfinite(learning_rate))) {
    return Status::InvalidArgument("optimizer.learningRate: must be > 0, got " +
                                   std::to_string(learning_rate));
  }
  if (!(warmup_start_factor > 0.0 && warmup_start_factor <= 1.0)) {
    return Status::InvalidArgument("optimizer.warmupEpochs: start factor must be in (0, 1], got " +
                                   std::to_string(warmup_start_factor));
  }
  if (!(decay_factor > 0.0 && decay_factor <= 1.0)) {
    return Status::InvalidArgument("optimizer.decay.factor: must be in (0, 1], got " +
                                   std::to_string(decay_factor));
  }
  double previous = 0.0;
  for (double f : decay_at_fractions) {
    if (!(f > previous && f < 1.0)) {
      return Status::InvalidArgument(
          "optimizer.decay.atFractions: must be increasing and in (0, 1), got " +
          std::to_string(f));
    }
    previous = f;
  }
  if (!decay_at_fractions.empty() && total_updates == 0) {
    return Status::InvalidArgument(
        "optimizer.decay.atFractions: needs the job's length (epochs or maxUpdates)");
  }
  return Status::OK();
}

LearningRateSchedule::LearningRateSchedule(ScheduleConfig config)
    : config_(std::move(config)) {}

double LearningRateSchedule::At(uint64_t update) const {
  const ScheduleConfig& c = config_;
  double lr = c.learning_rate;
  if (update < c.warmup_updates) {
    double progress = static_cast<double>(update) / static_cast<double>(c.warmup_updates);
    lr *= c.warmup_start_factor + (1.0 - c.warmup_start_factor) * progress;
  }
  for (double f : c.decay_at_fractions) {
    if (static_cast<double>(update) >= f * static_cast<double>(c.total_updates)) {
      lr *= c.decay_factor;
    }
  }
  return lr;
}

}  // namespace gaptrain
