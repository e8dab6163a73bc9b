#include "services/worker/master_session.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstring>
#include <map>

#include "services/engine/rules/dana_slim_worker.h"

namespace gaptrain {
namespace {

using Clock = std::chrono::steady_clock;

std::string LowerCodeName(Status::Code code) {
  std::string name = StatusCodeName(code);
  std::transform(name.begin(), name.end(), name.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return name;
}

}  // namespace

MasterSession::MasterSession(const TrainingJob& job, MasterLink::Connector connect,
                             CoordinatorSession* coordinator, StopFlag* stop,
                             WorkerMetrics* metrics)
    : job_(job),
      link_(std::move(connect), metrics),
      coordinator_(coordinator),
      stop_(stop),
      metrics_(metrics) {}

Status MasterSession::Connect(const std::string& address, Model* model, RetryLoop* loop) {
  model_ = model;
  p_ = model->layout().size();
  GAPTRAIN_RETURN_IF_ERROR(link_.Connect(address, model->layout(), model->buffer_layout(), loop));
  run_id_ = link_.run().id();
  run_changed_ = false;
  known_version_ = -1;
  pulled_with_push_ = false;
  const proto::DescribeResponse& d = link_.description();
  sync_ = d.rule() == "sync";
  push_pull_ = true;  // this master may have PushPull, whatever an earlier one said
  echo_ = d.needs_echo();
  echo_type_ = d.echo_type();
  // Pulled over a bf16 wire, the copy holds bf16 values: sent as bf16 it
  // loses nothing, and the master knows it is rounded (the Gap then does
  // not count the rounding as a move).
  if (echo_ && job_.training.wire_type == "bf16") echo_type_ = proto::BFLOAT16;
  if (echo_ && echo_type_ == proto::BFLOAT16) echo_bf16_.assign(p_, 0);
  dana_slim_ = d.rule() == "dana-slim";
  momentum_ = static_cast<float>(job_.training.optimizer.momentum);
  weight_decay_ = static_cast<float>(job_.training.optimizer.weight_decay);
  return Status::OK();
}

Status MasterSession::TakeLost(RetryLoop* loop, std::vector<SampleRange>* lost) {
  lost->clear();
  GAPTRAIN_RETURN_IF_ERROR(Connect(link_.address(), model_, loop));
  const proto::MasterIncarnation run = link_.run();
  coordinator_->ResetMasterVersion(link_.description().version());
  std::vector<TaskPush> kept;
  uint32_t samples = 0;
  for (TaskPush p : task_pushes_) {
    if (p.incarnation == 0 || p.incarnation == run.id()) {
      kept.push_back(p);
    } else if (p.incarnation == run.restored_from_id() &&
               p.version <= run.restored_from_version()) {
      p.incarnation = 0;  // in the checkpoint the new run resumed from
      kept.push_back(p);
    } else {
      lost->push_back(p.positions);  // applied after that checkpoint
      samples += p.positions.size();
    }
  }
  task_pushes_ = std::move(kept);
  spdlog::warn("master: a new run ({}) resumed from version {}; {} samples of the task in hand "
               "lost their updates and are trained again",
               run.id(), run.restored_from_version(), samples);
  return Status::OK();
}

void MasterSession::AddReached(proto::CompleteTaskRequest* report) const {
  std::map<uint64_t, uint64_t> reached;
  for (const TaskPush& p : task_pushes_) {
    if (p.incarnation != 0) reached[p.incarnation] = std::max(reached[p.incarnation], p.version);
  }
  for (const auto& [incarnation, version] : reached) {
    proto::MasterPosition* position = report->add_reached();
    position->set_incarnation(incarnation);
    position->set_version(version);
  }
}

void MasterSession::AdoptMasterBuffers() {
  if (model_->buffer_layout().empty()) return;
  proto::PullBuffersResponse buffers;
  const Status s = link_.client()->PullBuffers(&buffers);
  if (!s.ok() || buffers.merges() == 0 ||
      buffers.values().size() != model_->buffer_layout().bytes()) {
    return;  // the module's own statistics, as a fresh job's
  }
  model_->CopyBuffersFrom(reinterpret_cast<const uint8_t*>(buffers.values().data()));
  spdlog::info("master: took the job's module buffers ({} sends folded in)", buffers.merges());
}

void MasterSession::SendBuffers() {
  if (model_->buffer_layout().empty()) return;
  pushes_since_buffers_ = 0;
  std::string values(model_->buffer_layout().bytes(), '\0');
  model_->CopyBuffersTo(reinterpret_cast<uint8_t*>(values.data()));
  // Best effort: the next send carries newer statistics anyway.
  const Status s = link_.client()->PushBuffers(coordinator_->worker_id(), values);
  if (!s.ok()) spdlog::debug("master: buffers not sent: {}", s.ToString());
}

Status MasterSession::Pull() {
  if (pulled_with_push_) {
    pulled_with_push_ = false;
    return Status::OK();
  }
  return PullNow();
}

Status MasterSession::PullNow() {
  MasterClient::PullResult r;
  const auto start = Clock::now();
  Status s = link_.client()->Pull(coordinator_->worker_id(), known_version_,
                                  model_->parameters(), p_, &r);
  if (!s.ok()) {
    known_version_ = -1;  // the buffer may hold part of a reply
    return s;
  }
  const double seconds = pull_seconds_.AddSince(start);
  link_.NoteSuccess();
  not_member_logged_ = false;
  if (metrics_ != nullptr) metrics_->RecordPull(seconds);
  AcceptPulled(r);
  return Status::OK();
}

void MasterSession::AcceptPulled(const MasterClient::PullResult& r) {
  link_.NoteVersion(r.version);
  coordinator_->SetMasterVersion(r.version);
  NoteRun(r.incarnation);
  // Reads go through a const Model: the non-const parameters() marks
  // them changed (one more copy to a GPU before the next step).
  const Model& model = *model_;
  if (r.modified && echo_ && echo_type_ == proto::BFLOAT16) {
    FloatsToBf16(model.parameters(), p_, echo_bf16_.data());
  }
  known_version_ = static_cast<int64_t>(r.version);
  base_version_ = r.version;
}

const float* MasterSession::Gradient() {
  if (!dana_slim_) return model_->gradients();
  if (velocity_.size() != p_) {  // the first push: v = 0 (an evaluator never gets here)
    velocity_.assign(p_, 0.0f);
    next_velocity_.assign(p_, 0.0f);
    u_.assign(p_, 0.0f);
  }
  // u = g' + γv' with g' = g + λx and v' = γv + g'; v' is kept only when
  // the push is accepted.
  const Model& model = *model_;
  const float* g = model.gradients();
  const float* x = model.parameters();
  for (size_t j = 0; j < p_; ++j) u_[j] = g[j] + weight_decay_ * x[j];
  std::memcpy(next_velocity_.data(), velocity_.data(), p_ * sizeof(float));
  DanaSlimWorkerStep(momentum_, u_.data(), next_velocity_.data(), u_.data(), p_);
  return u_.data();
}

Status MasterSession::SendGradient(const float* gradient, float loss,
                                   proto::PushResponse* reply) {
  const void* echo = nullptr;
  if (echo_) {
    echo = echo_type_ == proto::BFLOAT16
               ? static_cast<const void*>(echo_bf16_.data())
               : static_cast<const void*>(static_cast<const Model&>(*model_).parameters());
  }
  const uint32_t worker = coordinator_->worker_id();
  if (push_pull_) {
    MasterClient::PushPullResult r;
    Status s = link_.client()->PushPull(worker, base_version_, gradient, p_, loss, echo,
                                        echo_type_, model_->parameters(), &r);
    if (s.code() != Status::Code::kUnimplemented) {
      if (!s.ok()) return s;
      *reply = r.push;
      if (!r.pull_status.ok()) {
        known_version_ = -1;  // the buffer may hold part of a reply
        spdlog::debug("master: the pull after a push failed ({}); pulling again",
                      r.pull_status.ToString());
      } else if (r.pull.modified) {
        // Taken after the push's own bookkeeping (Push): its version is
        // newer than the push's.
        pulled_with_push_ = true;
        pulled_ = r.pull;
      }
      return Status::OK();
    }
    // Nothing was applied: push the same gradient the old way.
    spdlog::info("master: no PushPull (an older master); pushing and pulling in two calls");
    push_pull_ = false;
  }
  return link_.client()->Push(worker, base_version_, gradient, p_, loss, reply, echo, echo_type_);
}

Status MasterSession::Push(float loss, SampleRange positions, proto::PushResponse* reply) {
  const auto start = Clock::now();
  pulled_with_push_ = false;
  Status s = SendGradient(Gradient(), loss, reply);
  if (!s.ok()) {
    known_version_ = -1;  // pull a whole copy before computing again
    return s;
  }
  const double seconds = push_seconds_.AddSince(start);
  link_.NoteSuccess();
  if (metrics_ != nullptr) metrics_->RecordPush(seconds);
  if (dana_slim_) velocity_.swap(next_velocity_);
  link_.NoteVersion(reply->version());
  coordinator_->SetMasterVersion(reply->version());
  NoteRun(reply->incarnation());
  // In sync mode an accumulated gradient enters θ with the next step.
  task_pushes_.push_back(
      {positions, reply->incarnation(),
       reply->version() + (reply->outcome() == proto::PushResponse::ACCUMULATED ? 1 : 0)});
  if (++pushes_since_buffers_ >= kPushesPerBufferSend) SendBuffers();
  if (pulled_with_push_) AcceptPulled(pulled_);  // the next Pull() has nothing to ask
  // Past the job's maxUpdates: the coordinator ends the job once a
  // heartbeat reports the version, so report it now.
  if (reply->outcome() == proto::PushResponse::DISCARDED_FINISHED) coordinator_->HeartbeatNow();
  // The master holds a sync PushPull until the step is out; an older
  // master (or a step slower than its limit) answers before: poll.
  if (sync_ && reply->outcome() == proto::PushResponse::ACCUMULATED &&
      base_version_ <= reply->version()) {
    WaitForNextStep(reply->version());
  }
  return Status::OK();
}

void MasterSession::WaitForNextStep(uint64_t pushed_on) {
  Backoff::Options o;
  o.initial = std::chrono::milliseconds(1);
  o.max = std::chrono::milliseconds(100);
  Backoff backoff(o, NextSeed());
  while (!stop_->stopped()) {
    if (PullNow().ok() && base_version_ > pushed_on) return;
    stop_->SleepFor(backoff.Next());
  }
}

Status MasterSession::Observe(RetryLoop* loop, uint64_t* version) {
  MasterClient::PullResult r;
  Status s = CallWithRetry(
      loop, [&] { return link_.client()->PullModel(known_version_, model_->parameters(), p_, &r); },
      [&](const Status& failure) {
        known_version_ = -1;  // the buffer may hold part of a reply
        link_.NoteFailure("Pull", failure);
      });
  if (!s.ok()) return s;
  link_.NoteSuccess();
  link_.NoteVersion(r.version);
  coordinator_->SetMasterVersion(r.version);
  known_version_ = static_cast<int64_t>(r.version);
  *version = r.version;
  return Status::OK();
}

Status MasterSession::ObserveBuffers(RetryLoop* loop) {
  if (model_->buffer_layout().empty()) return Status::OK();
  proto::PullBuffersResponse buffers;
  Status s = CallWithRetry(
      loop, [&] { return link_.client()->PullBuffers(&buffers); },
      [&](const Status& failure) { link_.NoteFailure("PullBuffers", failure); });
  if (!s.ok()) return s;
  if (buffers.values().size() != model_->buffer_layout().bytes()) {
    return Status::FailedPrecondition(
        "the master's buffers are " + std::to_string(buffers.values().size()) +
        " bytes, this model's " + std::to_string(model_->buffer_layout().bytes()));
  }
  model_->CopyBuffersFrom(reinterpret_cast<const uint8_t*>(buffers.values().data()));
  return Status::OK();
}

Status MasterSession::Version(RetryLoop* loop, uint64_t* version) {
  proto::DescribeResponse d;
  Status s = CallWithRetry(
      loop, [&] { return link_.client()->Describe(&d); },
      [&](const Status& failure) { link_.NoteFailure("Describe", failure); });
  if (!s.ok()) return s;
  link_.NoteSuccess();
  *version = d.version();
  return Status::OK();
}

MasterSession::Next MasterSession::AfterPullFailure(const Status& failure) {
  if (failure.code() == Status::Code::kNotFound) {
    if (!not_member_logged_) {
      spdlog::info("master: worker {} is not a member yet ({}); waiting for the coordinator's "
                   "membership feed",
                   coordinator_->worker_id(), failure.message());
      not_member_logged_ = true;
    }
    return Next::kRetry;
  }
  if (IsTransient(failure)) {
    link_.NoteFailure("Pull", failure);
    return Next::kRetry;
  }
  return Next::kFail;  // e.g. the master's model has another size: nothing to retry
}

MasterSession::Next MasterSession::AfterPushFailure(const Status& failure) {
  if (IsTransient(failure)) {
    // Whether it was applied is unknown: recompute on fresh parameters
    // rather than risk applying the same gradient twice.
    link_.NoteFailure("Push", failure);
    return Next::kRetry;
  }
  if (metrics_ != nullptr) metrics_->RecordPushRejected(LowerCodeName(failure.code()));
  switch (failure.code()) {
    case Status::Code::kFailedPrecondition:  // too stale, or no matching copy
    case Status::Code::kOutOfRange:          // from the future: the master went back
    case Status::Code::kNotFound:            // not a member (yet, or any more)
      return Next::kRecompute;
    case Status::Code::kInvalidArgument:
      spdlog::error("master refused the push as invalid, which is a bug: {}; batch skipped",
                    failure.ToString());
      return Next::kSkip;
    case Status::Code::kAlreadyExists:  // sync: this step has our gradient already
      spdlog::warn("master: {}; batch skipped", failure.message());
      return Next::kSkip;
    default:
      return Next::kFail;  // UNAUTHENTICATED, RESOURCE_EXHAUSTED, ...: nothing to retry
  }
}

}  // namespace gaptrain
