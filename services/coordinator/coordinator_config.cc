#include "services/coordinator/coordinator_config.h"

#include <algorithm>

#include <cmath>

namespace gaptrain {

Status CoordinatorConfigFromJob(const TrainingJob& job, uint64_t train_samples,
                                uint32_t task_batches, CoordinatorConfig* config) {
  GAPTRAIN_RETURN_IF_ERROR(CheckJobAgainstData(job, train_samples));
  if (task_batches == 0) return Status::InvalidArgument("--task-batches: must be >= 1");
  CoordinatorConfig c;
  c.job_name = job.name;
  c.train_samples = static_cast<uint32_t>(train_samples);
  // A task never exceeds the epoch: one task per epoch at most.
  // An epoch ends when its last task does, and trainers that find no task
  // left wait for it: with at least kTasksPerTrainer tasks per trainer in
  // an epoch, that tail stays a small part of the epoch.
  const uint64_t batch = job.training.batch_size;
  const uint64_t trainers = std::max(job.workers.replicas, job.workers.max_replicas);
  const uint64_t spread_batches =
      std::max<uint64_t>(1, train_samples / (kTasksPerTrainer * std::max<uint64_t>(1, trainers) * batch));
  const uint64_t per_task = std::min<uint64_t>(task_batches, spread_batches) * batch;
  c.samples_per_task = static_cast<uint32_t>(std::min<uint64_t>(per_task, train_samples));
  if (job.data.Sharded()) {
    // A shard is read as a stream from its start: a task is one shard, so
    // that a task handed back is read again from where a shard starts.
    GAPTRAIN_RETURN_IF_ERROR(CheckJobAgainstData(job, job.data.shards));
    c.shards = true;
    c.train_samples = static_cast<uint32_t>(job.data.shards);
    c.samples_per_task = 1;
  }
  c.shuffle_seed = job.data.shuffle_seed;
  c.batch_size = job.training.batch_size;
  c.epochs = job.training.epochs;
  c.max_updates = job.training.max_updates;
  c.target = JobTarget(job.training);
  c.min_trainers = job.workers.min_replicas == 0 ? job.workers.replicas : job.workers.min_replicas;
  c.desired_trainers = job.workers.replicas;
  c.lease_seconds = job.coordinator.lease_seconds;
  c.idle_trainers_are_members = job.training.mode != "sync";
  c.active_deadline_seconds = static_cast<double>(job.run_policy.active_deadline_seconds);
  GAPTRAIN_RETURN_IF_ERROR(ValidateCoordinatorConfig(c));
  *config = c;
  return Status::OK();
}

Status ValidateCoordinatorConfig(const CoordinatorConfig& c) {
  if (c.train_samples == 0) return Status::InvalidArgument("train_samples: must be >= 1");
  if (c.samples_per_task == 0 || c.samples_per_task > c.train_samples) {
    return Status::InvalidArgument("samples_per_task: must be in [1, train_samples], got " +
                                   std::to_string(c.samples_per_task));
  }
  if (!(c.epochs >= 0) || !std::isfinite(c.epochs)) {
    return Status::InvalidArgument("epochs: must be finite and >= 0");
  }
  if ((c.epochs > 0) == (c.max_updates > 0)) {
    return Status::InvalidArgument("set exactly one of epochs and max_updates");
  }
  if (c.epochs > 0 && c.epochs * c.train_samples < 1) {
    return Status::InvalidArgument("epochs: covers no sample of the training set");
  }
  if (c.target.IsSet() && std::isnan(c.target.at_least) == std::isnan(c.target.at_most)) {
    return Status::InvalidArgument("target: needs exactly one of at_least and at_most");
  }
  if (c.min_trainers == 0) return Status::InvalidArgument("min_trainers: must be >= 1");
  if (!(c.lease_seconds > 0) || !std::isfinite(c.lease_seconds)) {
    return Status::InvalidArgument("lease_seconds: must be > 0");
  }
  for (double t : {c.no_worker_timeout_seconds, c.master_timeout_seconds,
                   c.active_deadline_seconds}) {
    if (!(t >= 0) || !std::isfinite(t)) {
      return Status::InvalidArgument("timeouts must be finite and >= 0 (0 = never)");
    }
  }
  if (c.master_shards == 0 || c.master_shards > kMaxMasterShards) {
    return Status::InvalidArgument("master_shards: must be in [1, " +
                                   std::to_string(kMaxMasterShards) + "], got " +
                                   std::to_string(c.master_shards));
  }
  if (!c.master_addresses.empty() && c.master_addresses.size() != c.master_shards) {
    return Status::InvalidArgument("master_addresses: " +
                                   std::to_string(c.master_addresses.size()) +
                                   " addresses for " + std::to_string(c.master_shards) +
                                   " master shards");
  }
  return Status::OK();
}

}  // namespace gaptrain
