// CoordinatorConfig: everything the coordinator's core decides with, in one
// plain struct: the task cutting, the job's length and goal, leases and
// timeouts. Built from the TrainingJob plus the coordinator's flags, so the
// core itself never reads files or flags.

#ifndef GAPTRAIN_SERVICES_COORDINATOR_COORDINATOR_CONFIG_H_
#define GAPTRAIN_SERVICES_COORDINATOR_COORDINATOR_CONFIG_H_

#include <cstdint>
#include <string>
#include <vector>

#include "services/api/training_job.h"
#include "services/base/status.h"

namespace gaptrain {

struct CoordinatorConfig {
  std::string job_name;

  // Data: positions [0, train_samples) of each epoch's permutation are cut
  // into tasks of samples_per_task (the last one of an epoch may be
  // shorter). With `shards` a position is a shard (spec.data.format
  // shards) and a task is one shard: train_samples counts shards.
  uint32_t train_samples = 0;
  uint32_t samples_per_task = 0;
  bool shards = false;
  uint64_t shuffle_seed = 1;   // passed to workers; the core never shuffles
  uint32_t batch_size = 1;     // passed to workers

  // The job's length: `epochs` (fractional: the last epoch covers that
  // fraction of the positions), or `max_updates` master versions when
  // epochs is 0. A target (spec.training.target, or targetAccuracy as
  // {accuracy, atLeast}) ends the job early.
  double epochs = 0;
  uint64_t max_updates = 0;
  TargetSpec target;

  uint32_t min_trainers = 1;   // Pending below this many live trainers
  // spec.workers.replicas: only reported (gaptrain_coordinator_desired_trainers),
  // the coordinator never starts trainers.
  uint32_t desired_trainers = 1;
  double lease_seconds = 10;   // a worker silent this long is gone

  // Failed when no worker was live for this long, when the master was
  // unreachable for this long, or when the job ran this long; 0 = never.
  double no_worker_timeout_seconds = 600;
  double master_timeout_seconds = 300;
  double active_deadline_seconds = 0;

  // How many masters hold θ (spec.master.shards; one per --master
  // address): the job's master version is the least of theirs, and the
  // master is unreachable while any of them is.
  uint32_t master_shards = 1;
  // Their addresses, shard i's at i, for the status; empty: not shown.
  std::vector<std::string> master_addresses;

  // Whether the evaluator is in the master's member set. It need not be:
  // it reads θ with observer pulls, which the master serves to anyone
  // (membership would cost a per-worker state buffer on the master, and a
  // sync step would wait for the evaluator's gradient).
  bool evaluator_is_member = false;

  // Whether a trainer that asked for a task and got none (the epoch's last
  // tasks are in flight elsewhere, or the job is Pending) stays a member.
  // Not in sync mode: a step there waits for (members − backups)
  // gradients, and a trainer without data gives none, so an epoch's tail
  // would deadlock. It rejoins when it gets its next task.
  bool idle_trainers_are_members = true;
};

// The most master shards a job has (--master's addresses).
constexpr uint32_t kMaxMasterShards = 64;

// Default batches per task (--task-batches): the most a task holds.
constexpr uint32_t kDefaultTaskBatches = 200;
// Tasks are made smaller when an epoch would hold fewer than this many per
// trainer (replicas, or maxReplicas when larger).
constexpr uint64_t kTasksPerTrainer = 8;

// The config for `job` with a training set of `train_samples` and tasks of
// at most `task_batches` batches, fewer when an epoch would otherwise hold
// fewer than kTasksPerTrainer tasks per trainer (never less than one
// batch); with sharded data, of spec.data.shards shards and one shard per
// task. Errors name the value that is out of range.
Status CoordinatorConfigFromJob(const TrainingJob& job, uint64_t train_samples,
                                uint32_t task_batches, CoordinatorConfig* config);

// Checks a config built by hand (tests) or by CoordinatorConfigFromJob.
Status ValidateCoordinatorConfig(const CoordinatorConfig& config);

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_COORDINATOR_COORDINATOR_CONFIG_H_
