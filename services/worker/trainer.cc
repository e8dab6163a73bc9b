#include "services/worker/trainer.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <optional>

#include "services/learn/epoch_order.h"
#include "services/learn/job_model.h"

namespace gaptrain {
namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

Trainer::Trainer(const TrainingJob& job, const Dataset& train, CoordinatorSession* session,
                 MasterLink::Connector connect, StopFlag* stop, WorkerMetrics* metrics,
                 Options options)
    : job_(job),
      train_(train),
      session_(session),
      master_(job, std::move(connect), session, stop, metrics, options.max_recomputes),
      stop_(stop),
      metrics_(metrics),
      options_(options) {}

Trainer::~Trainer() = default;

Status Trainer::Run() {
  Status s = Setup();
  if (!s.ok()) {
    // Stopped while registering or connecting, or the job had ended.
    if (stop_->stopped()) return Finish(Status::OK());
    return Finish(s);
  }
  return Finish(Loop());
}

Status Trainer::Setup() {
  GAPTRAIN_RETURN_IF_ERROR(session_->Register());
  // From here the lease must be kept: building the model and reaching the
  // master (which may be restarting) can take longer than the lease.
  session_->StartHeartbeats();
  const proto::RegisterResponse reg = session_->registration();
  if (reg.train_samples() != train_.size()) {
    return Status::FailedPrecondition(
        "the coordinator cuts tasks over " + std::to_string(reg.train_samples()) +
        " training samples, this worker's dataset has " + std::to_string(train_.size()) +
        " (check spec.data and --data-dir)");
  }
  if (reg.batch_size() == 0) {
    return Status::FailedPrecondition("the coordinator sent batch size 0");
  }
  shuffle_seed_ = reg.shuffle_seed();
  GAPTRAIN_RETURN_IF_ERROR(CreateJobModel(job_, ModelInputOf(train_), shuffle_seed_, &model_));
  device_ = PlaceJobModel(model_.get(), options_.device, options_.mirror_on_cpu_for_testing);
  if (metrics_ != nullptr) metrics_->SetDevice(device_);
  loader_ = std::make_unique<BatchLoader>(train_, reg.batch_size());
  images_.assign(loader_->images_buffer_size(), 0.0f);
  labels_.assign(loader_->labels_buffer_size(), 0);

  RetryLoop loop(options_.retry, NextSeed(), stop_);
  GAPTRAIN_RETURN_IF_ERROR(master_.Connect(MasterAddressesOf(reg), model_.get(), &loop));
  master_.AdoptMasterBuffers();
  spdlog::info("trainer ready: {} parameters, batch {}, {} training samples, computing on {}{}",
               model_->layout().size(), reg.batch_size(), train_.size(), device_,
               master_.dana_slim() ? ", DANA-Slim momentum on this worker" : "");
  return Status::OK();
}

Status Trainer::Loop() {
  while (!stop_->stopped()) {
    // A registration again may name other masters (they moved).
    const std::vector<std::string> addresses = MasterAddressesOf(session_->registration());
    if (addresses != master_.addresses()) {
      RetryLoop loop(options_.retry, NextSeed(), stop_);
      Status s = master_.Connect(addresses, model_.get(), &loop);
      if (!s.ok()) return stop_->stopped() ? Status::OK() : s;
    }
    proto::NextTaskResponse next;
    Status s = session_->NextTask(&next);
    if (!s.ok()) return stop_->stopped() ? Status::OK() : s;
    switch (next.outcome()) {
      case proto::NextTaskResponse::ASSIGNED:
        GAPTRAIN_RETURN_IF_ERROR(RunTask(next.task()));
        break;
      case proto::NextTaskResponse::WAIT_FOR_WORKERS:
      case proto::NextTaskResponse::EPOCH_FINISHING:
        spdlog::debug("no task yet: {}", next.reason());
        stop_->SleepFor(std::chrono::milliseconds(std::max<uint32_t>(next.retry_after_ms(), 10)));
        break;
      case proto::NextTaskResponse::JOB_FINISHED:
        spdlog::info("no more tasks: {}", next.reason());
        stop_->Stop(StopReason::kJobEnded);
        break;
      default:
        spdlog::warn("coordinator: NextTask answered an unknown outcome {}; asking again",
                     static_cast<int>(next.outcome()));
        stop_->SleepFor(std::chrono::milliseconds(1000));
        break;
    }
  }
  return Status::OK();
}

Status Trainer::RunTask(const proto::DataTask& task) {
  const uint32_t n = static_cast<uint32_t>(train_.size());
  if (task.task_id() == 0 || task.begin() >= task.end() || task.end() > n) {
    return Status::FailedPrecondition(
        "coordinator: task " + std::to_string(task.task_id()) + " covers positions [" +
        std::to_string(task.begin()) + ", " + std::to_string(task.end()) + ") of epoch " +
        std::to_string(task.epoch()) + ", not a range within this worker's " + std::to_string(n) +
        " training samples");
  }
  if (order_epoch_ != task.epoch()) {
    order_ = EpochPermutation(shuffle_seed_, task.epoch(), n);
    order_epoch_ = task.epoch();
  }
  const uint64_t generation = session_->generation();
  master_.ForgetPulled();  // parameters from before the task's RPCs: pull fresh ones
  // Positions still to train, in order: the task, then any whose updates
  // a master restart lost.
  std::deque<SampleRange> todo = {SampleRange{task.begin(), task.end()}};
  master_.BeginTask();
  uint32_t done = 0, retrained = 0;
  std::optional<float> last_loss;
  task_ = task;
  task_done_ = 0;
  session_->SetProgress(task.task_id(), 0, std::nullopt);
  spdlog::debug("task {}: epoch {}, positions [{}, {})", task.task_id(), task.epoch(), task.begin(),
                task.end());
  while (!todo.empty()) {
    BatchIterator it(*loader_, order_, todo.front());
    todo.pop_front();
    GAPTRAIN_RETURN_IF_ERROR(it.status());
    while (true) {
      if (stop_->stopped()) return Status::OK();  // abandoned: Leave gives it back
      if (session_->generation() != generation) {
        spdlog::warn("task {} abandoned: the coordinator took it back", task.task_id());
        task_.Clear();  // someone else's now
        return Status::OK();
      }
      const uint32_t first = it.position();
      const size_t k = it.Next(images_.data(), labels_.data());
      if (k == 0) break;
      BatchOutcome outcome = BatchOutcome::kSkipped;
      float loss = std::numeric_limits<float>::quiet_NaN();
      const SampleRange positions{first, first + static_cast<uint32_t>(k)};
      GAPTRAIN_RETURN_IF_ERROR(TrainBatch(positions, generation, &outcome, &loss));
      if (outcome == BatchOutcome::kStopped || outcome == BatchOutcome::kTaskLost) continue;
      if (outcome == BatchOutcome::kSkipped) ++skipped_;
      if (outcome == BatchOutcome::kTrained) last_loss = loss;
      done += static_cast<uint32_t>(k);
      if (master_.run_changed()) {
        uint32_t lost = 0;
        Status s = OnMasterRestart(&todo, &lost);
        if (!s.ok()) return stop_->stopped() ? Status::OK() : s;
        done -= lost;
        retrained += lost;
      }
      task_done_ = done;
      session_->SetProgress(task.task_id(), done, last_loss);
    }
    GAPTRAIN_RETURN_IF_ERROR(it.status());
  }
  // Where this task's updates are, for the coordinator.
  proto::CompleteTaskRequest report;
  master_.AddReached(&report);
  report.set_samples_retrained(retrained);
  retrained_ += retrained;
  if (master_.buffers_behind()) master_.SendBuffers();
  bool credited = false;
  Status s = session_->CompleteTask(task.task_id(), report, &credited);
  if (!s.ok()) return stop_->stopped() ? Status::OK() : s;
  task_.Clear();
  if (credited) ++tasks_;
  session_->SetProgress(0, 0, last_loss);
  return Status::OK();
}

bool Trainer::FitsInGrace(double seconds) const {
  if (!stop_->stopped()) return true;
  if (stop_->reason() != StopReason::kPreempted) return false;  // the job is over
  // Keep a quarter of the grace period (at most 2 s) for Leave.
  const double reserve = std::min(2.0, options_.grace_seconds / 4);
  const auto deadline =
      stop_->stop_time() + std::chrono::duration_cast<Clock::duration>(
                               std::chrono::duration<double>(options_.grace_seconds - reserve));
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(
                            std::chrono::duration<double>(1.5 * seconds)) <=
         deadline;
}

Status Trainer::OnMasterRestart(std::deque<SampleRange>* todo, uint32_t* lost) {
  *lost = 0;
  RetryLoop loop(options_.retry, NextSeed(), stop_);
  std::vector<SampleRange> positions;
  GAPTRAIN_RETURN_IF_ERROR(master_.TakeLost(&loop, &positions));
  for (const SampleRange& p : positions) {
    if (!todo->empty() && todo->back().end == p.begin) {
      todo->back().end = p.end;
    } else {
      todo->push_back(p);
    }
    *lost += p.size();
  }
  return Status::OK();
}

Status Trainer::TrainBatch(SampleRange positions, uint64_t generation, BatchOutcome* outcome,
                           float* loss) {
  const size_t samples = positions.size();
  RetryLoop loop(options_.retry, NextSeed(), stop_);
  master_.BeginBatch();
  auto give_up = [&](const Status& s) {
    if (stop_->stopped()) {
      *outcome = BatchOutcome::kStopped;
      return Status::OK();
    }
    return s;
  };
  auto stopped = [&] {
    *outcome = BatchOutcome::kStopped;
    return Status::OK();
  };
  auto skipped = [&] {
    *outcome = BatchOutcome::kSkipped;
    return Status::OK();
  };
  while (true) {
    const double step = master_.pull_seconds() + compute_seconds_.seconds() +
                        master_.push_seconds();
    if (!FitsInGrace(step)) return stopped();
    if (session_->generation() != generation) {
      *outcome = BatchOutcome::kTaskLost;
      return Status::OK();
    }

    Status s = master_.Pull();
    if (!s.ok()) {
      const MasterSession::Next next = master_.AfterPullFailure(s, &loop);
      if (next == MasterSession::Next::kFail) return s;
      if (next == MasterSession::Next::kGiveUp) return give_up(s);
      continue;
    }

    if (!FitsInGrace(compute_seconds_.seconds() + master_.push_seconds())) return stopped();
    const auto compute_start = Clock::now();
    const float l =
        model_->ComputeGradient(images_.data(), labels_.data(), static_cast<int64_t>(samples));
    const double compute = compute_seconds_.AddSince(compute_start);
    if (metrics_ != nullptr) metrics_->RecordCompute(compute);
    if (!std::isfinite(l)) {
      spdlog::warn("batch skipped: its loss is {} (see the LibTorch error above, if any)", l);
      return skipped();
    }
    if (!FitsInGrace(master_.push_seconds())) return stopped();

    proto::PushResponse reply;
    s = master_.Push(l, positions, &reply);
    if (s.ok()) {
      ++batches_;
      samples_ += samples;
      if (metrics_ != nullptr) metrics_->RecordBatch(samples, l);
      *outcome = BatchOutcome::kTrained;
      *loss = l;
      return Status::OK();
    }
    switch (master_.AfterPushFailure(s, &loop)) {
      case MasterSession::Next::kAgain:
        continue;
      case MasterSession::Next::kSkip:
        return skipped();
      case MasterSession::Next::kGiveUp:
        return give_up(s);
      case MasterSession::Next::kFail:
        return s;
    }
  }
}

Status Trainer::Finish(Status status) {
  if (!status.ok()) spdlog::error("trainer stopped: {}", status.ToString());
  const LeaveTerms terms = LeaveTermsAfter(status, *stop_, options_.grace_seconds);
  Status left =
      session_->Leave(terms.reason, status.ok() ? "" : status.ToString(), terms.deadline);
  if (left.ok()) {
    if (task_.task_id() != 0) spdlog::info("handed back {}", HeldTask());
  } else {
    // The coordinator keeps the task with this worker until the lease runs
    // out; then it queues it again, as for a lost node.
    const proto::RegisterResponse reg = session_->registration();
    spdlog::warn("could not {} ({}); {} goes back to the queue when worker {}'s lease runs out "
                 "(within {} s)",
                 IsTransient(left) ? "reach the coordinator to leave" : "leave the job",
                 left.ToString(), task_.task_id() != 0 ? HeldTask() : "nothing (no task in hand)",
                 reg.worker_id(), reg.lease_seconds());
  }
  spdlog::info("trainer done: {} batches ({} samples) pushed, {} skipped, {} tasks completed, "
               "{} samples retrained after master restarts",
               batches_, samples_, skipped_, tasks_, retrained_);
  return status;
}

std::string Trainer::HeldTask() const {
  if (task_.task_id() == 0) return "no task";
  const uint32_t size = task_.end() - task_.begin();
  // All pushed, but CompleteTask got no answer.
  const std::string done =
      task_done_ >= size
          ? "all " + std::to_string(size) + " samples pushed, completion not acknowledged"
          : std::to_string(task_done_) + " of " + std::to_string(size) + " samples pushed";
  return "task " + std::to_string(task_.task_id()) + " (epoch " + std::to_string(task_.epoch()) +
         ", positions [" + std::to_string(task_.begin()) + ", " + std::to_string(task_.end()) +
         "), " + done + ")";
}

}  // namespace gaptrain
