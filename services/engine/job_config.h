// The master's view of a TrainingJob: the update rule and the learning-rate
// schedule it implies. Shared by the master service and the simulator, so
// both run a job's rule with the same settings.

#ifndef GAPTRAIN_SERVICES_ENGINE_JOB_CONFIG_H_
#define GAPTRAIN_SERVICES_ENGINE_JOB_CONFIG_H_

#include <cstdint>

#include "services/api/training_job.h"
#include "services/base/status.h"
#include "services/engine/learning_rate_schedule.h"
#include "services/engine/rules/rule_config.h"

namespace gaptrain {

// spec.training.{mode, optimizer, staleness, sync} and spec.master
// (updateThreads 0 becomes AvailableCpus() of this process).
Status RuleConfigFromJob(const TrainingJob& job, RuleConfig* config);

// The schedule for a job whose epoch has `updates_per_epoch` master
// updates (samples / batch in async mode, samples / (aggregated · batch) in
// sync mode), with `num_workers` workers (warm-up starts at η/N).
ScheduleConfig ScheduleFromJob(const TrainingJob& job, double updates_per_epoch,
                               uint32_t num_workers);

// Total master updates of the job: maxUpdates, or epochs · updates_per_epoch.
uint64_t TotalUpdates(const TrainingJob& job, double updates_per_epoch);

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_ENGINE_JOB_CONFIG_H_
