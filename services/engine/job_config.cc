#include "services/engine/job_config.h"

#include <algorithm>
#include <cmath>

#include "services/base/available_cpus.h"

namespace gaptrain {

Status RuleConfigFromJob(const TrainingJob& job, RuleConfig* config) {
  const TrainingSpec& t = job.training;
  RuleConfig c;
  if (t.mode == "sync") {
    c.kind = RuleKind::kSync;
  } else {
    GAPTRAIN_RETURN_IF_ERROR(ParseRuleKind(t.staleness.rule, &c.kind));
    if (c.kind == RuleKind::kSync) {
      return Status::InvalidArgument(
          "spec.training.staleness.rule: use spec.training.mode: sync for synchronous training");
    }
  }
  c.momentum = static_cast<float>(t.optimizer.momentum);
  c.nesterov = t.optimizer.nesterov;
  c.weight_decay = static_cast<float>(t.optimizer.weight_decay);
  c.gap_source = t.staleness.gap_source == "echo" ? GapSource::kEcho : GapSource::kSnapshot;
  c.gap_precision = t.staleness.gap_precision == "bf16" ? GapPrecision::kBfloat16
                                                        : GapPrecision::kFloat32;
  c.penalize_weight_decay = t.staleness.penalize_weight_decay;
  c.gap_beta = t.staleness.gap_beta;
  c.gap_epsilon = t.staleness.gap_epsilon;
  c.dc_lambda = static_cast<float>(t.staleness.dc_lambda);
  c.dc_adaptive = t.staleness.dc_adaptive;
  c.max_staleness = t.staleness.max_staleness;
  c.backup_workers = t.sync.backup_workers;
  c.num_threads = job.master.update_threads > 0 ? static_cast<int>(job.master.update_threads)
                                                : std::min(AvailableCpus(), 256);
  GAPTRAIN_RETURN_IF_ERROR(c.Validate());
  *config = c;
  return Status::OK();
}

uint64_t TotalUpdates(const TrainingJob& job, double updates_per_epoch) {
  if (job.training.max_updates > 0) return job.training.max_updates;
  return static_cast<uint64_t>(std::ceil(job.training.epochs * updates_per_epoch));
}

ScheduleConfig ScheduleFromJob(const TrainingJob& job, double updates_per_epoch,
                               uint32_t num_workers) {
  const OptimizerSpec& o = job.training.optimizer;
  ScheduleConfig s;
  s.learning_rate = o.learning_rate;
  s.warmup_updates = static_cast<uint64_t>(std::llround(o.warmup_epochs * updates_per_epoch));
  s.warmup_start_factor = 1.0 / std::max<uint32_t>(1, num_workers);
  if (o.decay.type == "step") {
    s.decay_at_fractions = o.decay.at_fractions;
    s.decay_factor = o.decay.factor;
  }
  s.total_updates = TotalUpdates(job, updates_per_epoch);
  return s;
}

}  // namespace gaptrain
