#include "services/worker/coordinator_session.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>

namespace gaptrain {
namespace {

bool Terminal(proto::JobPhase phase) {
  return phase == proto::JOB_PHASE_SUCCEEDED || phase == proto::JOB_PHASE_FAILED;
}

// Not live any more, or unknown to a coordinator that lost its state.
bool LostMembership(const Status& s) {
  return s.code() == Status::Code::kFailedPrecondition || s.code() == Status::Code::kNotFound;
}

}  // namespace

CoordinatorSession::CoordinatorSession(CoordinatorClient* client, Options options, StopFlag* stop,
                                       WorkerMetrics* metrics)
    : client_(client), options_(std::move(options)), stop_(stop), metrics_(metrics) {}

CoordinatorSession::~CoordinatorSession() { StopHeartbeats(); }

uint64_t CoordinatorSession::NextSeed() {
  std::lock_guard<std::mutex> lock(mu_);
  return options_.seed * 1000003u + ++seed_counter_;
}

proto::RegisterResponse CoordinatorSession::registration() const {
  std::lock_guard<std::mutex> lock(mu_);
  return registration_;
}

uint32_t CoordinatorSession::worker_id() const {
  std::lock_guard<std::mutex> lock(mu_);
  return id_;
}

uint64_t CoordinatorSession::generation() const {
  std::lock_guard<std::mutex> lock(mu_);
  return generation_;
}

void CoordinatorSession::NoteFailure(const char* verb, const Status& status) {
  std::lock_guard<std::mutex> lock(mu_);
  failing_ = true;
  // The first failure of an outage and then every tenth: a long outage
  // does not flood the log.
  if (failures_logged_++ % 10 == 0) {
    spdlog::warn("coordinator: {} failed: {}; retrying", verb, status.ToString());
  }
}

void CoordinatorSession::NoteSuccess() {
  bool recovered = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    recovered = failing_;
    failing_ = false;
    failures_logged_ = 0;
  }
  if (recovered) {
    spdlog::info("coordinator: reachable again");
    if (metrics_ != nullptr) metrics_->RecordReconnect(Peer::kCoordinator);
  }
}

bool CoordinatorSession::CheckJobEnded() {
  proto::CoordinatorStatusResponse status;
  if (!client_->GetStatus(&status).ok() || !Terminal(status.phase())) return false;
  spdlog::info("coordinator: the job has ended ({}: {})", status.reason(), status.message());
  stop_->Stop(StopReason::kJobEnded);
  return true;
}

Status CoordinatorSession::Register() {
  RetryLoop loop(options_.retry, NextSeed(), stop_);
  proto::RegisterResponse reply;
  Status s = CallWithRetry(
      &loop, [&] { return client_->Register(options_.host, options_.role, worker_id(), &reply); },
      [&](const Status& failure) {
        if (failure.code() == Status::Code::kAlreadyExists) {
          spdlog::warn("coordinator: {}; waiting for its lease to run out", failure.message());
        } else {
          NoteFailure("Register", failure);
        }
      },
      [](const Status& failure) {
        return IsTransient(failure) || failure.code() == Status::Code::kAlreadyExists;
      });
  if (!s.ok()) {
    if (s.code() == Status::Code::kFailedPrecondition) CheckJobEnded();
    return s;
  }
  NoteSuccess();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (reply.worker_id() != id_ && id_ != 0) ++generation_;
    id_ = reply.worker_id();
    registration_ = reply;
  }
  spdlog::info("registered with the coordinator as worker {} ({}) of job {}; master {}",
               reply.worker_id(), proto::WorkerRole_Name(reply.role()), reply.job_name(),
               reply.master_address());
  return Status::OK();
}

Status CoordinatorSession::Reregister(uint32_t old_id) {
  std::lock_guard<std::mutex> one_at_a_time(register_mu_);
  if (worker_id() != old_id) return Status::OK();  // another thread did it
  proto::RegisterResponse reply;
  Status s = client_->Register(options_.host, options_.role, old_id, &reply);
  if (!s.ok()) {
    if (s.code() == Status::Code::kFailedPrecondition) CheckJobEnded();
    return s;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!reply.resumed()) ++generation_;
    id_ = reply.worker_id();
    registration_ = reply;
    // Progress was about the old id's task.
    if (!reply.resumed()) progress_.Clear();
  }
  if (reply.resumed()) {
    spdlog::info("registered again as worker {} (resumed, task {})", reply.worker_id(),
                 reply.task().task_id());
  } else {
    spdlog::warn(
        "registered again as worker {}: worker {} was gone (its task went back to the "
        "queue)",
        reply.worker_id(), old_id);
  }
  return Status::OK();
}

Status CoordinatorSession::Call(const char* verb, const std::function<Status(uint32_t)>& call) {
  RetryLoop loop(options_.retry, NextSeed(), stop_);
  int reregistrations = 0;
  while (true) {
    const uint32_t id = worker_id();
    Status s = call(id);
    if (s.ok()) {
      NoteSuccess();
      return s;
    }
    if (IsTransient(s)) {
      NoteFailure(verb, s);
      if (!loop.Wait()) return s;
      continue;
    }
    if (LostMembership(s) && reregistrations++ < 3) {
      spdlog::warn("coordinator: {} refused ({}); registering again", verb, s.ToString());
      Status r = Reregister(id);
      if (r.ok()) continue;
      if (IsTransient(r)) {
        NoteFailure("Register", r);
        if (!loop.Wait()) return r;
        continue;
      }
      return r;
    }
    return s;
  }
}

Status CoordinatorSession::NextTask(proto::NextTaskResponse* response) {
  return Call("NextTask", [&](uint32_t id) { return client_->NextTask(id, response); });
}

Status CoordinatorSession::CompleteTask(uint64_t task_id, const proto::CompleteTaskRequest& report,
                                        bool* credited) {
  *credited = false;
  RetryLoop loop(options_.retry, NextSeed(), stop_);
  proto::CompleteTaskResponse reply;
  const uint32_t id = worker_id();
  proto::CompleteTaskRequest request = report;
  request.set_worker_id(id);
  request.set_task_id(task_id);
  Status s = CallWithRetry(
      &loop, [&] { return client_->CompleteTask(request, &reply); },
      [&](const Status& failure) {
        if (IsTransient(failure)) NoteFailure("CompleteTask", failure);
      });
  if (s.ok()) {
    NoteSuccess();
    *credited = true;
    return s;
  }
  if (LostMembership(s)) {
    // The task went back to the queue while this worker was gone (or the
    // coordinator no longer knows it): not credited; make sure we are
    // registered for the next one.
    spdlog::warn("coordinator: task {} was not credited: {}", task_id, s.message());
    Status r = Reregister(id);
    return r.ok() || IsTransient(r) ? Status::OK() : r;
  }
  return s;
}

Status CoordinatorSession::ReportEvaluation(double accuracy, double loss, uint64_t version,
                                            proto::JobPhase* phase) {
  proto::ReportEvaluationResponse reply;
  Status s = Call("ReportEvaluation", [&](uint32_t id) {
    proto::ReportEvaluationRequest request;
    request.set_worker_id(id);
    request.set_accuracy(accuracy);
    request.set_loss(loss);
    request.set_version(version);
    return client_->ReportEvaluation(request, &reply);
  });
  if (s.ok()) *phase = reply.phase();
  return s;
}

Status CoordinatorSession::Leave(proto::LeaveReason reason, const std::string& message,
                                 Clock::time_point deadline) {
  StopHeartbeats();
  const uint32_t id = worker_id();
  if (id == 0) return Status::OK();  // never registered
  RetryLoop loop(options_.retry, NextSeed(), /*stop=*/nullptr, deadline);
  proto::LeaveResponse reply;
  Status s = CallWithRetry(&loop, [&] {
    // No attempt outlives the deadline: a coordinator that vanished
    // without closing the connection would hold a call for the client's
    // whole per-call deadline (10 s).
    const double seconds = std::chrono::duration<double>(deadline - Clock::now()).count();
    if (seconds <= 0) return Status(Status::Code::kDeadlineExceeded, "no time left to leave");
    return client_->Leave(id, reason, message, &reply, seconds);
  });
  if (LostMembership(s)) return Status::OK();  // gone already
  if (s.ok()) {
    spdlog::info("left the job ({}){}", proto::LeaveReason_Name(reason),
                 reply.already_gone() ? ", already gone" : "");
  }
  return s;
}

void CoordinatorSession::SetProgress(uint64_t task_id, uint32_t samples_done,
                                     std::optional<float> loss) {
  std::lock_guard<std::mutex> lock(mu_);
  progress_.set_task_id(task_id);
  progress_.set_samples_done(samples_done);
  if (loss && std::isfinite(*loss)) progress_.set_loss(*loss);
}

void CoordinatorSession::SetMasterVersion(uint64_t version) {
  std::lock_guard<std::mutex> lock(mu_);
  progress_.set_master_version(std::max<uint64_t>(progress_.master_version(), version));
}

void CoordinatorSession::ResetMasterVersion(uint64_t version) {
  std::lock_guard<std::mutex> lock(mu_);
  progress_.set_master_version(version);
}

void CoordinatorSession::StartHeartbeats() {
  std::lock_guard<std::mutex> lock(hb_mu_);
  if (heartbeats_.joinable()) return;
  hb_stop_ = false;
  hb_calls_.Reset();
  heartbeats_ = std::thread([this] { HeartbeatLoop(); });
}

void CoordinatorSession::HeartbeatNow() {
  {
    std::lock_guard<std::mutex> lock(hb_mu_);
    hb_now_ = true;
  }
  hb_cv_.notify_all();
}

void CoordinatorSession::StopHeartbeats() {
  std::thread t;
  {
    std::lock_guard<std::mutex> lock(hb_mu_);
    hb_stop_ = true;
    t = std::move(heartbeats_);
  }
  hb_cv_.notify_all();
  // A heartbeat's answer no longer matters; the caller (a worker leaving
  // after SIGTERM) should not wait for it.
  hb_calls_.Cancel();
  if (t.joinable()) t.join();
}

std::chrono::milliseconds CoordinatorSession::HeartbeatPeriod() const {
  double seconds = std::clamp(registration().lease_seconds() / 3.0, 0.2, 10.0);
  if (options_.heartbeat_seconds > 0) seconds = std::min(seconds, options_.heartbeat_seconds);
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
}

void CoordinatorSession::HeartbeatLoop() {
  Backoff backoff(options_.retry.backoff, NextSeed());
  auto next = Clock::now() + HeartbeatPeriod();
  while (true) {
    {
      std::unique_lock<std::mutex> lock(hb_mu_);
      hb_cv_.wait_until(lock, next, [this] { return hb_stop_ || hb_now_; });
      if (hb_stop_) return;
      hb_now_ = false;
    }
    proto::HeartbeatRequest request;
    uint32_t id = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      request = progress_;
      id = id_;
    }
    if (id == 0) {  // not registered yet: nothing to keep alive
      next = Clock::now() + HeartbeatPeriod();
      continue;
    }
    request.set_worker_id(id);
    proto::HeartbeatResponse reply;
    Status s = client_->Heartbeat(request, &reply, &hb_calls_);
    if (s.code() == Status::Code::kCancelled && hb_calls_.cancelled()) return;  // stopping
    if (s.ok()) {
      bool resync = false;
      {
        std::lock_guard<std::mutex> lock(mu_);
        resync = failing_;
      }
      NoteSuccess();
      backoff.Reset();
      // After an outage, register again with the same id: resumes it (or,
      // if it was lost meanwhile, gets a new one and drops the task).
      if (resync) Reregister(id);
      if (Terminal(reply.phase())) {
        spdlog::info("coordinator: the job has {}",
                     reply.phase() == proto::JOB_PHASE_SUCCEEDED ? "succeeded" : "failed");
        stop_->Stop(StopReason::kJobEnded);
      }
      next = Clock::now() + HeartbeatPeriod();
    } else if (IsTransient(s)) {
      NoteFailure("Heartbeat", s);
      next = Clock::now() + std::min(HeartbeatPeriod(), backoff.Next());
    } else if (LostMembership(s)) {
      spdlog::warn("coordinator: heartbeat refused ({}); registering again", s.ToString());
      Status r = Reregister(id);
      if (!r.ok() && IsTransient(r)) NoteFailure("Register", r);
      next = Clock::now() +
             (r.ok() ? HeartbeatPeriod() : std::min(HeartbeatPeriod(), backoff.Next()));
    } else {
      spdlog::error("coordinator: heartbeat refused: {}", s.ToString());
      next = Clock::now() + HeartbeatPeriod();
    }
  }
}

LeaveTerms LeaveTermsAfter(const Status& status, const StopFlag& stop, double grace_seconds) {
  LeaveTerms terms;
  terms.deadline = CoordinatorSession::Clock::now() + std::chrono::seconds(10);
  if (!status.ok()) {
    terms.reason = proto::LEAVE_REASON_FAILED;
  } else if (stop.reason() == StopReason::kPreempted) {
    terms.reason = proto::LEAVE_REASON_PREEMPTED;
    terms.deadline = LeaveDeadline(stop, grace_seconds);
  }
  return terms;
}

}  // namespace gaptrain
