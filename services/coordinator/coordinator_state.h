// CoordinatorState: the coordinator's core, the job's control plane as a
// deterministic state machine. Workers register and get an id and a role,
// keep a lease with heartbeats (which carry progress), take data tasks,
// complete them and leave; the evaluator reports accuracy; Tick(now)
// expires silent workers and moves the lifecycle. Membership, TaskQueue
// and Lifecycle hold the parts; this class owns the rules that tie them.
//
// What callers may rely on:
//   - No I/O, no clock, no threads: every verb takes `now` (seconds on one
//     monotonic clock whose values are also Unix-like, see docs) and the
//     same calls give the same results. Not thread-safe: the service
//     serialises calls under a mutex.
//   - A verb that returns an error changes nothing (not even the caller's
//     lease), except that a refused completion is counted as stale. INVALID_ARGUMENT: malformed input. NOT_FOUND: an id that was
//     never issued. FAILED_PRECONDITION: a worker that is gone, a task the
//     worker does not hold, a wrong role, a finished job. ALREADY_EXISTS: a
//     second evaluator.
//   - A successful call from a worker renews its lease.
//   - Exactly once: every position of an epoch is covered by exactly one
//     completed task. A task is held by at most one worker; a departed
//     worker's task returns to the front of the queue (counted as
//     reassigned, with the samples the worker had reported on it counted as
//     lost); a completion from a worker that no longer holds the task is
//     refused (FAILED_PRECONDITION, counted as stale). A repeated
//     NextTask returns the task already held, and a repeated CompleteTask
//     from the worker that completed the task succeeds with
//     already_completed, so retries after a lost reply are safe.
//   - A trainer may hand its task back untrained (ReleaseTask: its data's
//     store is unreachable): the task goes to the front of its queue like a
//     departed worker's, counted in tasks_released (its reported progress
//     in samples_lost), nothing of it credited, and the trainer stays a
//     live member that asks NextTask again. A data-unavailable release
//     records why (data_unavailable(): since when, the last message and
//     worker, the releases) until a task is next completed.
//   - An epoch advances when all its tasks are done; the job succeeds after
//     the last one, once no task is waiting to be trained again.
//   - Training lost in a master restore is done again: a completion says
//     where its pushes landed (MasterPosition per master shard and run),
//     and a task whose updates a master lost (UnconfirmedTasks: a
//     completion judged lost at once, or a pending one judged lost when
//     ObserveMaster hears of the shard's run that resumed from an older
//     checkpoint) is queued again,
//     in any epoch: the current epoch's at the front of its queue, an
//     earlier epoch's in the RetrainQueue, handed out before new work.
//     Counted in tasks_retrained and samples_retrained (with the samples
//     workers retrained themselves, which they report on completion).
//   - With config.master_shards = S > 1 masters each hold a part of θ:
//     each shard's runs are judged on their own (a restart of one loses
//     only what that shard had not checkpointed, and the tasks it reached
//     are trained whole again), the job's master version is the least of
//     the shards' versions, and the master is unreachable while any shard
//     is, the master timeout running from the longest-unreachable one.
//   - Save() and Restore() carry everything a restart needs: completed
//     tasks stay completed, in-flight tasks stay with their workers, whose
//     leases restart at the restore time.
//   - durable_generation() grows with every change a restart must not lose
//     (persist it before replying); progress_generation() with heartbeat
//     progress only; members_generation() whenever Members() changes.

#ifndef GAPTRAIN_SERVICES_COORDINATOR_COORDINATOR_STATE_H_
#define GAPTRAIN_SERVICES_COORDINATOR_COORDINATOR_STATE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "proto/gaptrain.pb.h"
#include "services/base/status.h"
#include "services/coordinator/coordinator_config.h"
#include "services/coordinator/lifecycle.h"
#include "services/coordinator/master_training.h"
#include "services/coordinator/membership.h"
#include "services/coordinator/retrain_queue.h"
#include "services/coordinator/task_queue.h"
#include "services/coordinator/unconfirmed_tasks.h"

namespace gaptrain {

enum class LeaveReason { kPreempted, kFailed, kFinished };

// "preempted" | "failed" | "finished"
const char* LeaveReasonName(LeaveReason reason);

// What a heartbeat reports.
struct WorkerProgress {
  uint64_t task_id = 0;        // the task the progress is about; 0: none
  uint32_t samples_done = 0;   // positions of that task trained so far
  std::optional<float> loss;   // last training loss; finite
  uint64_t master_version = 0; // newest master version seen; 0: unknown
};

// A metric of the user's evaluation beside accuracy and loss (top-5
// accuracy, perplexity, F1), as ReportEvaluation takes them.
struct NamedMetric {
  std::string name;
  double value = 0;
};
using EvalMetrics = std::vector<NamedMetric>;
constexpr size_t kMaxEvalMetrics = 32;

struct RegisterResult {
  WorkerId id = 0;
  WorkerRole role = WorkerRole::kTrainer;
  bool resumed = false;  // previous id still live: same id, same task
  DataTask task;         // resumed with a task in flight; else id 0
};

enum class TaskOutcome { kAssigned, kWaitForWorkers, kEpochFinishing, kJobFinished };

struct NextTaskResult {
  TaskOutcome outcome = TaskOutcome::kWaitForWorkers;
  DataTask task;       // kAssigned only
  std::string reason;  // for logs
};

// What a worker reports with a completion about its pushes.
struct TaskCompletion {
  // Per master shard and run that applied the task's pushes, the newest
  // version they reached. Empty: unknown (an older worker), taken as
  // durable.
  std::vector<MasterPosition> reached;
  // Positions it trained again itself after a master restore.
  uint32_t samples_retrained = 0;
};

struct CompleteTaskResult {
  DataTask task;
  bool already_completed = false;  // a retry; nothing was counted again
  bool epoch_advanced = false;
  bool retrain = false;  // its updates were lost already: queued again
  bool data_available_again = false;  // it ended a data-unavailable episode
};

// Why a trainer hands its task back.
enum class ReleaseReason { kDataUnavailable };

// "data_unavailable"
const char* ReleaseReasonName(ReleaseReason reason);

// The most bytes of a release's message.
constexpr size_t kMaxReleaseMessageBytes = 1024;

struct ReleaseTaskResult {
  DataTask task;                  // the task handed back
  bool already_released = false;  // a retry; nothing changed
};

// A trainer's data store could not be reached: set by a data-unavailable
// release, cleared by the next completed task (the store came back).
struct DataUnavailable {
  double since = 0;       // the episode's first release
  std::string message;    // what the last release's dataset raised
  WorkerId worker = 0;    // the last releasing trainer
  std::string host;       // its host
  uint64_t releases = 0;  // releases in this episode
};

// What ObserveMaster found.
struct MasterObservation {
  bool new_run = false;   // a master run newer than the last one seen
  bool restore = false;   // ... that replaced one the coordinator knew
  std::vector<DataTask> retrained;  // tasks queued again
};

struct TickResult {
  std::vector<WorkerId> expired;  // leases that ran out in this tick
  bool phase_changed = false;
};

// Totals since the job started; they survive restarts.
struct CoordinatorCounters {
  uint64_t joins = 0;
  uint64_t left_finished = 0;
  uint64_t left_preempted = 0;
  uint64_t left_failed = 0;
  uint64_t expiries = 0;
  uint64_t tasks_reassigned = 0;
  uint64_t samples_lost = 0;       // reported progress on tasks taken back
  uint64_t stale_completions = 0;  // CompleteTask for a task not held
  uint64_t tasks_retrained = 0;    // queued again: a master restore lost them
  uint64_t samples_retrained = 0;  // their samples, and those workers rewound
  uint64_t master_restores = 0;    // master runs seen replacing a known one
  uint64_t tasks_released = 0;     // handed back untrained (ReleaseTask)
};

struct LiveWorkerStatus {
  WorkerRecord record;
  double seconds_since_heartbeat = 0;
};

// A master shard as the membership feed last heard it.
struct MasterShardStatus {
  uint32_t shard = 0;
  std::string address;  // "" when the config names none
  bool reachable = true;
  uint64_t version = 0;
  MasterRun run;
  ShardTotals totals;
};

// What Status reports: the gRPC reply and /status are built from this.
struct JobStatus {
  std::string job_name;
  JobPhase phase = JobPhase::kPending;
  JobCondition condition;  // the current phase's
  std::vector<JobCondition> conditions;

  uint32_t live_workers = 0;
  uint32_t live_trainers = 0;
  uint32_t min_trainers = 0;
  CoordinatorCounters counters;
  std::vector<LiveWorkerStatus> workers;

  uint32_t epoch = 0;
  double epochs = 0;
  uint64_t max_updates = 0;
  uint32_t tasks_total = 0;
  uint32_t tasks_queued = 0;
  uint32_t tasks_in_flight = 0;
  uint32_t tasks_done = 0;
  uint32_t tasks_retrain_queued = 0;  // earlier epochs' lost tasks, queued or held
  uint32_t tasks_unconfirmed = 0;     // completed, not yet in a master checkpoint
  uint64_t samples_done_in_epoch = 0;
  uint32_t samples_in_epoch = 0;
  double progress = 0;  // fraction of the job, [0, 1]
  uint64_t master_version = 0;

  std::optional<double> last_accuracy;
  double last_eval_loss = 0;
  uint64_t last_eval_version = 0;
  EvalMetrics last_eval_metrics;  // beside accuracy and loss
  std::string target;             // "perplexity <= 20"; "" = none
  std::optional<DataUnavailable> data_unavailable;  // absent: the data is available

  // The master shards, and their training as one (master_training.h).
  std::vector<MasterShardStatus> masters;
  std::optional<double> mean_gap, mean_staleness;
  double updates_per_second = 0;
};

class CoordinatorState {
 public:
  // A new job at `now`: Pending, epoch 0, every task queued.
  static Status Create(const CoordinatorConfig& config, double now,
                       std::unique_ptr<CoordinatorState>* state);

  // The state saved by Save(), for the same job and task cutting (else
  // FAILED_PRECONDITION naming what differs); inconsistent contents are
  // DATA_LOSS. Live workers' leases restart at `now`, and so do the
  // no-worker and master timeouts.
  static Status Restore(const CoordinatorConfig& config, const proto::CoordinatorSnapshot& snapshot,
                        double now, std::unique_ptr<CoordinatorState>* state);
  void Save(proto::CoordinatorSnapshot* snapshot) const;

  // A worker joins. `host` is required (printable, no spaces, at most 253
  // characters). The first live worker asking for kEvaluator gets the
  // role; a second one is ALREADY_EXISTS while the first is live. With
  // `previous_id` still live from the same host and role, the worker gets
  // its id and task back (resumed); a previous id that is gone or unknown
  // is ignored and a new id issued. Refused once the job has finished.
  Status Register(double now, const std::string& host, WorkerRole role, WorkerId previous_id,
                  RegisterResult* result);

  // Renews the lease and records progress. Progress about a task the
  // worker does not hold (a heartbeat that crossed a CompleteTask) is
  // ignored. *held_task is the task the worker holds (0: none).
  Status Heartbeat(double now, WorkerId id, const WorkerProgress& progress, uint64_t* held_task);

  // The worker's next task: the one it holds if any, else the front of the
  // queue; or why there is none.
  Status NextTask(double now, WorkerId id, NextTaskResult* result);

  Status CompleteTask(double now, WorkerId id, uint64_t task_id,
                      const TaskCompletion& completion, CompleteTaskResult* result);
  // A completion that says nothing about the master (taken as durable).
  Status CompleteTask(double now, WorkerId id, uint64_t task_id, CompleteTaskResult* result) {
    return CompleteTask(now, id, task_id, TaskCompletion(), result);
  }

  // The trainer hands back task `task_id`, which it holds, untrained: the
  // task goes to the front of its queue, nothing of it is credited, and the
  // trainer stays live without a task. `message` (what its dataset raised)
  // is printable UTF-8 of at most kMaxReleaseMessageBytes. Releasing the
  // task it released last again is OK with already_released, changing
  // nothing; a task it does not hold is FAILED_PRECONDITION.
  Status ReleaseTask(double now, WorkerId id, uint64_t task_id, ReleaseReason reason,
                     const std::string& message, ReleaseTaskResult* result);

  // A graceful departure. Leaving again is OK with *already_gone.
  Status Leave(double now, WorkerId id, LeaveReason reason, bool* already_gone);

  // The evaluator's result for master version `version`: accuracy, loss
  // and the metrics of the user's evaluation beside them (at most
  // kMaxEvalMetrics, names as kMetricNamePattern and distinct, not accuracy
  // or loss, values finite). An older version than the last reported one
  // is accepted and ignored. The first that reaches config.target ends the
  // job (Succeeded).
  Status ReportEvaluation(double now, WorkerId id, double accuracy, double loss, uint64_t version,
                          const EvalMetrics& metrics = {});

  // Whether the process could reach master shard `shard` (its membership
  // feed's last call; `error` names the shard). Any shard unreachable for
  // master_timeout_seconds fails the job with the error of the one
  // unreachable longest. A shard >= config.master_shards is ignored.
  void ReportMasterHealth(double now, uint32_t shard, bool reachable, const std::string& error);
  // A shard's training so far, as its SetMembers reply said
  // (master_training.h); kept for the status, not saved.
  void ObserveMasterTotals(double now, uint32_t shard, const ShardTotals& totals) {
    training_.Observe(now, shard, totals);
  }
  // One master: shard 0.
  void ReportMasterHealth(double now, bool reachable, const std::string& error) {
    ReportMasterHealth(now, 0, reachable, error);
  }

  // Master shard `shard` answered its membership feed: it is `run`, at
  // `version`, with `durable_version` in its newest checkpoint. A new run
  // that resumed from an older point makes the tasks whose updates it lost
  // train again, and sets the shard's version (it may go back); a version
  // of the run already known only raises it. Ignored once the job has
  // finished, and for a shard >= config.master_shards.
  MasterObservation ObserveMaster(double now, uint32_t shard, const MasterRun& run,
                                  uint64_t version, uint64_t durable_version);
  // One master: shard 0.
  MasterObservation ObserveMaster(double now, const MasterRun& run, uint64_t version,
                                  uint64_t durable_version) {
    return ObserveMaster(now, 0, run, version, durable_version);
  }

  // Expires leases and moves the lifecycle on timeouts. Call it often
  // (the process does every 200 ms); expiries happen at the first Tick at
  // or after last_seen + lease_seconds.
  TickResult Tick(double now);

  JobStatus Describe(double now) const;

  JobPhase phase() const { return lifecycle_.phase(); }
  const Lifecycle& lifecycle() const { return lifecycle_; }
  const CoordinatorConfig& config() const { return config_; }
  const CoordinatorCounters& counters() const { return counters_; }
  const TaskQueue& tasks() const { return tasks_; }
  const RetrainQueue& retrain() const { return retrain_; }
  const UnconfirmedTasks& unconfirmed() const { return unconfirmed_; }
  // The job's master version: the least of the shards' newest versions
  // (every shard has applied at least this many updates). A version a
  // worker or the evaluator reports is taken as one every shard reached.
  uint64_t master_version() const { return master_version_; }
  // Master shard `shard`'s newest version known (shard < config.master_shards).
  uint64_t shard_version(uint32_t shard) const { return shard_versions_.at(shard); }
  std::optional<double> last_accuracy() const { return last_accuracy_; }
  double last_eval_loss() const { return last_eval_loss_; }
  const EvalMetrics& last_eval_metrics() const { return last_eval_metrics_; }
  // Evaluations stored since this object was made (not saved): what shows
  // them changes only when this does.
  uint64_t evaluations_stored() const { return evaluations_stored_; }
  const Membership& membership() const { return membership_; }
  // Set while a trainer's data store is unreachable (see ReleaseTask).
  const std::optional<DataUnavailable>& data_unavailable() const { return data_unavailable_; }

  // The master's member set: live trainers, and the evaluator when
  // config.evaluator_is_member. Ascending.
  std::vector<WorkerId> Members() const;
  uint64_t members_generation() const { return members_generation_; }
  uint64_t durable_generation() const { return durable_generation_; }
  uint64_t progress_generation() const { return progress_generation_; }

 private:
  CoordinatorState(const CoordinatorConfig& config, double now);

  // Epoch e's positions (the last epoch of a fractional length is
  // shorter) and the first task id's base.
  uint32_t SamplesInEpoch(uint32_t epoch) const;
  uint64_t TaskIdBase(uint32_t epoch) const;
  // 0 when the job is measured in updates.
  uint32_t TotalEpochs() const;
  uint64_t TasksPerFullEpoch() const;
  // Any task of the job by id (its epoch and range), whatever its state;
  // false for an id no epoch up to the current one has.
  bool TaskById(uint64_t task_id, DataTask* task) const;
  // The task `worker` holds, in the current epoch or the retrain queue.
  bool HeldTask(const WorkerRecord& worker, DataTask* task) const;
  // Queues a completed task again whose updates were lost.
  void Retrain(uint64_t task_id, MasterObservation* observation);
  // Puts a held task back at the front of its queue (this epoch's, or the
  // retrain queue).
  void Requeue(uint64_t task_id);
  // A retried CompleteTask or ReleaseTask (the reply was lost): renews the
  // lease, fills in the task, changes nothing else.
  Status Retried(double now, WorkerRecord* worker, uint64_t task_id, DataTask* task);
  // Why `worker` cannot complete or hand back `task_id`: NOT_FOUND for an
  // id never issued, else FAILED_PRECONDITION ending with `rule`.
  Status NotHeld(const WorkerRecord& worker, uint64_t task_id, const std::string& rule) const;
  // After a completion: advances the epoch or ends the job.
  void AdvanceIfDone(double now, CompleteTaskResult* result);

  // The live worker `id`, or NOT_FOUND / FAILED_PRECONDITION.
  Status FindLive(WorkerId id, WorkerRecord** worker);
  // Takes `worker`'s task back (front of the queue) and forgets the worker.
  void Depart(WorkerRecord* worker);
  // Records a version every master shard reached (from a worker or the
  // evaluator); may end the job (maxUpdates).
  void ObserveMasterVersion(uint64_t version, double now);
  // After a shard's version changed: the job's version is the least of
  // them; may end the job (maxUpdates).
  void UpdateMasterVersion(double now);
  // Pending <-> Running and the timeouts; terminal phases never change.
  void UpdatePhase(double now);
  void MoveTo(JobPhase to, const std::string& reason, const std::string& message, double now);
  void MembersChanged() { ++members_generation_; }
  // Marks a trainer that got no task (or got one again); see
  // CoordinatorConfig::idle_trainers_are_members.
  void SetIdle(WorkerRecord* worker, bool idle);
  void Durable() { ++durable_generation_; }

  const CoordinatorConfig config_;
  Membership membership_;
  TaskQueue tasks_;
  RetrainQueue retrain_;
  UnconfirmedTasks unconfirmed_;
  Lifecycle lifecycle_;
  CoordinatorCounters counters_;
  double created_time_;
  double last_live_time_;   // last time a worker was live (or start)
  // Per master shard: since when it has been unreachable (unset: it
  // answered last time) and why.
  struct ShardHealth {
    std::optional<double> down_since;
    std::string error;
  };
  std::vector<ShardHealth> master_health_;
  std::vector<uint64_t> shard_versions_;  // per master shard
  MasterTraining training_;
  uint64_t master_version_ = 0;           // the least of shard_versions_
  std::optional<double> last_accuracy_;
  double last_eval_loss_ = 0;
  uint64_t last_eval_version_ = 0;
  EvalMetrics last_eval_metrics_;
  uint64_t evaluations_stored_ = 0;
  std::optional<DataUnavailable> data_unavailable_;

  uint64_t members_generation_ = 0;
  uint64_t durable_generation_ = 0;
  uint64_t progress_generation_ = 0;
};

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_COORDINATOR_COORDINATOR_STATE_H_
