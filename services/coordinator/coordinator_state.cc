#include "services/coordinator/coordinator_state.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "services/base/utf8.h"
#include "services/coordinator/coordinator_proto.h"

namespace gaptrain {
namespace {

constexpr size_t kMaxHostLength = 253;  // a DNS name

Status ValidateHost(const std::string& host) {
  if (host.empty()) return Status::InvalidArgument("host: required (the pod or host name)");
  if (host.size() > kMaxHostLength) {
    return Status::InvalidArgument("host: at most " + std::to_string(kMaxHostLength) +
                                   " characters, got " + std::to_string(host.size()));
  }
  for (unsigned char c : host) {
    if (c <= 0x20 || c >= 0x7f) {
      return Status::InvalidArgument("host: printable ASCII without spaces only");
    }
  }
  return Status::OK();
}

std::string Worker(WorkerId id) { return "worker " + std::to_string(id); }

// `field` names the text in errors ("message").
Status ValidateReleaseMessage(const std::string& message, const std::string& field) {
  if (message.size() > kMaxReleaseMessageBytes) {
    return Status::InvalidArgument(field + ": at most " +
                                   std::to_string(kMaxReleaseMessageBytes) + " bytes, got " +
                                   std::to_string(message.size()));
  }
  if (!IsPrintableUtf8(message)) {
    return Status::InvalidArgument(field + ": UTF-8 without control characters only");
  }
  return Status::OK();
}

// `field` names the list in errors ("metrics").
Status ValidateEvalMetrics(const EvalMetrics& metrics, const std::string& field) {
  if (metrics.size() > kMaxEvalMetrics) {
    return Status::InvalidArgument(field + ": at most " + std::to_string(kMaxEvalMetrics) +
                                   " metrics, got " + std::to_string(metrics.size()));
  }
  for (size_t i = 0; i < metrics.size(); ++i) {
    const std::string at = field + "[" + std::to_string(i) + "]";
    const NamedMetric& m = metrics[i];
    if (!IsMetricName(m.name)) {
      return Status::InvalidArgument(at + ".name: " + kMetricNameMeaning + ", got '" +
                                     m.name.substr(0, 80) + "'");
    }
    if (IsEvaluatorMetric(m.name)) {
      return Status::InvalidArgument(at + ".name: " + m.name +
                                     " has a field of its own in the request");
    }
    for (size_t j = 0; j < i; ++j) {
      if (metrics[j].name == m.name) {
        return Status::InvalidArgument(at + ".name: " + m.name + " is also " + field + "[" +
                                       std::to_string(j) + "]");
      }
    }
    if (!std::isfinite(m.value)) {
      return Status::InvalidArgument(at + ".value: must be finite, got " +
                                     std::to_string(m.value));
    }
  }
  return Status::OK();
}

// The value of `name` in an evaluation, if it reports it.
std::optional<double> MetricValue(const std::string& name, double accuracy, double loss,
                                  const EvalMetrics& metrics) {
  if (name == "accuracy") return accuracy;
  if (name == "loss") return loss;
  for (const NamedMetric& m : metrics) {
    if (m.name == name) return m.value;
  }
  return std::nullopt;
}

std::string FormatMetric(double v) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.6g", v);
  return text;
}

std::string Seconds(double s) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g s", s);
  return text;
}

}  // namespace

const char* ReleaseReasonName(ReleaseReason reason) {
  switch (reason) {
    case ReleaseReason::kDataUnavailable: return "data_unavailable";
  }
  return "data_unavailable";
}

const char* LeaveReasonName(LeaveReason reason) {
  switch (reason) {
    case LeaveReason::kPreempted: return "preempted";
    case LeaveReason::kFailed: return "failed";
    case LeaveReason::kFinished: return "finished";
  }
  return "failed";
}

CoordinatorState::CoordinatorState(const CoordinatorConfig& config, double now)
    : config_(config),
      membership_(config.lease_seconds),
      tasks_(0, SamplesInEpoch(0), config.samples_per_task, TaskIdBase(0)),
      lifecycle_(now),
      created_time_(now),
      last_live_time_(now),
      master_health_(config.master_shards),
      shard_versions_(config.master_shards, 0),
      training_(config.master_shards) {}

Status CoordinatorState::Create(const CoordinatorConfig& config, double now,
                                std::unique_ptr<CoordinatorState>* state) {
  GAPTRAIN_RETURN_IF_ERROR(ValidateCoordinatorConfig(config));
  state->reset(new CoordinatorState(config, now));
  return Status::OK();
}

uint32_t CoordinatorState::SamplesInEpoch(uint32_t epoch) const {
  const uint32_t n = config_.train_samples;
  if (config_.epochs <= 0) return n;
  const double whole = std::floor(config_.epochs);
  if (epoch < whole) return n;
  const double last = std::llround((config_.epochs - whole) * n);
  return epoch == whole ? static_cast<uint32_t>(std::min<double>(last, n)) : 0;
}

uint32_t CoordinatorState::TotalEpochs() const {
  if (config_.epochs <= 0) return 0;
  const uint32_t whole = static_cast<uint32_t>(std::floor(config_.epochs));
  return whole + (SamplesInEpoch(whole) > 0 ? 1 : 0);
}

uint64_t CoordinatorState::TasksPerFullEpoch() const {
  return (static_cast<uint64_t>(config_.train_samples) + config_.samples_per_task - 1) /
         config_.samples_per_task;
}

uint64_t CoordinatorState::TaskIdBase(uint32_t epoch) const {
  return epoch * TasksPerFullEpoch();
}

bool CoordinatorState::TaskById(uint64_t task_id, DataTask* task) const {
  if (task_id == 0) return false;
  const uint64_t per_epoch = TasksPerFullEpoch();
  const uint64_t epoch = (task_id - 1) / per_epoch;
  if (epoch > tasks_.epoch()) return false;
  const uint64_t index = (task_id - 1) % per_epoch;
  const uint64_t samples = SamplesInEpoch(static_cast<uint32_t>(epoch));
  const uint64_t begin = index * config_.samples_per_task;
  if (begin >= samples) return false;
  task->id = task_id;
  task->epoch = static_cast<uint32_t>(epoch);
  task->index = static_cast<uint32_t>(index);
  task->range.begin = static_cast<uint32_t>(begin);
  task->range.end = static_cast<uint32_t>(std::min(begin + config_.samples_per_task, samples));
  return true;
}

bool CoordinatorState::HeldTask(const WorkerRecord& worker, DataTask* task) const {
  if (worker.task_id == 0) return false;
  uint32_t index = 0;
  if (tasks_.IndexOf(worker.task_id, &index)) {
    if (tasks_.state(index) != TaskQueue::State::kInFlight || tasks_.worker(index) != worker.id) {
      return false;
    }
    *task = tasks_.Task(index);
    return true;
  }
  return retrain_.Holder(worker.task_id) == worker.id && retrain_.Find(worker.task_id, task);
}

std::vector<WorkerId> CoordinatorState::Members() const {
  return membership_.Ids(config_.evaluator_is_member, config_.idle_trainers_are_members);
}

Status CoordinatorState::FindLive(WorkerId id, WorkerRecord** worker) {
  if (id == 0) return Status::InvalidArgument("worker_id: required");
  *worker = membership_.Find(id);
  if (*worker != nullptr) return Status::OK();
  if (membership_.WasIssued(id)) {
    return Status::FailedPrecondition(Worker(id) +
                                      " is no longer live (it left or its lease expired); "
                                      "register again");
  }
  return Status::NotFound("unknown " + Worker(id));
}

void CoordinatorState::Requeue(uint64_t task_id) {
  uint32_t index = 0;
  if (tasks_.IndexOf(task_id, &index)) {
    tasks_.Requeue(index);
  } else {
    retrain_.Requeue(task_id);
  }
}

Status CoordinatorState::Retried(double now, WorkerRecord* worker, uint64_t task_id,
                                 DataTask* task) {
  membership_.Renew(worker, now);
  TaskById(task_id, task);
  UpdatePhase(now);
  return Status::OK();
}

Status CoordinatorState::NotHeld(const WorkerRecord& worker, uint64_t task_id,
                                 const std::string& rule) const {
  if (task_id > TaskIdBase(tasks_.epoch()) + tasks_.num_tasks()) {
    return Status::NotFound("task " + std::to_string(task_id) + " was never issued");
  }
  return Status::FailedPrecondition(
      Worker(worker.id) + " does not hold task " + std::to_string(task_id) +
      (worker.task_id == 0 ? std::string(" (it holds none)")
                           : " (it holds task " + std::to_string(worker.task_id) + ")") +
      "; " + rule);
}

void CoordinatorState::Depart(WorkerRecord* worker) {
  DataTask held;
  if (HeldTask(*worker, &held)) {
    Requeue(held.id);
    ++counters_.tasks_reassigned;
    counters_.samples_lost += worker->samples_done;
  }
  last_live_time_ = std::max(last_live_time_, worker->last_seen);
  membership_.Remove(worker->id);
  MembersChanged();
  Durable();
}

void CoordinatorState::MoveTo(JobPhase to, const std::string& reason, const std::string& message,
                              double now) {
  if (lifecycle_.MoveTo(to, reason, message, now)) Durable();
}

void CoordinatorState::ObserveMasterVersion(uint64_t version, double now) {
  if (version <= master_version_) return;
  for (uint64_t& v : shard_versions_) v = std::max(v, version);
  UpdateMasterVersion(now);
}

void CoordinatorState::UpdateMasterVersion(double now) {
  const uint64_t version = *std::min_element(shard_versions_.begin(), shard_versions_.end());
  if (version == master_version_) return;
  master_version_ = version;
  ++progress_generation_;
  if (config_.max_updates > 0 && version >= config_.max_updates) {
    MoveTo(JobPhase::kSucceeded, "MaxUpdatesReached",
           "the master reached version " + std::to_string(version) + " (maxUpdates " +
               std::to_string(config_.max_updates) + ")",
           now);
  }
}

void CoordinatorState::UpdatePhase(double now) {
  if (membership_.live() > 0) last_live_time_ = now;
  if (lifecycle_.finished()) return;
  const size_t trainers = membership_.live_trainers();
  const std::string count = std::to_string(trainers) + " of at least " +
                            std::to_string(config_.min_trainers) + " trainers live";
  // The master shard unreachable longest: the job needs every shard.
  const ShardHealth* down = nullptr;
  for (const ShardHealth& h : master_health_) {
    if (h.down_since && (down == nullptr || *h.down_since < *down->down_since)) down = &h;
  }
  if (config_.active_deadline_seconds > 0 &&
      now - created_time_ >= config_.active_deadline_seconds) {
    MoveTo(JobPhase::kFailed, "DeadlineExceeded",
           "the job ran longer than activeDeadlineSeconds (" +
               Seconds(config_.active_deadline_seconds) + ")",
           now);
  } else if (config_.master_timeout_seconds > 0 && down != nullptr &&
             now - *down->down_since >= config_.master_timeout_seconds) {
    MoveTo(JobPhase::kFailed, "MasterUnreachable",
           "the master was unreachable for " + Seconds(now - *down->down_since) + ": " +
               down->error,
           now);
  } else if (config_.no_worker_timeout_seconds > 0 && membership_.live() == 0 &&
             now - last_live_time_ >= config_.no_worker_timeout_seconds) {
    MoveTo(JobPhase::kFailed, "NoLiveWorkers",
           "no worker was live for " + Seconds(now - last_live_time_), now);
  } else if (lifecycle_.phase() == JobPhase::kPending && trainers >= config_.min_trainers) {
    MoveTo(JobPhase::kRunning, "EnoughWorkers", count, now);
  } else if (lifecycle_.phase() == JobPhase::kRunning && trainers < config_.min_trainers) {
    MoveTo(JobPhase::kPending, "NotEnoughWorkers", count, now);
  }
}

Status CoordinatorState::Register(double now, const std::string& host, WorkerRole role,
                                  WorkerId previous_id, RegisterResult* result) {
  GAPTRAIN_RETURN_IF_ERROR(ValidateHost(host));
  // An evaluator may still join a finished job: the final model is scored
  // by whichever evaluator is there, even one that started (or restarted)
  // after the end. Trainers have nothing left to do.
  if (lifecycle_.finished() && role != WorkerRole::kEvaluator) {
    return Status::FailedPrecondition("job " + config_.job_name + " has " +
                                      (phase() == JobPhase::kSucceeded ? "succeeded" : "failed") +
                                      " (" + lifecycle_.current().reason + "): nothing to do");
  }
  *result = RegisterResult();
  if (WorkerRecord* w = membership_.Find(previous_id); w != nullptr) {
    if (w->host != host) {
      return Status::FailedPrecondition(Worker(previous_id) + " is live on host " + w->host +
                                        ", not " + host);
    }
    if (w->role != role) {
      return Status::FailedPrecondition(Worker(previous_id) + " registered as " +
                                        WorkerRoleName(w->role) + ", not " +
                                        WorkerRoleName(role));
    }
    membership_.Renew(w, now);
    result->id = w->id;
    result->role = w->role;
    result->resumed = true;
    DataTask held;
    if (HeldTask(*w, &held)) result->task = held;
    UpdatePhase(now);
    return Status::OK();
  }
  if (role == WorkerRole::kEvaluator) {
    if (WorkerId e = membership_.evaluator(); e != 0) {
      return Status::AlreadyExists(Worker(e) + " on host " + membership_.Find(e)->host +
                                   " is the job's evaluator");
    }
  }
  WorkerRecord* w = membership_.Add(host, role, now);
  ++counters_.joins;
  MembersChanged();
  Durable();
  result->id = w->id;
  result->role = role;
  UpdatePhase(now);
  return Status::OK();
}

Status CoordinatorState::Heartbeat(double now, WorkerId id, const WorkerProgress& progress,
                                   uint64_t* held_task) {
  WorkerRecord* w = nullptr;
  GAPTRAIN_RETURN_IF_ERROR(FindLive(id, &w));
  if (progress.loss && !std::isfinite(*progress.loss)) {
    return Status::InvalidArgument("loss: must be finite (omit it when there is none)");
  }
  DataTask held;
  const bool about_held_task =
      progress.task_id != 0 && progress.task_id == w->task_id && HeldTask(*w, &held);
  if (about_held_task) {
    const uint32_t size = held.range.size();
    if (progress.samples_done > size) {
      return Status::InvalidArgument("samples_done: " + std::to_string(progress.samples_done) +
                                     " exceeds task " + std::to_string(w->task_id) + "'s " +
                                     std::to_string(size) + " samples");
    }
  }
  membership_.Renew(w, now);
  if (about_held_task) w->samples_done = progress.samples_done;
  if (progress.loss) {
    w->has_loss = true;
    w->loss = *progress.loss;
  }
  ++progress_generation_;
  *held_task = w->task_id;
  ObserveMasterVersion(progress.master_version, now);
  UpdatePhase(now);
  return Status::OK();
}

void CoordinatorState::SetIdle(WorkerRecord* worker, bool idle) {
  if (worker->idle == idle) return;
  worker->idle = idle;
  if (!config_.idle_trainers_are_members) MembersChanged();
}

Status CoordinatorState::NextTask(double now, WorkerId id, NextTaskResult* result) {
  WorkerRecord* w = nullptr;
  GAPTRAIN_RETURN_IF_ERROR(FindLive(id, &w));
  if (w->role != WorkerRole::kTrainer) {
    return Status::FailedPrecondition(Worker(id) + " is the evaluator; evaluators take no tasks");
  }
  membership_.Renew(w, now);
  UpdatePhase(now);
  *result = NextTaskResult();
  DataTask held;
  if (lifecycle_.finished()) {
    result->outcome = TaskOutcome::kJobFinished;
    result->reason = std::string("the job has ") +
                     (phase() == JobPhase::kSucceeded ? "succeeded" : "failed") + " (" +
                     lifecycle_.current().reason + ")";
  } else if (HeldTask(*w, &held)) {
    // A retry after a lost reply: the same task, never a second one.
    result->outcome = TaskOutcome::kAssigned;
    result->task = held;
  } else if (phase() == JobPhase::kPending) {
    result->outcome = TaskOutcome::kWaitForWorkers;
    result->reason = "waiting for trainers: " + std::to_string(membership_.live_trainers()) +
                     " of at least " + std::to_string(config_.min_trainers) + " live";
  } else if (retrain_.Assign(id, &result->task) || tasks_.Assign(id, &result->task)) {
    // Training a master restore lost comes first: its epoch is older.
    result->outcome = TaskOutcome::kAssigned;
    w->task_id = result->task.id;
    w->samples_done = 0;
    Durable();
  } else {
    result->outcome = TaskOutcome::kEpochFinishing;
    result->reason = "epoch " + std::to_string(tasks_.epoch()) + " finishing: " +
                     std::to_string(tasks_.in_flight() + retrain_.in_flight()) +
                     " tasks in flight";
  }
  SetIdle(w, result->outcome != TaskOutcome::kAssigned);
  return Status::OK();
}

void CoordinatorState::AdvanceIfDone(double now, CompleteTaskResult* result) {
  if (lifecycle_.finished() || !tasks_.all_done()) return;
  const uint32_t next = tasks_.epoch() + 1;
  if (TotalEpochs() != 0 && next >= TotalEpochs()) {
    // The last epoch: done once the training lost in restores is redone.
    if (retrain_.empty()) {
      MoveTo(JobPhase::kSucceeded, "EpochsCompleted",
             "completed " + std::to_string(TotalEpochs()) + " epochs", now);
    }
    return;
  }
  tasks_ = TaskQueue(next, SamplesInEpoch(next), config_.samples_per_task, TaskIdBase(next));
  if (result != nullptr) result->epoch_advanced = true;
}

Status CoordinatorState::CompleteTask(double now, WorkerId id, uint64_t task_id,
                                      const TaskCompletion& completion,
                                      CompleteTaskResult* result) {
  WorkerRecord* w = nullptr;
  if (Status live = FindLive(id, &w); !live.ok()) {
    // Typically a worker that was slow past its lease: its task went back
    // to the queue and may be someone else's now.
    if (live.code() == Status::Code::kFailedPrecondition && task_id != 0) {
      ++counters_.stale_completions;
      ++progress_generation_;
    }
    return live;
  }
  if (w->role != WorkerRole::kTrainer) {
    return Status::FailedPrecondition(Worker(id) + " is the evaluator; evaluators take no tasks");
  }
  if (task_id == 0) return Status::InvalidArgument("task_id: required");
  *result = CompleteTaskResult();
  DataTask held;
  if (task_id == w->task_id && HeldTask(*w, &held)) {
    uint32_t index = 0;
    const bool current_epoch = tasks_.IndexOf(task_id, &index);
    const UnconfirmedTasks::Fate fate = unconfirmed_.Judge(completion.reached);
    result->task = held;
    w->task_id = 0;
    w->samples_done = 0;
    w->last_completed_task_id = task_id;
    membership_.Renew(w, now);
    counters_.samples_retrained += completion.samples_retrained;
    // A task was read whole: whatever store was away is back.
    result->data_available_again = data_unavailable_.has_value();
    data_unavailable_.reset();
    Durable();
    if (fate == UnconfirmedTasks::Fate::kLost) {
      // The master restarted from a point before some of these updates:
      // the task is trained again, from the front of its queue.
      Requeue(task_id);
      ++counters_.tasks_retrained;
      counters_.samples_retrained += held.range.size();
      result->retrain = true;
    } else {
      if (current_epoch) {
        tasks_.Complete(index);
      } else {
        retrain_.Complete(task_id);
      }
      if (fate == UnconfirmedTasks::Fate::kPending) unconfirmed_.Add(task_id, completion.reached);
      AdvanceIfDone(now, result);
    }
    UpdatePhase(now);
    return Status::OK();
  }
  if (task_id == w->last_completed_task_id) {
    // A retry after a lost reply: completed once, counted once.
    result->already_completed = true;
    return Retried(now, w, task_id, &result->task);
  }
  Status refused =
      NotHeld(*w, task_id, "a task taken back from a departed worker belongs to its new holder");
  if (refused.code() == Status::Code::kFailedPrecondition) {
    ++counters_.stale_completions;
    ++progress_generation_;
  }
  return refused;
}

Status CoordinatorState::ReleaseTask(double now, WorkerId id, uint64_t task_id,
                                     ReleaseReason reason, const std::string& message,
                                     ReleaseTaskResult* result) {
  WorkerRecord* w = nullptr;
  GAPTRAIN_RETURN_IF_ERROR(FindLive(id, &w));
  if (w->role != WorkerRole::kTrainer) {
    return Status::FailedPrecondition(Worker(id) + " is the evaluator; evaluators take no tasks");
  }
  if (task_id == 0) return Status::InvalidArgument("task_id: required");
  GAPTRAIN_RETURN_IF_ERROR(ValidateReleaseMessage(message, "message"));
  *result = ReleaseTaskResult();
  DataTask held;
  if (task_id == w->task_id && HeldTask(*w, &held)) {
    Requeue(task_id);
    ++counters_.tasks_released;
    counters_.samples_lost += w->samples_done;
    w->task_id = 0;
    w->samples_done = 0;
    w->last_released_task_id = task_id;
    membership_.Renew(w, now);
    // No data to train until its next task: in sync mode no step waits for it.
    SetIdle(w, true);
    switch (reason) {
      case ReleaseReason::kDataUnavailable:
        if (!data_unavailable_) {
          data_unavailable_.emplace();
          data_unavailable_->since = now;
        }
        data_unavailable_->message = message;
        data_unavailable_->worker = id;
        data_unavailable_->host = w->host;
        ++data_unavailable_->releases;
        break;
    }
    result->task = held;
    Durable();
    UpdatePhase(now);
    return Status::OK();
  }
  if (task_id == w->last_released_task_id) {
    // A retry after a lost reply: handed back once.
    result->already_released = true;
    return Retried(now, w, task_id, &result->task);
  }
  return NotHeld(*w, task_id, "only a task's holder can hand it back");
}

Status CoordinatorState::Leave(double now, WorkerId id, LeaveReason reason, bool* already_gone) {
  if (id == 0) return Status::InvalidArgument("worker_id: required");
  WorkerRecord* w = membership_.Find(id);
  if (w == nullptr) {
    if (!membership_.WasIssued(id)) return Status::NotFound("unknown " + Worker(id));
    *already_gone = true;
    return Status::OK();
  }
  *already_gone = false;
  w->last_seen = now;
  Depart(w);
  switch (reason) {
    case LeaveReason::kPreempted: ++counters_.left_preempted; break;
    case LeaveReason::kFailed: ++counters_.left_failed; break;
    case LeaveReason::kFinished: ++counters_.left_finished; break;
  }
  UpdatePhase(now);
  return Status::OK();
}

Status CoordinatorState::ReportEvaluation(double now, WorkerId id, double accuracy, double loss,
                                          uint64_t version, const EvalMetrics& metrics) {
  WorkerRecord* w = nullptr;
  GAPTRAIN_RETURN_IF_ERROR(FindLive(id, &w));
  if (w->role != WorkerRole::kEvaluator) {
    return Status::FailedPrecondition(Worker(id) +
                                      " is a trainer; only the evaluator reports evaluations");
  }
  if (!std::isfinite(accuracy) || accuracy < 0 || accuracy > 1) {
    return Status::InvalidArgument("accuracy: must be in [0, 1], got " + std::to_string(accuracy));
  }
  if (!std::isfinite(loss) || loss < 0) {
    return Status::InvalidArgument("loss: must be finite and >= 0, got " + std::to_string(loss));
  }
  GAPTRAIN_RETURN_IF_ERROR(ValidateEvalMetrics(metrics, "metrics"));
  membership_.Renew(w, now);
  if (!last_accuracy_ || version >= last_eval_version_) {
    last_accuracy_ = accuracy;
    last_eval_loss_ = loss;
    last_eval_version_ = version;
    last_eval_metrics_ = metrics;
    ++evaluations_stored_;
    Durable();
    const TargetSpec& target = config_.target;
    std::optional<double> value = MetricValue(target.metric, accuracy, loss, metrics);
    if (target.IsSet() && value && target.ReachedBy(*value)) {
      const bool accuracy_at_least = target.metric == "accuracy" && std::isnan(target.at_most);
      MoveTo(JobPhase::kSucceeded, accuracy_at_least ? "TargetAccuracyReached" : "TargetReached",
             target.metric + " " + FormatMetric(*value) + " at version " +
                 std::to_string(version) + " reached the target " + target.Text(),
             now);
    }
  }
  ObserveMasterVersion(version, now);
  UpdatePhase(now);
  return Status::OK();
}

void CoordinatorState::ReportMasterHealth(double now, uint32_t shard, bool reachable,
                                          const std::string& error) {
  if (shard >= master_health_.size()) return;
  ShardHealth& h = master_health_[shard];
  if (reachable) {
    h.down_since.reset();
    h.error.clear();
  } else {
    if (!h.down_since) h.down_since = now;
    h.error = error;
  }
  UpdatePhase(now);
}

void CoordinatorState::Retrain(uint64_t task_id, MasterObservation* observation) {
  DataTask task;
  if (!TaskById(task_id, &task)) return;
  uint32_t index = 0;
  if (tasks_.IndexOf(task_id, &index)) {
    if (tasks_.state(index) != TaskQueue::State::kDone) return;
    tasks_.Reopen(index);
  } else if (!retrain_.Add(task)) {
    return;
  }
  ++counters_.tasks_retrained;
  counters_.samples_retrained += task.range.size();
  observation->retrained.push_back(task);
}

MasterObservation CoordinatorState::ObserveMaster(double now, uint32_t shard,
                                                  const MasterRun& run, uint64_t version,
                                                  uint64_t durable_version) {
  MasterObservation o;
  if (lifecycle_.finished() || shard >= shard_versions_.size()) return o;
  const uint64_t known = unconfirmed_.master(shard).id;
  const UnconfirmedTasks::Observation seen = unconfirmed_.Observe(shard, run, durable_version);
  if (seen.new_run) {
    o.new_run = true;
    o.restore = known != 0 || run.restored_from_id != 0;
    if (o.restore) ++counters_.master_restores;
    // The version may have gone back; workers report newer ones as they
    // push.
    shard_versions_[shard] = version;
    ++progress_generation_;
    UpdateMasterVersion(now);
  } else if (run.id != 0 && run.id == known && version > shard_versions_[shard]) {
    shard_versions_[shard] = version;
    UpdateMasterVersion(now);
  }
  for (uint64_t task_id : seen.lost) Retrain(task_id, &o);
  if (seen.changed) Durable();
  UpdatePhase(now);
  return o;
}

TickResult CoordinatorState::Tick(double now) {
  TickResult result;
  const JobPhase before = phase();
  for (WorkerId id : membership_.Expired(now)) {
    Depart(membership_.Find(id));
    ++counters_.expiries;
    result.expired.push_back(id);
  }
  UpdatePhase(now);
  result.phase_changed = phase() != before;
  return result;
}

JobStatus CoordinatorState::Describe(double now) const {
  JobStatus s;
  s.job_name = config_.job_name;
  s.phase = phase();
  s.condition = lifecycle_.current();
  s.conditions = lifecycle_.conditions();
  s.live_workers = static_cast<uint32_t>(membership_.live());
  s.live_trainers = static_cast<uint32_t>(membership_.live_trainers());
  s.min_trainers = config_.min_trainers;
  s.counters = counters_;
  uint64_t in_flight_samples = 0;
  for (const auto& [id, w] : membership_.workers()) {
    s.workers.push_back({w, std::max(0.0, now - w.last_seen)});
    if (w.task_id != 0) in_flight_samples += w.samples_done;
  }
  s.epoch = tasks_.epoch();
  s.epochs = config_.epochs;
  s.max_updates = config_.max_updates;
  s.tasks_total = tasks_.num_tasks();
  s.tasks_queued = tasks_.queued();
  s.tasks_in_flight = tasks_.in_flight();
  s.tasks_done = tasks_.done();
  s.tasks_retrain_queued = retrain_.queued() + retrain_.in_flight();
  s.tasks_unconfirmed = static_cast<uint32_t>(unconfirmed_.size());
  s.samples_done_in_epoch = tasks_.samples_done() + in_flight_samples;
  s.samples_in_epoch = tasks_.samples();
  if (phase() == JobPhase::kSucceeded) {
    s.progress = 1;
  } else if (config_.epochs > 0) {
    s.progress = (tasks_.epoch() + static_cast<double>(s.samples_done_in_epoch) /
                                       config_.train_samples) /
                 config_.epochs;
  } else {
    s.progress = static_cast<double>(master_version_) / config_.max_updates;
  }
  s.progress = std::clamp(s.progress, 0.0, 1.0);
  s.master_version = master_version_;
  s.last_accuracy = last_accuracy_;
  s.last_eval_loss = last_eval_loss_;
  s.last_eval_version = last_eval_version_;
  s.last_eval_metrics = last_eval_metrics_;
  if (config_.target.IsSet()) s.target = config_.target.Text();
  s.data_unavailable = data_unavailable_;
  for (uint32_t i = 0; i < config_.master_shards; ++i) {
    MasterShardStatus m;
    m.shard = i;
    if (i < config_.master_addresses.size()) m.address = config_.master_addresses[i];
    m.reachable = !master_health_[i].down_since.has_value();
    m.version = shard_versions_[i];
    m.run = unconfirmed_.master(i);
    m.totals = training_.totals(i);
    s.masters.push_back(std::move(m));
  }
  s.mean_gap = training_.mean_gap();
  s.mean_staleness = training_.mean_staleness();
  s.updates_per_second = training_.updates_per_second();
  return s;
}

void CoordinatorState::Save(proto::CoordinatorSnapshot* snapshot) const {
  snapshot->Clear();
  snapshot->set_job_name(config_.job_name);
  snapshot->set_train_samples(config_.train_samples);
  snapshot->set_samples_per_task(config_.samples_per_task);
  snapshot->set_phase(ToProto(phase()));
  for (const JobCondition& c : lifecycle_.conditions()) ToProto(c, snapshot->add_conditions());
  snapshot->set_created_time(created_time_);
  snapshot->set_next_worker_id(membership_.next_id());
  for (const auto& [id, w] : membership_.workers()) {
    proto::CoordinatorSnapshot::Worker* p = snapshot->add_workers();
    p->set_worker_id(id);
    p->set_host(w.host);
    p->set_role(ToProto(w.role));
    p->set_task_id(w.task_id);
    p->set_samples_done(w.samples_done);
    if (w.has_loss) p->set_loss(w.loss);
    p->set_last_completed_task_id(w.last_completed_task_id);
    p->set_last_released_task_id(w.last_released_task_id);
  }
  snapshot->set_epoch(tasks_.epoch());
  for (uint32_t i : tasks_.QueuedIndices()) snapshot->add_queued(i);
  for (uint32_t i = 0; i < tasks_.num_tasks(); ++i) {
    if (tasks_.state(i) != TaskQueue::State::kDone) continue;
    proto::CoordinatorSnapshot::DoneTask* d = snapshot->add_done();
    d->set_index(i);
    d->set_completed_by(tasks_.worker(i));
  }
  proto::CoordinatorSnapshot::Counters* c = snapshot->mutable_counters();
  c->set_joins(counters_.joins);
  c->set_left_finished(counters_.left_finished);
  c->set_left_preempted(counters_.left_preempted);
  c->set_left_failed(counters_.left_failed);
  c->set_expiries(counters_.expiries);
  c->set_tasks_reassigned(counters_.tasks_reassigned);
  c->set_samples_lost(counters_.samples_lost);
  c->set_stale_completions(counters_.stale_completions);
  c->set_tasks_retrained(counters_.tasks_retrained);
  c->set_samples_retrained(counters_.samples_retrained);
  c->set_master_restores(counters_.master_restores);
  c->set_tasks_released(counters_.tasks_released);
  for (const auto& [task_id, reached] : unconfirmed_.tasks()) {
    proto::CoordinatorSnapshot::UnconfirmedTask* u = snapshot->add_unconfirmed();
    u->set_task_id(task_id);
    for (const MasterPosition& p : reached) ToProto(p, u->add_reached());
  }
  for (const auto& [task, holder] : retrain_.Entries()) {
    proto::CoordinatorSnapshot::RetrainTask* r = snapshot->add_retrain();
    r->set_task_id(task.id);
    r->set_holder(holder);
  }
  ToProto(unconfirmed_.master(0), snapshot->mutable_master());
  snapshot->set_master_durable_version(unconfirmed_.durable_version(0));
  for (const auto& [index, shard] : unconfirmed_.shards()) {
    if (index == 0) continue;  // in `master` and master_durable_version, as with one master
    proto::CoordinatorSnapshot::MasterShard* m = snapshot->add_master_shards();
    m->set_shard(index);
    ToProto(shard.run, m->mutable_master());
    m->set_durable_version(shard.durable_version);
  }
  snapshot->set_master_version(master_version_);
  if (last_accuracy_) snapshot->set_last_accuracy(*last_accuracy_);
  snapshot->set_last_eval_loss(last_eval_loss_);
  snapshot->set_last_eval_version(last_eval_version_);
  for (const NamedMetric& m : last_eval_metrics_) {
    proto::EvalMetric* out = snapshot->add_last_eval_metrics();
    out->set_name(m.name);
    out->set_value(m.value);
  }
  if (data_unavailable_) ToProto(*data_unavailable_, snapshot->mutable_data_unavailable());
}

Status CoordinatorState::Restore(const CoordinatorConfig& config,
                                 const proto::CoordinatorSnapshot& snapshot, double now,
                                 std::unique_ptr<CoordinatorState>* state) {
  GAPTRAIN_RETURN_IF_ERROR(ValidateCoordinatorConfig(config));
  const std::string start_over = "; move the state file away to start over";
  if (snapshot.job_name() != config.job_name) {
    return Status::FailedPrecondition("the saved state is for job '" + snapshot.job_name() +
                                      "', this is job '" + config.job_name + "'" + start_over);
  }
  if (snapshot.train_samples() != config.train_samples ||
      snapshot.samples_per_task() != config.samples_per_task) {
    return Status::FailedPrecondition(
        "the saved state cuts " + std::to_string(snapshot.train_samples()) +
        " samples into tasks of " + std::to_string(snapshot.samples_per_task()) +
        "; this run has " + std::to_string(config.train_samples) + " samples and tasks of " +
        std::to_string(config.samples_per_task) +
        " (the dataset, batchSize or --task-batches changed)" + start_over);
  }
  std::unique_ptr<CoordinatorState> s(new CoordinatorState(config, now));
  if (s->TotalEpochs() != 0 && snapshot.epoch() >= s->TotalEpochs()) {
    return Status::FailedPrecondition("the saved state is in epoch " +
                                      std::to_string(snapshot.epoch()) + ", but the job now has " +
                                      std::to_string(s->TotalEpochs()) + " epochs" + start_over);
  }
  JobPhase phase;
  Status p = FromProto(snapshot.phase(), &phase);
  if (!p.ok()) return Status::DataLoss("saved " + p.message());
  std::vector<JobCondition> conditions;
  for (const proto::JobCondition& c : snapshot.conditions()) conditions.push_back(FromProto(c));
  GAPTRAIN_RETURN_IF_ERROR(s->lifecycle_.Restore(phase, conditions));
  if (snapshot.next_worker_id() == 0) return Status::DataLoss("next_worker_id: must be >= 1");
  s->membership_.set_next_id(snapshot.next_worker_id());

  const uint32_t epoch = snapshot.epoch();
  s->tasks_ = TaskQueue(epoch, s->SamplesInEpoch(epoch), config.samples_per_task,
                        s->TaskIdBase(epoch));
  // Earlier epochs' tasks queued again (absent in files from before master
  // incarnations): each a task of an epoch before the saved one, once.
  std::vector<std::pair<DataTask, WorkerId>> retrain;
  std::map<uint64_t, WorkerId> retrain_holders;
  for (const auto& r : snapshot.retrain()) {
    DataTask task;
    if (!s->TaskById(r.task_id(), &task) || task.epoch >= epoch) {
      return Status::DataLoss("retrain task " + std::to_string(r.task_id()) +
                              " is not a task of an epoch before " + std::to_string(epoch));
    }
    retrain.emplace_back(task, r.holder());
    if (r.holder() != 0) retrain_holders[r.task_id()] = r.holder();
  }
  if (!s->retrain_.Restore(retrain)) return Status::DataLoss("a retrain task is saved twice");
  std::map<uint32_t, WorkerId> in_flight;
  for (const proto::CoordinatorSnapshot::Worker& p : snapshot.workers()) {
    const std::string who = "saved " + Worker(p.worker_id());
    WorkerRecord w;
    w.id = p.worker_id();
    w.host = p.host();
    Status role = FromProto(p.role(), &w.role);
    if (!role.ok() || ValidateHost(w.host).code() != Status::Code::kOk) {
      return Status::DataLoss(who + ": bad role or host");
    }
    w.last_seen = now;
    w.task_id = p.task_id();
    w.samples_done = p.samples_done();
    w.has_loss = p.has_loss();
    w.loss = p.loss();
    if (w.task_id != 0) {
      uint32_t index = 0;
      const auto retrain_holder = retrain_holders.find(w.task_id);
      if (w.role == WorkerRole::kTrainer && retrain_holder != retrain_holders.end()) {
        if (retrain_holder->second != w.id) {
          return Status::DataLoss(who + " holds task " + std::to_string(w.task_id) +
                                  ", which worker " + std::to_string(retrain_holder->second) +
                                  " is retraining");
        }
        retrain_holders.erase(retrain_holder);
      } else if (w.role != WorkerRole::kTrainer || !s->tasks_.IndexOf(w.task_id, &index)) {
        return Status::DataLoss(who + " holds task " + std::to_string(w.task_id) +
                                ", which is not a task of epoch " + std::to_string(epoch));
      } else if (!in_flight.emplace(index, w.id).second) {
        return Status::DataLoss(who + " holds task " + std::to_string(w.task_id) +
                                ", which another worker holds too");
      }
    }
    if (w.role == WorkerRole::kEvaluator && s->membership_.evaluator() != 0) {
      return Status::DataLoss(who + " is a second evaluator");
    }
    w.last_completed_task_id = p.last_completed_task_id();
    w.last_released_task_id = p.last_released_task_id();
    GAPTRAIN_RETURN_IF_ERROR(s->membership_.Restore(w));
  }
  if (!retrain_holders.empty()) {
    return Status::DataLoss("retrain task " + std::to_string(retrain_holders.begin()->first) +
                            " is held by worker " +
                            std::to_string(retrain_holders.begin()->second) +
                            ", which holds no such task");
  }
  std::vector<uint32_t> queued(snapshot.queued().begin(), snapshot.queued().end());
  std::map<uint32_t, WorkerId> done;
  for (const auto& d : snapshot.done()) {
    if (!done.emplace(d.index(), d.completed_by()).second) {
      return Status::DataLoss("task index " + std::to_string(d.index()) + " is done twice");
    }
  }
  GAPTRAIN_RETURN_IF_ERROR(s->tasks_.Restore(queued, in_flight, done));

  const auto& c = snapshot.counters();
  s->counters_ = {c.joins(),           c.left_finished(),     c.left_preempted(),
                  c.left_failed(),     c.expiries(),          c.tasks_reassigned(),
                  c.samples_lost(),    c.stale_completions(), c.tasks_retrained(),
                  c.samples_retrained(), c.master_restores(), c.tasks_released()};
  std::map<uint64_t, std::vector<MasterPosition>> unconfirmed;
  for (const auto& u : snapshot.unconfirmed()) {
    DataTask task;
    if (!s->TaskById(u.task_id(), &task)) {
      return Status::DataLoss("unconfirmed task " + std::to_string(u.task_id()) +
                              " is not a task of epochs 0 to " + std::to_string(epoch));
    }
    std::vector<MasterPosition>& reached = unconfirmed[u.task_id()];
    for (const auto& p : u.reached()) reached.push_back(FromProto(p));
  }
  std::map<uint32_t, ShardRun> shards;
  shards[0] = {FromProto(snapshot.master()), snapshot.master_durable_version()};
  for (const auto& m : snapshot.master_shards()) {
    const std::string which = "master shard " + std::to_string(m.shard());
    if (m.shard() == 0 || m.shard() >= kMaxMasterShards) {
      return Status::DataLoss(which + ": must be in [1, " + std::to_string(kMaxMasterShards) +
                              ")");
    }
    if (!shards.emplace(m.shard(), ShardRun{FromProto(m.master()), m.durable_version()}).second) {
      return Status::DataLoss(which + " is saved twice");
    }
  }
  s->unconfirmed_.Restore(std::move(shards), std::move(unconfirmed));
  s->created_time_ = snapshot.created_time();
  // Only the least of the shards' versions is saved: each shard had
  // reached it, and its feed tells the rest within a second.
  s->master_version_ = snapshot.master_version();
  std::fill(s->shard_versions_.begin(), s->shard_versions_.end(), s->master_version_);
  if (snapshot.has_last_accuracy()) s->last_accuracy_ = snapshot.last_accuracy();
  s->last_eval_loss_ = snapshot.last_eval_loss();
  s->last_eval_version_ = snapshot.last_eval_version();
  for (const proto::EvalMetric& m : snapshot.last_eval_metrics()) {
    s->last_eval_metrics_.push_back({m.name(), m.value()});
  }
  GAPTRAIN_RETURN_IF_ERROR(ValidateEvalMetrics(s->last_eval_metrics_, "last_eval_metrics"));
  if (snapshot.has_data_unavailable()) {
    s->data_unavailable_ = FromProto(snapshot.data_unavailable());
    Status message = ValidateReleaseMessage(s->data_unavailable_->message,
                                            "data_unavailable.message");
    if (!message.ok()) return Status::DataLoss("saved " + message.message());
  }
  *state = std::move(s);
  return Status::OK();
}

}  // namespace gaptrain
