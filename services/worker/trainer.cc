#include "services/worker/trainer.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <optional>

#include "services/engine/rules/dana_slim_worker.h"
#include "services/learn/epoch_order.h"
#include "services/learn/job_model.h"

namespace gaptrain {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Moving average of a phase's duration; the first sample sets it.
void Average(double* average, double seconds) {
  *average = *average == 0 ? seconds : 0.9 * *average + 0.1 * seconds;
}

std::string LowerCodeName(Status::Code code) {
  std::string name = StatusCodeName(code);
  std::transform(name.begin(), name.end(), name.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return name;
}

}  // namespace

Trainer::Trainer(const TrainingJob& job, const Dataset& train, CoordinatorSession* session,
                 MasterLink::Connector connect, StopFlag* stop, WorkerMetrics* metrics,
                 Options options)
    : job_(job),
      train_(train),
      session_(session),
      master_(std::move(connect), metrics),
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
  p_ = model_->layout().size();
  loader_ = std::make_unique<BatchLoader>(train_, reg.batch_size());
  images_.assign(loader_->images_buffer_size(), 0.0f);
  labels_.assign(loader_->labels_buffer_size(), 0);

  RetryLoop loop(options_.retry, NextSeed(), stop_);
  GAPTRAIN_RETURN_IF_ERROR(
      master_.Connect(reg.master_address(), model_->layout(), model_->buffer_layout(), &loop));
  run_id_ = master_.run().id();
  AdoptMasterBuffers();
  const proto::DescribeResponse& d = master_.description();
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
  if (dana_slim_) {
    momentum_ = static_cast<float>(job_.training.optimizer.momentum);
    weight_decay_ = static_cast<float>(job_.training.optimizer.weight_decay);
    velocity_.assign(p_, 0.0f);
    next_velocity_.assign(p_, 0.0f);
    u_.assign(p_, 0.0f);
  }
  spdlog::info("trainer ready: {} parameters, batch {}, {} training samples, computing on {}{}",
               p_, reg.batch_size(), train_.size(), device_,
               dana_slim_ ? ", DANA-Slim momentum on this worker" : "");
  return Status::OK();
}

Status Trainer::Loop() {
  while (!stop_->stopped()) {
    // A registration again may name another master (it moved).
    const std::string address = session_->registration().master_address();
    if (address != master_.address()) {
      RetryLoop loop(options_.retry, NextSeed(), stop_);
      Status s = master_.Connect(address, model_->layout(), model_->buffer_layout(), &loop);
      if (!s.ok()) return stop_->stopped() ? Status::OK() : s;
      known_version_ = -1;
      run_id_ = master_.run().id();
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
  pulled_with_push_ = false;  // parameters from before the task's RPCs: pull fresh ones
  // Positions still to train, in order: the task, then any whose updates
  // a master restart lost.
  std::deque<SampleRange> todo = {SampleRange{task.begin(), task.end()}};
  std::vector<PushedBatch> pushed;
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
      GAPTRAIN_RETURN_IF_ERROR(TrainBatch(k, generation, &outcome, &loss));
      if (outcome == BatchOutcome::kStopped || outcome == BatchOutcome::kTaskLost) continue;
      if (outcome == BatchOutcome::kSkipped) ++skipped_;
      if (outcome == BatchOutcome::kTrained) {
        last_loss = loss;
        pushed.push_back({SampleRange{first, first + static_cast<uint32_t>(k)},
                          pushed_incarnation_, pushed_version_});
      }
      done += static_cast<uint32_t>(k);
      if (run_changed_) {
        uint32_t lost = 0;
        Status s = OnMasterRestart(&pushed, &todo, &lost);
        if (!s.ok()) return stop_->stopped() ? Status::OK() : s;
        done -= lost;
        retrained += lost;
      }
      task_done_ = done;
      session_->SetProgress(task.task_id(), done, last_loss);
    }
    GAPTRAIN_RETURN_IF_ERROR(it.status());
  }
  // Where this task's updates are, for the coordinator: per master run the
  // newest version its pushes reached (checkpointed ones need no word).
  proto::CompleteTaskRequest report;
  std::map<uint64_t, uint64_t> reached;
  for (const PushedBatch& b : pushed) {
    if (b.incarnation != 0) reached[b.incarnation] = std::max(reached[b.incarnation], b.version);
  }
  for (const auto& [incarnation, version] : reached) {
    proto::MasterPosition* p = report.add_reached();
    p->set_incarnation(incarnation);
    p->set_version(version);
  }
  report.set_samples_retrained(retrained);
  retrained_ += retrained;
  if (pushes_since_buffers_ > 0) SendBuffers();
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

Status Trainer::OnMasterRestart(std::vector<PushedBatch>* pushed, std::deque<SampleRange>* todo,
                                uint32_t* lost) {
  run_changed_ = false;
  *lost = 0;
  RetryLoop loop(options_.retry, NextSeed(), stop_);
  GAPTRAIN_RETURN_IF_ERROR(
      master_.Connect(master_.address(), model_->layout(), model_->buffer_layout(), &loop));
  const proto::MasterIncarnation run = master_.run();
  run_id_ = run.id();
  session_->ResetMasterVersion(master_.description().version());
  std::vector<PushedBatch> kept;
  for (PushedBatch b : *pushed) {
    if (b.incarnation == 0 || b.incarnation == run.id()) {
      kept.push_back(b);
    } else if (b.incarnation == run.restored_from_id() &&
               b.version <= run.restored_from_version()) {
      b.incarnation = 0;  // in the checkpoint the new run resumed from
      kept.push_back(b);
    } else {
      // Applied after that checkpoint: lost. Train these positions again.
      if (!todo->empty() && todo->back().end == b.positions.begin) {
        todo->back().end = b.positions.end;
      } else {
        todo->push_back(b.positions);
      }
      *lost += b.positions.size();
    }
  }
  *pushed = std::move(kept);
  spdlog::warn("master: a new run ({}) resumed from version {}; {} samples of the task in hand "
               "lost their updates and are trained again",
               run.id(), run.restored_from_version(), *lost);
  return Status::OK();
}

void Trainer::SendBuffers() {
  if (model_->buffer_layout().empty()) return;
  pushes_since_buffers_ = 0;
  std::string values(model_->buffer_layout().bytes(), '\0');
  model_->CopyBuffersTo(reinterpret_cast<uint8_t*>(values.data()));
  // Best effort: the next send carries newer statistics anyway.
  const Status s = master_.client()->PushBuffers(session_->worker_id(), values);
  if (!s.ok()) spdlog::debug("master: buffers not sent: {}", s.ToString());
}

void Trainer::AdoptMasterBuffers() {
  if (model_->buffer_layout().empty()) return;
  proto::PullBuffersResponse buffers;
  const Status s = master_.client()->PullBuffers(&buffers);
  if (!s.ok() || buffers.merges() == 0 ||
      buffers.values().size() != model_->buffer_layout().bytes()) {
    return;  // the module's own statistics, as a fresh job's
  }
  model_->CopyBuffersFrom(reinterpret_cast<const uint8_t*>(buffers.values().data()));
  spdlog::info("master: took the job's module buffers ({} sends folded in)", buffers.merges());
}

Status Trainer::PullParameters() {
  MasterClient::PullResult r;
  const auto start = Clock::now();
  Status s =
      master_.client()->Pull(session_->worker_id(), known_version_, model_->parameters(), p_, &r);
  if (!s.ok()) {
    known_version_ = -1;  // the buffer may hold part of a reply
    return s;
  }
  const double seconds = SecondsSince(start);
  master_.NoteSuccess();
  not_member_logged_ = false;
  Average(&pull_seconds_, seconds);
  if (metrics_ != nullptr) metrics_->RecordPull(seconds);
  AcceptPulled(r);
  return Status::OK();
}

void Trainer::AcceptPulled(const MasterClient::PullResult& r) {
  master_.NoteVersion(r.version);
  session_->SetMasterVersion(r.version);
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

Status Trainer::SendGradient(const float* gradient, float loss, const void* echo,
                             proto::PushResponse* reply) {
  if (push_pull_) {
    MasterClient::PushPullResult r;
    Status s = master_.client()->PushPull(session_->worker_id(), base_version_, gradient, p_, loss,
                                          echo, echo_type_, model_->parameters(), &r);
    if (s.code() != Status::Code::kUnimplemented) {
      if (!s.ok()) return s;
      *reply = r.push;
      if (!r.pull_status.ok()) {
        known_version_ = -1;  // the buffer may hold part of a reply
        spdlog::debug("master: the pull after a push failed ({}); pulling again",
                      r.pull_status.ToString());
      } else if (r.pull.modified) {
        // Taken after the push's own bookkeeping (TakePulledWithPush): its
        // version is newer than the push's.
        pulled_with_push_ = true;
        pulled_ = r.pull;
      }
      return Status::OK();
    }
    // Nothing was applied: push the same gradient the old way.
    spdlog::info("master: no PushPull (an older master); pushing and pulling in two calls");
    push_pull_ = false;
  }
  return master_.client()->Push(session_->worker_id(), base_version_, gradient, p_, loss, reply,
                                echo, echo_type_);
}

const float* Trainer::Gradient() {
  if (!dana_slim_) return model_->gradients();
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

void Trainer::WaitForNextStep(uint64_t pushed_on) {
  Backoff::Options o;
  o.initial = std::chrono::milliseconds(1);
  o.max = std::chrono::milliseconds(100);
  Backoff backoff(o, NextSeed());
  while (!stop_->stopped()) {
    if (PullParameters().ok() && base_version_ > pushed_on) return;
    stop_->SleepFor(backoff.Next());
  }
}

Status Trainer::TrainBatch(size_t samples, uint64_t generation, BatchOutcome* outcome,
                           float* loss) {
  RetryLoop loop(options_.retry, NextSeed(), stop_);
  int recomputes = 0;
  auto give_up = [&](const Status& s) {
    if (stop_->stopped()) {
      *outcome = BatchOutcome::kStopped;
      return Status::OK();
    }
    return s;
  };
  while (true) {
    if (!FitsInGrace(pull_seconds_ + compute_seconds_ + push_seconds_)) {
      *outcome = BatchOutcome::kStopped;
      return Status::OK();
    }
    if (session_->generation() != generation) {
      *outcome = BatchOutcome::kTaskLost;
      return Status::OK();
    }

    // The last push may have brought this step's parameters already.
    Status s = pulled_with_push_ ? Status::OK() : PullParameters();
    pulled_with_push_ = false;
    if (!s.ok()) {
      if (s.code() == Status::Code::kNotFound) {
        if (!not_member_logged_) {
          spdlog::info(
              "master: worker {} is not a member yet ({}); waiting for the "
              "coordinator's membership feed",
              session_->worker_id(), s.message());
          not_member_logged_ = true;
        }
      } else if (IsTransient(s)) {
        master_.NoteFailure("Pull", s);
      } else {
        return s;  // e.g. the master's model has another size: nothing to retry
      }
      if (!loop.Wait()) return give_up(s);
      continue;
    }

    if (!FitsInGrace(compute_seconds_ + push_seconds_)) {
      *outcome = BatchOutcome::kStopped;
      return Status::OK();
    }
    const auto compute_start = Clock::now();
    const float l =
        model_->ComputeGradient(images_.data(), labels_.data(), static_cast<int64_t>(samples));
    const double compute = SecondsSince(compute_start);
    Average(&compute_seconds_, compute);
    if (metrics_ != nullptr) metrics_->RecordCompute(compute);
    if (!std::isfinite(l)) {
      spdlog::warn("batch skipped: its loss is {} (see the LibTorch error above, if any)", l);
      *outcome = BatchOutcome::kSkipped;
      return Status::OK();
    }
    if (!FitsInGrace(push_seconds_)) {
      *outcome = BatchOutcome::kStopped;
      return Status::OK();
    }

    const float* gradient = Gradient();
    const void* echo = nullptr;
    if (echo_) {
      echo = echo_type_ == proto::BFLOAT16 ? static_cast<const void*>(echo_bf16_.data())
                                           : static_cast<const void*>(
                                                 static_cast<const Model&>(*model_).parameters());
    }
    proto::PushResponse reply;
    const auto push_start = Clock::now();
    s = SendGradient(gradient, l, echo, &reply);
    if (s.ok()) {
      const double push = SecondsSince(push_start);
      master_.NoteSuccess();
      Average(&push_seconds_, push);
      if (dana_slim_) velocity_.swap(next_velocity_);
      master_.NoteVersion(reply.version());
      session_->SetMasterVersion(reply.version());
      NoteRun(reply.incarnation());
      pushed_incarnation_ = reply.incarnation();
      // In sync mode an accumulated gradient enters θ with the next step.
      pushed_version_ =
          reply.version() + (reply.outcome() == proto::PushResponse::ACCUMULATED ? 1 : 0);
      ++batches_;
      samples_ += samples;
      if (++pushes_since_buffers_ >= kPushesPerBufferSend) SendBuffers();
      if (metrics_ != nullptr) {
        metrics_->RecordPush(push);
        metrics_->RecordBatch(samples, l);
      }
      if (pulled_with_push_) AcceptPulled(pulled_);
      // Past the job's maxUpdates: the coordinator ends the job once a
      // heartbeat reports the version, so report it now.
      if (reply.outcome() == proto::PushResponse::DISCARDED_FINISHED) session_->HeartbeatNow();
      // The master holds a sync PushPull until the step is out; an older
      // master (or a step slower than its limit) answers before: poll.
      if (sync_ && reply.outcome() == proto::PushResponse::ACCUMULATED &&
          base_version_ <= reply.version()) {
        WaitForNextStep(reply.version());
      }
      *outcome = BatchOutcome::kTrained;
      *loss = l;
      return Status::OK();
    }

    known_version_ = -1;  // pull a whole copy before computing again
    if (IsTransient(s)) {
      // Whether it was applied is unknown: recompute on fresh parameters
      // rather than risk applying the same gradient twice.
      master_.NoteFailure("Push", s);
      if (!loop.Wait()) return give_up(s);
      continue;
    }
    if (metrics_ != nullptr) metrics_->RecordPushRejected(LowerCodeName(s.code()));
    switch (s.code()) {
      case Status::Code::kFailedPrecondition:  // too stale, or no matching copy
      case Status::Code::kOutOfRange:          // from the future: the master went back
      case Status::Code::kNotFound:            // not a member (yet, or any more)
        if (recomputes++ >= options_.max_recomputes) {
          spdlog::warn("batch skipped: the master refused it {} times, last: {}", recomputes,
                       s.ToString());
          *outcome = BatchOutcome::kSkipped;
          return Status::OK();
        }
        spdlog::debug("master refused the push ({}); pulling again and recomputing", s.ToString());
        if (s.code() == Status::Code::kNotFound && !loop.Wait()) return give_up(s);
        continue;
      case Status::Code::kInvalidArgument:
        spdlog::error("master refused the push as invalid, which is a bug: {}; batch skipped",
                      s.ToString());
        *outcome = BatchOutcome::kSkipped;
        return Status::OK();
      case Status::Code::kAlreadyExists:  // sync: this step has our gradient already
        spdlog::warn("master: {}; batch skipped", s.message());
        *outcome = BatchOutcome::kSkipped;
        return Status::OK();
      default:
        return s;  // UNAUTHENTICATED, RESOURCE_EXHAUSTED, ...: nothing to retry
    }
  }
}

Status Trainer::Finish(Status status) {
  proto::LeaveReason reason = proto::LEAVE_REASON_FINISHED;
  auto deadline = Clock::now() + std::chrono::seconds(10);
  if (!status.ok()) {
    reason = proto::LEAVE_REASON_FAILED;
    spdlog::error("trainer stopped: {}", status.ToString());
  } else if (stop_->reason() == StopReason::kPreempted) {
    reason = proto::LEAVE_REASON_PREEMPTED;
    deadline = LeaveDeadline(*stop_, options_.grace_seconds);
  }
  Status left = session_->Leave(reason, status.ok() ? "" : status.ToString(), deadline);
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
