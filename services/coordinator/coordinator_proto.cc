#include "services/coordinator/coordinator_proto.h"

namespace gaptrain {

proto::JobPhase ToProto(JobPhase phase) {
  switch (phase) {
    case JobPhase::kPending: return proto::JOB_PHASE_PENDING;
    case JobPhase::kRunning: return proto::JOB_PHASE_RUNNING;
    case JobPhase::kSucceeded: return proto::JOB_PHASE_SUCCEEDED;
    case JobPhase::kFailed: return proto::JOB_PHASE_FAILED;
  }
  return proto::JOB_PHASE_UNSPECIFIED;
}

Status FromProto(proto::JobPhase phase, JobPhase* out) {
  switch (phase) {
    case proto::JOB_PHASE_PENDING: *out = JobPhase::kPending; return Status::OK();
    case proto::JOB_PHASE_RUNNING: *out = JobPhase::kRunning; return Status::OK();
    case proto::JOB_PHASE_SUCCEEDED: *out = JobPhase::kSucceeded; return Status::OK();
    case proto::JOB_PHASE_FAILED: *out = JobPhase::kFailed; return Status::OK();
    default: break;
  }
  return Status::InvalidArgument("phase: unknown value " + std::to_string(phase));
}

proto::WorkerRole ToProto(WorkerRole role) {
  return role == WorkerRole::kEvaluator ? proto::WORKER_ROLE_EVALUATOR : proto::WORKER_ROLE_TRAINER;
}

Status FromProto(int role, WorkerRole* out) {
  switch (role) {
    case proto::WORKER_ROLE_UNSPECIFIED:
    case proto::WORKER_ROLE_TRAINER: *out = WorkerRole::kTrainer; return Status::OK();
    case proto::WORKER_ROLE_EVALUATOR: *out = WorkerRole::kEvaluator; return Status::OK();
    default: break;
  }
  return Status::InvalidArgument("role: unknown value " + std::to_string(role));
}

Status FromProto(int reason, LeaveReason* out) {
  switch (reason) {
    case proto::LEAVE_REASON_PREEMPTED: *out = LeaveReason::kPreempted; return Status::OK();
    case proto::LEAVE_REASON_FAILED: *out = LeaveReason::kFailed; return Status::OK();
    case proto::LEAVE_REASON_FINISHED: *out = LeaveReason::kFinished; return Status::OK();
    case proto::LEAVE_REASON_UNSPECIFIED:
      return Status::InvalidArgument("reason: required (PREEMPTED, FAILED or FINISHED)");
    default: break;
  }
  return Status::InvalidArgument("reason: unknown value " + std::to_string(reason));
}

Status FromProto(int reason, ReleaseReason* out) {
  switch (reason) {
    case proto::RELEASE_REASON_DATA_UNAVAILABLE:
      *out = ReleaseReason::kDataUnavailable;
      return Status::OK();
    case proto::RELEASE_REASON_UNSPECIFIED:
      return Status::InvalidArgument("reason: required (DATA_UNAVAILABLE)");
    default: break;
  }
  return Status::InvalidArgument("reason: unknown value " + std::to_string(reason));
}

void ToProto(const DataTask& task, proto::DataTask* out) {
  out->set_task_id(task.id);
  out->set_epoch(task.epoch);
  out->set_begin(task.range.begin);
  out->set_end(task.range.end);
}

void ToProto(const JobCondition& c, proto::JobCondition* out) {
  out->set_type(c.type);
  out->set_status(c.status);
  out->set_reason(c.reason);
  out->set_message(c.message);
  out->set_last_transition_time(c.last_transition_time);
}

JobCondition FromProto(const proto::JobCondition& c) {
  return {c.type(), c.status(), c.reason(), c.message(), c.last_transition_time()};
}

void ToProto(const DataUnavailable& d, proto::DataUnavailable* out) {
  out->set_since(d.since);
  out->set_message(d.message);
  out->set_worker_id(d.worker);
  out->set_host(d.host);
  out->set_releases(d.releases);
}

DataUnavailable FromProto(const proto::DataUnavailable& d) {
  return {d.since(), d.message(), d.worker_id(), d.host(), d.releases()};
}

void ToProto(const MasterRun& run, proto::MasterIncarnation* out) {
  out->set_id(run.id);
  out->set_restored_from_id(run.restored_from_id);
  out->set_restored_from_version(run.restored_from_version);
}

ShardTotals FromProto(const proto::MasterTotals& t) {
  return ShardTotals{t.parameters(),    t.updates(),       t.gap_sum(),
                     t.gap_count(),     t.staleness_sum(), t.staleness_count()};
}

MasterRun FromProto(const proto::MasterIncarnation& run) {
  return {run.id(), run.restored_from_id(), run.restored_from_version()};
}

void ToProto(const MasterPosition& position, proto::MasterPosition* out) {
  out->set_incarnation(position.incarnation);
  out->set_version(position.version);
  out->set_shard(position.shard);
}

MasterPosition FromProto(const proto::MasterPosition& position) {
  return {position.incarnation(), position.version(), position.shard()};
}

void ToProto(const JobStatus& s, proto::CoordinatorStatusResponse* out) {
  out->set_job_name(s.job_name);
  out->set_phase(ToProto(s.phase));
  out->set_reason(s.condition.reason);
  out->set_message(s.condition.message);
  for (const JobCondition& c : s.conditions) ToProto(c, out->add_conditions());
  out->set_live_workers(s.live_workers);
  out->set_live_trainers(s.live_trainers);
  out->set_min_trainers(s.min_trainers);
  out->set_joined(s.counters.joins);
  out->set_left(s.counters.left_finished);
  out->set_preempted(s.counters.left_preempted);
  out->set_failed(s.counters.left_failed);
  out->set_expired(s.counters.expiries);
  for (const LiveWorkerStatus& w : s.workers) {
    proto::LiveWorker* p = out->add_workers();
    p->set_worker_id(w.record.id);
    p->set_host(w.record.host);
    p->set_role(ToProto(w.record.role));
    p->set_task_id(w.record.task_id);
    p->set_samples_done(w.record.samples_done);
    if (w.record.has_loss) p->set_loss(w.record.loss);
    p->set_seconds_since_heartbeat(w.seconds_since_heartbeat);
  }
  out->set_epoch(s.epoch);
  out->set_epochs(s.epochs);
  out->set_max_updates(s.max_updates);
  out->set_tasks_total(s.tasks_total);
  out->set_tasks_queued(s.tasks_queued);
  out->set_tasks_in_flight(s.tasks_in_flight);
  out->set_tasks_done(s.tasks_done);
  out->set_tasks_reassigned(s.counters.tasks_reassigned);
  out->set_samples_lost(s.counters.samples_lost);
  out->set_samples_done_in_epoch(s.samples_done_in_epoch);
  out->set_samples_in_epoch(s.samples_in_epoch);
  out->set_progress(s.progress);
  out->set_master_version(s.master_version);
  if (s.last_accuracy) out->set_last_accuracy(*s.last_accuracy);
  out->set_last_eval_loss(s.last_eval_loss);
  out->set_last_eval_version(s.last_eval_version);
  out->set_target(s.target);
  for (const NamedMetric& m : s.last_eval_metrics) {
    proto::EvalMetric* metric = out->add_last_eval_metrics();
    metric->set_name(m.name);
    metric->set_value(m.value);
  }
  out->set_tasks_retrained(s.counters.tasks_retrained);
  out->set_samples_retrained(s.counters.samples_retrained);
  out->set_tasks_retrain_queued(s.tasks_retrain_queued);
  out->set_master_restores(s.counters.master_restores);
  out->set_tasks_unconfirmed(s.tasks_unconfirmed);
  out->set_tasks_released(s.counters.tasks_released);
  if (s.data_unavailable) ToProto(*s.data_unavailable, out->mutable_data_unavailable());
  for (const MasterShardStatus& m : s.masters) {
    proto::MasterShardStatus* p = out->add_masters();
    p->set_shard(m.shard);
    p->set_address(m.address);
    p->set_reachable(m.reachable);
    p->set_version(m.version);
    p->mutable_run()->set_id(m.run.id);
    p->mutable_run()->set_restored_from_id(m.run.restored_from_id);
    p->mutable_run()->set_restored_from_version(m.run.restored_from_version);
    proto::MasterTotals* t = p->mutable_totals();
    t->set_parameters(m.totals.parameters);
    t->set_updates(m.totals.updates);
    t->set_gap_sum(m.totals.gap_sum);
    t->set_gap_count(m.totals.gap_count);
    t->set_staleness_sum(m.totals.staleness_sum);
    t->set_staleness_count(m.totals.staleness_count);
  }
  if (s.mean_gap) out->set_mean_gap(*s.mean_gap);
  if (s.mean_staleness) out->set_mean_staleness(*s.mean_staleness);
  out->set_updates_per_second(s.updates_per_second);
}

}  // namespace gaptrain
