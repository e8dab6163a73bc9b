#include "services/coordinator/coordinator_service.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>

#include "services/coordinator/coordinator_proto.h"
#include "services/net/token_auth.h"

namespace gaptrain {
namespace {

// Inside CoordinatorService, `Status` names the Status RPC.
using CoreStatus = ::gaptrain::Status;

proto::NextTaskResponse::Outcome ToProto(TaskOutcome outcome) {
  switch (outcome) {
    case TaskOutcome::kAssigned: return proto::NextTaskResponse::ASSIGNED;
    case TaskOutcome::kWaitForWorkers: return proto::NextTaskResponse::WAIT_FOR_WORKERS;
    case TaskOutcome::kEpochFinishing: return proto::NextTaskResponse::EPOCH_FINISHING;
    case TaskOutcome::kJobFinished: return proto::NextTaskResponse::JOB_FINISHED;
  }
  return proto::NextTaskResponse::OUTCOME_UNSPECIFIED;
}

// "data unavailable": a release's reason as the log says it.
std::string ReleaseReasonText(ReleaseReason reason) {
  std::string text = ReleaseReasonName(reason);
  std::replace(text.begin(), text.end(), '_', ' ');
  return text;
}

// The codes are numbered alike.
grpc::Status ToGrpc(const CoreStatus& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), status.message());
}

}  // namespace

CoordinatorService::CoordinatorService(std::unique_ptr<CoordinatorState> state, Options options,
                                       std::shared_ptr<CoordinatorMetrics> metrics, Clock clock)
    : options_(std::move(options)),
      metrics_(std::move(metrics)),
      clock_(std::move(clock)),
      state_(std::move(state)),
      last_phase_(state_->phase()) {
  metrics_->Observe(*state_);
}

CoreStatus CoordinatorService::PersistLocked() {
  const uint64_t durable = state_->durable_generation();
  const uint64_t progress = state_->progress_generation();
  if (persist_fn_) {
    proto::CoordinatorSnapshot snapshot;
    state_->Save(&snapshot);
    CoreStatus s = persist_fn_(snapshot);
    metrics_->RecordStateWrite(s.ok());
    if (!s.ok()) {
      spdlog::error("cannot persist the coordinator state: {}", s.ToString());
      return CoreStatus::Unavailable("the coordinator could not persist its state (" +
                                     s.message() + "); retry");
    }
  }
  persisted_durable_ = durable;
  persisted_progress_ = progress;
  ever_persisted_ = true;
  return CoreStatus::OK();
}

CoreStatus CoordinatorService::AfterVerb(Changes* changes) {
  CoreStatus result;
  if (state_->durable_generation() != persisted_durable_ || !ever_persisted_) {
    result = PersistLocked();
  }
  metrics_->Observe(*state_);
  if (state_->members_generation() != published_members_) {
    published_members_ = state_->members_generation();
    changes->members_changed = true;
    changes->members_generation = published_members_;
    changes->members = state_->Members();
  }
  if (state_->phase() != last_phase_) {
    last_phase_ = state_->phase();
    changes->phase_changed = true;
    changes->condition = state_->lifecycle().current();
  }
  return result;
}

void CoordinatorService::Publish(const Changes& changes) {
  if (changes.phase_changed) {
    const JobCondition& c = changes.condition;
    auto level = c.type == "Failed" ? spdlog::level::err : spdlog::level::info;
    spdlog::log(level, "job is {} ({}): {}", c.type, c.reason, c.message);
  }
  if (changes.members_changed && members_fn_) {
    members_fn_(changes.members_generation, changes.members);
  }
}

grpc::Status CoordinatorService::Reject(const char* verb, const CoreStatus& status) {
  metrics_->RecordRejected(verb, status.code());
  spdlog::warn("refused {}: {}", verb, status.ToString());
  return ToGrpc(status);
}

void CoordinatorService::Tick() {
  Changes changes;
  TickResult result;
  {
    std::lock_guard<std::mutex> lock(mu_);
    result = state_->Tick(clock_());
    AfterVerb(&changes);
  }
  for (WorkerId id : result.expired) {
    spdlog::warn("worker {}'s lease expired; its task, if any, is queued again", id);
  }
  Publish(changes);
}

void CoordinatorService::ReportMasterHealth(uint32_t shard, bool reachable,
                                            const std::string& error) {
  Changes changes;
  {
    std::lock_guard<std::mutex> lock(mu_);
    state_->ReportMasterHealth(clock_(), shard, reachable, error);
    AfterVerb(&changes);
  }
  Publish(changes);
}

void CoordinatorService::ObserveMasterTotals(uint32_t shard, const ShardTotals& totals) {
  std::lock_guard<std::mutex> lock(mu_);
  state_->ObserveMasterTotals(clock_(), shard, totals);
}

void CoordinatorService::ObserveMaster(uint32_t shard, const MasterRun& run, uint64_t version,
                                       uint64_t durable_version) {
  Changes changes;
  MasterObservation o;
  uint32_t shards = 1;
  {
    std::lock_guard<std::mutex> lock(mu_);
    o = state_->ObserveMaster(clock_(), shard, run, version, durable_version);
    AfterVerb(&changes);
    shards = state_->config().master_shards;
  }
  const std::string master =
      shards == 1 ? std::string("master") : "master shard " + std::to_string(shard);
  if (o.restore) {
    uint64_t samples = 0;
    for (const DataTask& t : o.retrained) samples += t.range.size();
    spdlog::warn("the {} restarted (run {}) from {} at version {}: {} completed tasks lost "
                 "their updates and are queued again ({} samples)",
                 master, run.id,
                 run.restored_from_id == 0 ? std::string("nothing")
                                           : "run " + std::to_string(run.restored_from_id),
                 run.restored_from_version, o.retrained.size(), samples);
  } else if (o.new_run) {
    spdlog::info("{} run {} at version {}", master, run.id, version);
  }
  Publish(changes);
}

CoreStatus CoordinatorService::PersistNow(bool force) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!force && ever_persisted_ && state_->durable_generation() == persisted_durable_ &&
      state_->progress_generation() == persisted_progress_) {
    return CoreStatus::OK();
  }
  return PersistLocked();
}

void CoordinatorService::PublishMembers() {
  Changes changes;
  {
    std::lock_guard<std::mutex> lock(mu_);
    changes.members_changed = true;
    changes.members_generation = published_members_ = state_->members_generation();
    changes.members = state_->Members();
  }
  Publish(changes);
}

JobStatus CoordinatorService::Describe() {
  std::lock_guard<std::mutex> lock(mu_);
  return state_->Describe(clock_());
}

void CoordinatorService::WithState(const std::function<void(const CoordinatorState&)>& fn) {
  std::lock_guard<std::mutex> lock(mu_);
  fn(*state_);
}

grpc::Status CoordinatorService::Register(grpc::ServerContext* context,
                                          const proto::RegisterRequest* request,
                                          proto::RegisterResponse* response) {
  grpc::Status auth = AuthorizeBearer(*context, options_.token);
  if (!auth.ok()) return auth;
  WorkerRole role;
  CoreStatus s = FromProto(request->role(), &role);
  if (!s.ok()) return Reject("register", s);
  RegisterResult r;
  Changes changes;
  CoreStatus persisted;
  {
    std::lock_guard<std::mutex> lock(mu_);
    s = state_->Register(clock_(), request->host(), role, request->previous_id(), &r);
    persisted = AfterVerb(&changes);
    const CoordinatorConfig& config = state_->config();
    response->set_worker_id(r.id);
    response->set_role(ToProto(r.role));
    response->set_resumed(r.resumed);
    if (r.task.id != 0) ToProto(r.task, response->mutable_task());
    response->set_job_name(config.job_name);
    if (!options_.master_addresses.empty()) {
      response->set_master_address(options_.master_addresses[0]);
    }
    for (const std::string& a : options_.master_addresses) response->add_master_addresses(a);
    response->set_lease_seconds(static_cast<uint32_t>(std::ceil(config.lease_seconds)));
    if (config.shards) {
      response->set_train_shards(config.train_samples);
    } else {
      response->set_train_samples(config.train_samples);
    }
    response->set_shuffle_seed(config.shuffle_seed);
    response->set_batch_size(config.batch_size);
    response->set_phase(ToProto(state_->phase()));
  }
  Publish(changes);
  if (!s.ok()) return Reject("register", s);
  if (!persisted.ok()) return ToGrpc(persisted);
  spdlog::info("worker {} ({}) {} as {}", r.id, request->host(),
               r.resumed ? "resumed" : "joined", WorkerRoleName(r.role));
  return grpc::Status::OK;
}

grpc::Status CoordinatorService::Heartbeat(grpc::ServerContext* context,
                                           const proto::HeartbeatRequest* request,
                                           proto::HeartbeatResponse* response) {
  grpc::Status auth = AuthorizeBearer(*context, options_.token);
  if (!auth.ok()) return auth;
  WorkerProgress progress;
  progress.task_id = request->task_id();
  progress.samples_done = request->samples_done();
  if (request->has_loss()) progress.loss = request->loss();
  progress.master_version = request->master_version();
  uint64_t held = 0;
  Changes changes;
  CoreStatus s, persisted;
  {
    std::lock_guard<std::mutex> lock(mu_);
    s = state_->Heartbeat(clock_(), request->worker_id(), progress, &held);
    persisted = AfterVerb(&changes);
    response->set_phase(ToProto(state_->phase()));
    response->set_task_id(held);
    response->set_lease_seconds(
        static_cast<uint32_t>(std::ceil(state_->config().lease_seconds)));
  }
  Publish(changes);
  if (!s.ok()) return Reject("heartbeat", s);
  if (!persisted.ok()) return ToGrpc(persisted);
  return grpc::Status::OK;
}

grpc::Status CoordinatorService::NextTask(grpc::ServerContext* context,
                                          const proto::NextTaskRequest* request,
                                          proto::NextTaskResponse* response) {
  grpc::Status auth = AuthorizeBearer(*context, options_.token);
  if (!auth.ok()) return auth;
  NextTaskResult r;
  Changes changes;
  CoreStatus s, persisted;
  {
    std::lock_guard<std::mutex> lock(mu_);
    s = state_->NextTask(clock_(), request->worker_id(), &r);
    persisted = AfterVerb(&changes);
    response->set_phase(ToProto(state_->phase()));
  }
  Publish(changes);
  if (!s.ok()) return Reject("next_task", s);
  if (!persisted.ok()) return ToGrpc(persisted);
  response->set_outcome(ToProto(r.outcome));
  response->set_reason(r.reason);
  if (r.outcome == TaskOutcome::kAssigned) {
    ToProto(r.task, response->mutable_task());
  } else if (r.outcome == TaskOutcome::kWaitForWorkers) {
    response->set_retry_after_ms(options_.wait_for_workers_retry_ms);
  } else if (r.outcome != TaskOutcome::kJobFinished) {
    response->set_retry_after_ms(options_.retry_after_ms);
  }
  return grpc::Status::OK;
}

grpc::Status CoordinatorService::CompleteTask(grpc::ServerContext* context,
                                              const proto::CompleteTaskRequest* request,
                                              proto::CompleteTaskResponse* response) {
  grpc::Status auth = AuthorizeBearer(*context, options_.token);
  if (!auth.ok()) return auth;
  TaskCompletion completion;
  for (const proto::MasterPosition& p : request->reached()) {
    completion.reached.push_back(FromProto(p));
  }
  completion.samples_retrained = request->samples_retrained();
  CompleteTaskResult r;
  Changes changes;
  CoreStatus s, persisted;
  uint32_t epoch = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    s = state_->CompleteTask(clock_(), request->worker_id(), request->task_id(), completion, &r);
    persisted = AfterVerb(&changes);
    epoch = state_->tasks().epoch();
    response->set_phase(ToProto(state_->phase()));
  }
  Publish(changes);
  if (!s.ok()) return Reject("complete_task", s);
  if (!persisted.ok()) return ToGrpc(persisted);
  response->set_already_completed(r.already_completed);
  response->set_epoch(epoch);
  // One line per completion: what a run's log says it covered.
  if (!r.already_completed && !r.retrain) {
    spdlog::info("task {} (epoch {}, positions [{}, {})) completed by worker {}", r.task.id,
                 r.task.epoch, r.task.range.begin, r.task.range.end, request->worker_id());
  }
  if (r.epoch_advanced) spdlog::info("epoch {} done; epoch {} begins", epoch - 1, epoch);
  if (r.retrain) {
    spdlog::warn("task {} (epoch {}) completed, but a master restore lost its updates: queued "
                 "again",
                 r.task.id, r.task.epoch);
  }
  if (completion.samples_retrained > 0) {
    spdlog::info("worker {} retrained {} samples of task {} after a master restore",
                 request->worker_id(), completion.samples_retrained, request->task_id());
  }
  if (r.data_available_again) {
    spdlog::info("task {} completed by worker {}: the data is available again", r.task.id,
                 request->worker_id());
  }
  return grpc::Status::OK;
}

grpc::Status CoordinatorService::ReleaseTask(grpc::ServerContext* context,
                                             const proto::ReleaseTaskRequest* request,
                                             proto::ReleaseTaskResponse* response) {
  grpc::Status auth = AuthorizeBearer(*context, options_.token);
  if (!auth.ok()) return auth;
  ReleaseReason reason;
  CoreStatus s = FromProto(request->reason(), &reason);
  if (!s.ok()) return Reject("release_task", s);
  ReleaseTaskResult r;
  Changes changes;
  CoreStatus persisted;
  {
    std::lock_guard<std::mutex> lock(mu_);
    s = state_->ReleaseTask(clock_(), request->worker_id(), request->task_id(), reason,
                            request->message(), &r);
    persisted = AfterVerb(&changes);
    response->set_phase(ToProto(state_->phase()));
  }
  Publish(changes);
  if (!s.ok()) return Reject("release_task", s);
  if (!persisted.ok()) return ToGrpc(persisted);
  response->set_already_released(r.already_released);
  if (!r.already_released) {
    spdlog::warn("task {} (epoch {}, positions [{}, {})) handed back by worker {}: {}{}{}",
                 r.task.id, r.task.epoch, r.task.range.begin, r.task.range.end,
                 request->worker_id(), ReleaseReasonText(reason),
                 request->message().empty() ? "" : ": ", request->message());
  }
  return grpc::Status::OK;
}

grpc::Status CoordinatorService::Leave(grpc::ServerContext* context,
                                       const proto::LeaveRequest* request,
                                       proto::LeaveResponse* response) {
  grpc::Status auth = AuthorizeBearer(*context, options_.token);
  if (!auth.ok()) return auth;
  LeaveReason reason;
  CoreStatus s = FromProto(request->reason(), &reason);
  if (!s.ok()) return Reject("leave", s);
  bool already_gone = false;
  Changes changes;
  CoreStatus persisted;
  {
    std::lock_guard<std::mutex> lock(mu_);
    s = state_->Leave(clock_(), request->worker_id(), reason, &already_gone);
    persisted = AfterVerb(&changes);
  }
  Publish(changes);
  if (!s.ok()) return Reject("leave", s);
  if (!persisted.ok()) return ToGrpc(persisted);
  response->set_already_gone(already_gone);
  if (!already_gone) {
    spdlog::info("worker {} left ({}){}{}", request->worker_id(), LeaveReasonName(reason),
                 request->message().empty() ? "" : ": ", request->message().substr(0, 512));
  }
  return grpc::Status::OK;
}

grpc::Status CoordinatorService::ReportEvaluation(grpc::ServerContext* context,
                                                  const proto::ReportEvaluationRequest* request,
                                                  proto::ReportEvaluationResponse* response) {
  grpc::Status auth = AuthorizeBearer(*context, options_.token);
  if (!auth.ok()) return auth;
  Changes changes;
  CoreStatus s, persisted;
  {
    std::lock_guard<std::mutex> lock(mu_);
    EvalMetrics metrics;
    for (const proto::EvalMetric& m : request->metrics()) metrics.push_back({m.name(), m.value()});
    s = state_->ReportEvaluation(clock_(), request->worker_id(), request->accuracy(),
                                 request->loss(), request->version(), metrics);
    persisted = AfterVerb(&changes);
    response->set_phase(ToProto(state_->phase()));
  }
  Publish(changes);
  if (!s.ok()) return Reject("report_evaluation", s);
  if (!persisted.ok()) return ToGrpc(persisted);
  spdlog::info("evaluation at version {}: accuracy {:.4f}, loss {:.4f}", request->version(),
               request->accuracy(), request->loss());
  return grpc::Status::OK;
}

grpc::Status CoordinatorService::Status(grpc::ServerContext* context,
                                        const proto::CoordinatorStatusRequest*,
                                        proto::CoordinatorStatusResponse* response) {
  grpc::Status auth = AuthorizeBearer(*context, options_.token);
  if (!auth.ok()) return auth;
  ToProto(Describe(), response);
  return grpc::Status::OK;
}

}  // namespace gaptrain
