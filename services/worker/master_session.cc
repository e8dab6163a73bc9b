#include "services/worker/master_session.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstring>
#include <map>
#include <set>

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

std::vector<std::string> MasterAddressesOf(const proto::RegisterResponse& registration) {
  if (registration.master_addresses_size() == 0) return {registration.master_address()};
  return {registration.master_addresses().begin(), registration.master_addresses().end()};
}

MasterSession::MasterSession(const TrainingJob& job, MasterLink::Connector connect,
                             CoordinatorSession* coordinator, StopFlag* stop,
                             WorkerMetrics* metrics, int max_recomputes)
    : job_(job),
      connect_(std::move(connect)),
      coordinator_(coordinator),
      stop_(stop),
      metrics_(metrics),
      max_recomputes_(max_recomputes) {}

void MasterSession::ForEachShard(const std::function<void(Shard&)>& fn) {
  // Each call has its own client and its own slice of the model's buffers.
  calls_->Run([&](size_t shard) { fn(shards_[shard]); });
}

Status MasterSession::FirstFailure() const {
  for (const Shard& shard : shards_) {
    if (!shard.status.ok()) return shard.status;
  }
  return Status::OK();
}

bool MasterSession::run_changed() const {
  for (const Shard& shard : shards_) {
    if (shard.run_changed) return true;
  }
  return false;
}

uint64_t MasterSession::LowestVersion() const {
  uint64_t lowest = UINT64_MAX;
  for (const Shard& shard : shards_) lowest = std::min(lowest, shard.base_version);
  return lowest;
}

Status MasterSession::ConnectShard(Shard* shard, const std::string& address, RetryLoop* loop) {
  GAPTRAIN_RETURN_IF_ERROR(
      shard->link.Connect(address, model_->layout(), model_->buffer_layout(), loop));
  const proto::DescribeResponse& d = shard->link.description();
  shard->begin = d.shard().count() > 1 ? d.shard().begin() : 0;
  shard->end = d.shard().count() > 1 ? d.shard().end() : p_;
  shard->run_id = d.incarnation().id();
  shard->run_changed = false;
  shard->known_version = -1;
  shard->pulled_with_push = false;
  shard->has_batch = false;
  shard->push_pull = true;  // this master may have PushPull, whatever an earlier one said
  return Status::OK();
}

Status MasterSession::CheckShardRanges() const {
  const size_t count = shards_.size();
  size_t at = 0;
  for (size_t i = 0; i < count; ++i) {
    const Shard& shard = shards_[i];
    const proto::ShardRange& said = shard.link.description().shard();
    const uint32_t its_count = std::max<uint32_t>(said.count(), 1);
    if (said.index() != i || its_count != count || shard.begin != at || shard.end <= at ||
        shard.end > p_) {
      return Status::FailedPrecondition(
          "master " + addresses_[i] + " holds shard " + std::to_string(said.index()) + " of " +
          std::to_string(its_count) + " [" + std::to_string(shard.begin) + ", " +
          std::to_string(shard.end) + "); the registration names it shard " +
          std::to_string(i) + " of " + std::to_string(count) + ", from parameter " +
          std::to_string(at));
    }
    at = shard.end;
  }
  if (at != p_) {
    return Status::FailedPrecondition("the masters' shards end at parameter " +
                                      std::to_string(at) + " of the model's " +
                                      std::to_string(p_));
  }
  return Status::OK();
}

Status MasterSession::Connect(const std::vector<std::string>& addresses, Model* model,
                              RetryLoop* loop) {
  if (addresses.empty()) return Status::InvalidArgument("no master address");
  model_ = model;
  p_ = model->layout().size();
  if (shards_.size() != addresses.size()) {
    calls_ = std::make_unique<ShardCalls>(addresses.size());
    shards_.clear();
    shards_.reserve(addresses.size());
    for (size_t i = 0; i < addresses.size(); ++i) {
      shards_.emplace_back(MasterLink(connect_, metrics_));
    }
  }
  addresses_ = addresses;
  for (size_t i = 0; i < shards_.size(); ++i) {
    GAPTRAIN_RETURN_IF_ERROR(ConnectShard(&shards_[i], addresses[i], loop));
  }
  GAPTRAIN_RETURN_IF_ERROR(CheckShardRanges());
  const proto::DescribeResponse& d = description();
  sync_ = d.rule() == "sync";
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
  // Batches (by their positions) some shard's new run lost.
  std::set<std::pair<uint32_t, uint32_t>> lost_batches;
  for (uint32_t i = 0; i < shards_.size(); ++i) {
    Shard& shard = shards_[i];
    if (!shard.run_changed) continue;
    GAPTRAIN_RETURN_IF_ERROR(ConnectShard(&shard, addresses_[i], loop));
    const proto::MasterIncarnation run = shard.link.run();
    shard.base_version = shard.link.description().version();
    for (TaskPush& p : task_pushes_) {
      if (p.shard != i || p.incarnation == 0 || p.incarnation == run.id()) continue;
      if (p.incarnation == run.restored_from_id() && p.version <= run.restored_from_version()) {
        p.incarnation = 0;  // in the checkpoint the new run resumed from
      } else {
        lost_batches.insert({p.positions.begin, p.positions.end});  // applied after it
      }
    }
    spdlog::warn("master{}: a new run ({}) resumed from version {}",
                 shards_.size() > 1 ? " shard " + std::to_string(i) : std::string(), run.id(),
                 run.restored_from_version());
  }
  GAPTRAIN_RETURN_IF_ERROR(CheckShardRanges());
  coordinator_->ResetMasterVersion(LowestVersion());
  // A batch lost on any shard is trained again on all: its pushes to every
  // shard leave the record, and it is listed once, in push order.
  std::vector<TaskPush> kept;
  uint32_t samples = 0;
  for (const TaskPush& p : task_pushes_) {
    const auto batch = std::make_pair(p.positions.begin, p.positions.end);
    if (lost_batches.count(batch) == 0) {
      kept.push_back(p);
    } else if (lost->empty() || lost->back().begin != p.positions.begin ||
               lost->back().end != p.positions.end) {
      lost->push_back(p.positions);
      samples += p.positions.size();
    }
  }
  task_pushes_ = std::move(kept);
  spdlog::warn("master: {} samples of the task in hand lost their updates and are trained again",
               samples);
  return Status::OK();
}

void MasterSession::AddReached(proto::CompleteTaskRequest* report) const {
  std::map<std::pair<uint32_t, uint64_t>, uint64_t> reached;  // (shard, run) -> version
  for (const TaskPush& p : task_pushes_) {
    if (p.incarnation == 0) continue;
    uint64_t& version = reached[{p.shard, p.incarnation}];
    version = std::max(version, p.version);
  }
  for (const auto& [where, version] : reached) {
    proto::MasterPosition* position = report->add_reached();
    position->set_incarnation(where.second);
    position->set_version(version);
    position->set_shard(where.first);
  }
}

void MasterSession::AdoptMasterBuffers() {
  if (model_->buffer_layout().empty()) return;
  proto::PullBuffersResponse buffers;
  const Status s = shards_[0].link.client()->PullBuffers(&buffers);
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
  // Best effort: the next send carries newer statistics anyway. The
  // buffers live on shard 0.
  const Status s = shards_[0].link.client()->PushBuffers(coordinator_->worker_id(), values);
  if (!s.ok()) spdlog::debug("master: buffers not sent: {}", s.ToString());
}

Status MasterSession::Pull() {
  bool all_pulled = true;
  for (Shard& shard : shards_) all_pulled = all_pulled && shard.pulled_with_push;
  for (Shard& shard : shards_) shard.pulled_with_push = false;
  if (all_pulled) return Status::OK();
  return PullNow();
}

void MasterSession::PullShard(Shard* shard, uint32_t worker, float* parameters) {
  MasterClient::PullResult r;
  shard->status = shard->link.client()->Pull(worker, shard->known_version,
                                             parameters + shard->begin, shard->size(), &r);
  if (!shard->status.ok()) {
    shard->known_version = -1;  // the buffer may hold part of a reply
    return;
  }
  shard->link.NoteSuccess();
  shard->pulled = r;
}

Status MasterSession::PullNow() {
  const auto start = Clock::now();
  const uint32_t worker = coordinator_->worker_id();
  float* parameters = model_->parameters();
  ForEachShard([&](Shard& shard) { PullShard(&shard, worker, parameters); });
  // Bookkept on this thread: the coordinator session and the metrics are
  // not shared with the shards' threads.
  for (Shard& shard : shards_) {
    if (shard.status.ok()) AcceptPulled(&shard, shard.pulled);
  }
  GAPTRAIN_RETURN_IF_ERROR(FirstFailure());
  const double seconds = pull_seconds_.AddSince(start);
  not_member_logged_ = false;
  if (metrics_ != nullptr) metrics_->RecordPull(seconds);
  return Status::OK();
}

void MasterSession::AcceptPulled(Shard* shard, const MasterClient::PullResult& r) {
  shard->link.NoteVersion(r.version);
  shard->NoteRun(r.incarnation);
  // Reads go through a const Model: the non-const parameters() marks
  // them changed (one more copy to a GPU before the next step).
  const Model& model = *model_;
  if (r.modified && echo_ && echo_type_ == proto::BFLOAT16) {
    FloatsToBf16(model.parameters() + shard->begin, shard->size(),
                 echo_bf16_.data() + shard->begin);
  }
  shard->known_version = static_cast<int64_t>(r.version);
  shard->base_version = r.version;
  coordinator_->SetMasterVersion(LowestVersion());
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

void MasterSession::SendGradient(Shard* shard, uint32_t worker, const float* gradient,
                                 float* parameters, float loss) {
  const void* echo = nullptr;
  if (echo_) {
    echo = echo_type_ == proto::BFLOAT16
               ? static_cast<const void*>(echo_bf16_.data() + shard->begin)
               : static_cast<const void*>(parameters + shard->begin);
  }
  const float* g = gradient + shard->begin;
  shard->pulled_with_push = false;
  if (shard->push_pull) {
    MasterClient::PushPullResult r;
    shard->status = shard->link.client()->PushPull(worker, shard->base_version, g,
                                                   shard->size(), loss, echo, echo_type_,
                                                   parameters + shard->begin, &r);
    if (shard->status.code() != Status::Code::kUnimplemented) {
      if (!shard->status.ok()) return;
      shard->reply = r.push;
      if (!r.pull_status.ok()) {
        shard->known_version = -1;  // the buffer may hold part of a reply
        spdlog::debug("master: the pull after a push failed ({}); pulling again",
                      r.pull_status.ToString());
      } else if (r.pull.modified) {
        // Taken after the push's own bookkeeping (Push): its version is
        // newer than the push's.
        shard->pulled_with_push = true;
        shard->pulled = r.pull;
      }
      return;
    }
    // Nothing was applied: push the same gradient the old way.
    spdlog::info("master: no PushPull (an older master); pushing and pulling in two calls");
    shard->push_pull = false;
  }
  shard->status = shard->link.client()->Push(worker, shard->base_version, g, shard->size(), loss,
                                             &shard->reply, echo, echo_type_);
}

proto::PushResponse MasterSession::CombinedReply() const {
  if (shards_.size() == 1) return shards_[0].reply;
  proto::PushResponse combined = shards_[0].reply;
  double gap = 0, penalty = 0;
  for (const Shard& shard : shards_) {
    const proto::PushResponse& r = shard.reply;
    // A sync step or the job's end on any shard is the push's outcome.
    if (r.outcome() != proto::PushResponse::APPLIED) combined.set_outcome(r.outcome());
    combined.set_version(std::min(combined.version(), r.version()));
    combined.set_staleness(std::max(combined.staleness(), r.staleness()));
    gap += r.gap_mean() * static_cast<double>(shard.size());
    penalty += r.penalty_mean() * static_cast<double>(shard.size());
  }
  combined.set_gap_mean(gap / static_cast<double>(p_));
  combined.set_penalty_mean(penalty / static_cast<double>(p_));
  return combined;
}

Status MasterSession::Push(float loss, SampleRange positions, proto::PushResponse* reply) {
  const auto start = Clock::now();
  // The same batch again after some shards took it: only the others get it.
  if (positions.begin != batch_in_hand_.begin || positions.end != batch_in_hand_.end) {
    for (Shard& shard : shards_) shard.has_batch = false;
    batch_in_hand_ = positions;
  }
  const float* gradient = Gradient();
  const uint32_t worker = coordinator_->worker_id();
  float* parameters = model_->parameters();
  ForEachShard([&](Shard& shard) {
    if (shard.has_batch) {
      shard.status = Status::OK();
      shard.pulled_with_push = false;
      return;
    }
    SendGradient(&shard, worker, gradient, parameters, loss);
  });
  for (uint32_t i = 0; i < shards_.size(); ++i) {
    Shard& shard = shards_[i];
    if (!shard.status.ok()) {
      shard.known_version = -1;  // pull a whole copy before computing again
      continue;
    }
    if (shard.has_batch) continue;  // booked when it took the batch
    shard.has_batch = true;
    shard.link.NoteSuccess();
    shard.link.NoteVersion(shard.reply.version());
    shard.NoteRun(shard.reply.incarnation());
    // In sync mode an accumulated gradient enters θ with the next step.
    task_pushes_.push_back(
        {positions, i, shard.reply.incarnation(),
         shard.reply.version() +
             (shard.reply.outcome() == proto::PushResponse::ACCUMULATED ? 1 : 0)});
    if (shard.pulled_with_push) AcceptPulled(&shard, shard.pulled);  // nothing to ask
  }
  GAPTRAIN_RETURN_IF_ERROR(FirstFailure());
  // Every shard has the batch: the push is done.
  batch_in_hand_ = SampleRange{0, 0};
  for (Shard& shard : shards_) shard.has_batch = false;
  const double seconds = push_seconds_.AddSince(start);
  if (metrics_ != nullptr) metrics_->RecordPush(seconds);
  if (dana_slim_) velocity_.swap(next_velocity_);
  *reply = CombinedReply();
  coordinator_->SetMasterVersion(reply->version());
  if (++pushes_since_buffers_ >= kPushesPerBufferSend) SendBuffers();
  // Past the job's maxUpdates: the coordinator ends the job once a
  // heartbeat reports the version, so report it now, and wait for its
  // answer (the stop flag) rather than compute batches the master will
  // discard; a heartbeat period at most.
  if (reply->outcome() == proto::PushResponse::DISCARDED_FINISHED) {
    coordinator_->HeartbeatNow();
    stop_->SleepFor(coordinator_->HeartbeatPeriod());
  }
  // The master holds a sync PushPull until the step is out; an older
  // master (or a step slower than its limit) answers before: poll.
  if (sync_) {
    for (Shard& shard : shards_) {
      if (shard.reply.outcome() == proto::PushResponse::ACCUMULATED &&
          shard.base_version <= shard.reply.version()) {
        WaitForNextStep(&shard, shard.reply.version());
      }
    }
  }
  return Status::OK();
}

void MasterSession::WaitForNextStep(Shard* shard, uint64_t pushed_on) {
  Backoff::Options o;
  o.initial = std::chrono::milliseconds(1);
  o.max = std::chrono::milliseconds(100);
  Backoff backoff(o, NextSeed());
  while (!stop_->stopped()) {
    PullShard(shard, coordinator_->worker_id(), model_->parameters());
    if (shard->status.ok()) {
      AcceptPulled(shard, shard->pulled);
      if (shard->base_version > pushed_on) return;
    }
    stop_->SleepFor(backoff.Next());
  }
}

Status MasterSession::Observe(RetryLoop* loop, uint64_t* version) {
  float* parameters = model_->parameters();
  Status s = CallWithRetry(
      loop,
      [&] {
        ForEachShard([&](Shard& shard) {
          if (shard.status.ok() && shard.pulled_with_push) return;  // read in an earlier try
          MasterClient::PullResult r;
          shard.status = shard.link.client()->PullModel(
              shard.known_version, parameters + shard.begin, shard.size(), &r);
          shard.pulled = r;
          // Marks the shard as read in this call (an evaluator never pushes).
          shard.pulled_with_push = shard.status.ok();
          if (!shard.status.ok()) shard.known_version = -1;  // may hold part of a reply
        });
        return FirstFailure();
      },
      [&](const Status&) { NoteFailures("Pull"); });
  for (Shard& shard : shards_) {
    if (!shard.pulled_with_push) continue;
    shard.pulled_with_push = false;
    shard.link.NoteSuccess();
    shard.link.NoteVersion(shard.pulled.version);
    shard.known_version = static_cast<int64_t>(shard.pulled.version);
    shard.base_version = shard.pulled.version;
  }
  if (!s.ok()) return s;
  *version = LowestVersion();
  coordinator_->SetMasterVersion(*version);
  return Status::OK();
}

Status MasterSession::ObserveBuffers(RetryLoop* loop) {
  if (model_->buffer_layout().empty()) return Status::OK();
  MasterLink& link = shards_[0].link;  // the buffers live on shard 0
  proto::PullBuffersResponse buffers;
  Status s = CallWithRetry(
      loop, [&] { return link.client()->PullBuffers(&buffers); },
      [&](const Status& failure) { link.NoteFailure("PullBuffers", failure); });
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
  *version = UINT64_MAX;
  for (Shard& shard : shards_) {
    proto::DescribeResponse d;
    Status s = CallWithRetry(
        loop, [&] { return shard.link.client()->Describe(&d); },
        [&](const Status& failure) { shard.link.NoteFailure("Describe", failure); });
    if (!s.ok()) return s;
    shard.link.NoteSuccess();
    *version = std::min<uint64_t>(*version, d.version());
  }
  return Status::OK();
}

void MasterSession::NoteFailures(const char* verb) {
  for (Shard& shard : shards_) {
    if (!shard.status.ok()) shard.link.NoteFailure(verb, shard.status);
  }
}

MasterSession::Next MasterSession::AfterPullFailure(const Status& failure, RetryLoop* loop) {
  if (failure.code() == Status::Code::kNotFound) {
    if (!not_member_logged_) {
      spdlog::info("master: worker {} is not a member yet ({}); waiting for the coordinator's "
                   "membership feed",
                   coordinator_->worker_id(), failure.message());
      not_member_logged_ = true;
    }
    return AfterWaiting(loop);
  }
  if (IsTransient(failure)) {
    NoteFailures("Pull");
    return AfterWaiting(loop);
  }
  return Next::kFail;  // e.g. the master's model has another size: nothing to retry
}

MasterSession::Next MasterSession::AfterPushFailure(const Status& failure, RetryLoop* loop) {
  if (IsTransient(failure)) {
    // Whether it was applied is unknown: recompute on fresh parameters
    // rather than risk applying the same gradient twice.
    NoteFailures("Push");
    return AfterWaiting(loop);
  }
  if (metrics_ != nullptr) metrics_->RecordPushRejected(LowerCodeName(failure.code()));
  switch (failure.code()) {
    case Status::Code::kFailedPrecondition:  // too stale, or no matching copy
    case Status::Code::kOutOfRange:          // from the future: the master went back
    case Status::Code::kNotFound:            // not a member (yet, or any more)
      if (batch_refusals_++ >= max_recomputes_) {
        spdlog::warn("batch skipped: the master refused it {} times, last: {}", batch_refusals_,
                     failure.ToString());
        return Next::kSkip;
      }
      spdlog::debug("master refused the push ({}); pulling again and recomputing",
                    failure.ToString());
      // Not a member: the membership feed catches up meanwhile.
      return failure.code() == Status::Code::kNotFound ? AfterWaiting(loop) : Next::kAgain;
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
