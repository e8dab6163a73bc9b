#include "services/worker/evaluation_loop.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>

#include "services/learn/chance_level.h"
#include "services/learn/evaluator.h"
#include "services/learn/job_model.h"

namespace gaptrain {
namespace {

using Clock = std::chrono::steady_clock;

bool Terminal(proto::JobPhase phase) {
  return phase == proto::JOB_PHASE_SUCCEEDED || phase == proto::JOB_PHASE_FAILED;
}

}  // namespace

EvaluationLoop::EvaluationLoop(const TrainingJob& job, const Dataset& test,
                               CoordinatorSession* session, MasterLink::Connector connect,
                               StopFlag* stop, WorkerMetrics* metrics, Options options)
    : job_(job),
      test_(test),
      session_(session),
      master_(job, std::move(connect), session, stop, metrics),
      stop_(stop),
      metrics_(metrics),
      options_(options) {}

EvaluationLoop::~EvaluationLoop() = default;

Status EvaluationLoop::Run() {
  Status s = Setup();
  if (!s.ok()) {
    if (stop_->stopped()) return Finish(Status::OK());
    return Finish(s);
  }
  session_->StartHeartbeats();
  return Finish(Loop());
}

Status EvaluationLoop::Setup() {
  GAPTRAIN_RETURN_IF_ERROR(session_->Register());
  const proto::RegisterResponse reg = session_->registration();
  if (reg.role() != proto::WORKER_ROLE_EVALUATOR) {
    return Status::FailedPrecondition(
        "asked to evaluate, but the coordinator registered this "
        "worker as " +
        proto::WorkerRole_Name(reg.role()));
  }
  GAPTRAIN_RETURN_IF_ERROR(CreateJobModel(job_, ModelInputOf(test_), reg.shuffle_seed(), &model_));
  device_ = PlaceJobModel(model_.get(), options_.device, options_.mirror_on_cpu_for_testing);
  if (metrics_ != nullptr) metrics_->SetDevice(device_);
  RetryLoop loop(options_.retry, NextSeed(), stop_);
  GAPTRAIN_RETURN_IF_ERROR(master_.Connect(MasterAddressesOf(reg), model_.get(), &loop));
  spdlog::info("evaluator ready: {} test samples, every {} master updates, computing on {}",
               test_.size(), job_.training.eval_every_updates, device_);
  if (Terminal(reg.phase())) {
    // Started after the job ended: the final model still gets its score.
    spdlog::info("the job has {}: evaluating the final model",
                 reg.phase() == proto::JOB_PHASE_SUCCEEDED ? "succeeded" : "failed");
    stop_->Stop(StopReason::kJobEnded);
  }
  return Status::OK();
}

Status EvaluationLoop::Evaluate(RetryLoop* loop) {
  const auto start = Clock::now();
  uint64_t version = 0;
  GAPTRAIN_RETURN_IF_ERROR(master_.Observe(loop, &version));
  if (evaluated_ && version == result_.version) return Status::OK();
  // The trainers' BatchNorm statistics (the master's average of them): the
  // model is evaluated as it was trained, not with fresh ones.
  GAPTRAIN_RETURN_IF_ERROR(master_.ObserveBuffers(loop));

  EvalResult eval;
  GAPTRAIN_RETURN_IF_ERROR(EvaluateModel(model_.get(), test_, options_.batch_size, &eval));
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  if (!std::isfinite(eval.loss)) {
    spdlog::warn("evaluation of version {} gave loss {}: not reported", version, eval.loss);
    return Status::OK();
  }
  evaluated_ = true;
  result_.evaluations++;
  result_.accuracy = eval.accuracy;
  result_.loss = eval.loss;
  result_.version = version;
  if (metrics_ != nullptr) metrics_->RecordEvaluation(eval.accuracy, eval.loss, version, seconds);
  spdlog::info("evaluation: version {}, accuracy {:.4f}, loss {:.4f} ({:.2f} s)", version,
               eval.accuracy, eval.loss, seconds);
  const int classes = static_cast<int>(test_.num_classes);
  if (version > 0 && AtChanceLevel(eval.accuracy, eval.loss, classes)) {
    spdlog::warn("evaluation of version {}: {}", version, ChanceLevelAdvice());
  }
  proto::JobPhase phase = proto::JOB_PHASE_UNSPECIFIED;
  Status s = session_->ReportEvaluation(eval.accuracy, eval.loss, version, &phase);
  if (!s.ok()) return s;
  if (Terminal(phase) && !stop_->stopped()) {
    spdlog::info("the job has {}", phase == proto::JOB_PHASE_SUCCEEDED ? "succeeded" : "failed");
    stop_->Stop(StopReason::kJobEnded);
  }
  return Status::OK();
}

Status EvaluationLoop::Loop() {
  const uint64_t every = std::max<uint64_t>(1, job_.training.eval_every_updates);
  uint64_t next_at = every;
  RetryLoop loop(options_.retry, NextSeed(), stop_);
  while (!stop_->stopped()) {
    uint64_t version = 0;
    Status s = master_.Version(&loop, &version);
    if (!s.ok()) {
      if (stop_->stopped()) break;
      return s;
    }
    if (version >= next_at) {
      s = Evaluate(&loop);
      if (!s.ok()) {
        if (stop_->stopped()) break;
        return s;
      }
      next_at = result_.version + every;
    } else {
      stop_->SleepFor(options_.poll);
    }
  }
  if (stop_->reason() == StopReason::kJobEnded) {
    // The final model: evaluated once more, so the job's last reported
    // accuracy is the final model's.
    RetryLoop final_loop(
        options_.retry, NextSeed(), nullptr,
        Clock::now() + std::chrono::duration_cast<Clock::duration>(
                           std::chrono::duration<double>(options_.final_evaluation_seconds)));
    Status s = Evaluate(&final_loop);
    if (!s.ok()) spdlog::warn("final evaluation failed: {}", s.ToString());
  }
  return Status::OK();
}

Status EvaluationLoop::Finish(Status status) {
  if (!status.ok()) spdlog::error("evaluator stopped: {}", status.ToString());
  const LeaveTerms terms = LeaveTermsAfter(status, *stop_, options_.grace_seconds);
  Status left =
      session_->Leave(terms.reason, status.ok() ? "" : status.ToString(), terms.deadline);
  if (!left.ok()) {
    // An evaluator holds no task: nothing goes back to the queue; its
    // lease running out frees the evaluator's place for a replacement.
    spdlog::warn("could not {} ({}); the evaluator holds no task, and a replacement may register "
                 "once worker {}'s lease runs out (within {} s)",
                 IsTransient(left) ? "reach the coordinator to leave" : "leave the job",
                 left.ToString(), session_->worker_id(), session_->registration().lease_seconds());
  }
  spdlog::info("evaluator done: {} evaluations, last accuracy {:.4f} at version {}",
               result_.evaluations, result_.accuracy, result_.version);
  return status;
}

}  // namespace gaptrain
