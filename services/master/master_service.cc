#include "services/master/master_service.h"

#include <grpcpp/alarm.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <optional>
#include <set>

#include "services/master/chunk_wire.h"
#include "services/master/layout_proto.h"
#include "services/master/model_declaration.h"
#include "services/net/token_auth.h"
#include "services/numeric/bfloat16.h"
#include "services/numeric/finite_scan.h"
#include "services/numeric/wire_values.h"

namespace gaptrain {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

bool ValidWireType(int type) { return proto::WireType_IsValid(type); }

DType WireDType(proto::WireType type) {
  return type == proto::BFLOAT16 ? DType::kBfloat16 : DType::kFloat32;
}

proto::PushResponse::Outcome ToProto(ApplyStats::Outcome outcome) {
  switch (outcome) {
    case ApplyStats::Outcome::kApplied: return proto::PushResponse::APPLIED;
    case ApplyStats::Outcome::kAccumulated: return proto::PushResponse::ACCUMULATED;
    case ApplyStats::Outcome::kDiscardedLate: return proto::PushResponse::DISCARDED_LATE;
    case ApplyStats::Outcome::kDiscardedFinished: return proto::PushResponse::DISCARDED_FINISHED;
  }
  return proto::PushResponse::APPLIED;
}

}  // namespace

grpc::Status ToGrpcStatus(const Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), status.message());
}

namespace {

// An engine given no shard holds the whole model: shard 0 of 1.
MasterService::Options WithModelLayout(MasterService::Options options,
                                       const UpdateEngine& engine) {
  if (options.model_layout.num_tensors() == 0) {
    options.model_layout = engine.store().layout();
    if (options.buffers != nullptr) options.model_buffers = options.buffers->layout();
    options.shard = ParameterShard{0, 1, 0, engine.store().size()};
  }
  return options;
}

}  // namespace

MasterService::MasterService(std::unique_ptr<UpdateEngine> engine, Options options,
                             std::shared_ptr<MasterMetrics> metrics)
    : options_(WithModelLayout(std::move(options), *engine)),
      metrics_(std::move(metrics)),
      num_values_(engine->store().size()),
      needs_echo_(engine->rule_config().NeedsWorkerCopy() &&
                  engine->rule_config().gap_source == GapSource::kEcho),
      echo_type_(engine->rule_config().gap_precision == GapPrecision::kBfloat16
                     ? proto::BFLOAT16
                     : proto::FLOAT32),
      pool_(BufferPool::Create(num_values_)),
      buffers_(options_.buffers != nullptr
                   ? options_.buffers
                   : std::make_shared<ModelBuffers>(BufferLayout(), std::string())),
      engine_(std::move(engine)) {
  metrics_->SetModel(engine_->version(), engine_->learning_rate(), engine_->num_workers());
  totals_.set_parameters(engine_->store().size());
}

void MasterService::WithEngine(const std::function<void(UpdateEngine*)>& fn) {
  std::lock_guard<std::mutex> lock(mu_);
  fn(engine_.get());
}

grpc::Status MasterService::Authorize(const grpc::ServerContextBase* context) const {
  return AuthorizeBearer(*context, options_.token);
}

void MasterService::SetDurableVersion(uint64_t version) {
  uint64_t seen = durable_version_.load();
  while (version > seen && !durable_version_.compare_exchange_weak(seen, version)) {
  }
}

void MasterService::MarkServing() {
  serving_since_ns_.store(Clock::now().time_since_epoch().count());
}

void MasterService::NoteAcceptedLocked(uint64_t version, const ApplyStats& stats) {
  if (options_.ledger != nullptr) options_.ledger->RecordAccepted(version);
  const bool applied = stats.outcome == ApplyStats::Outcome::kApplied;
  if (applied) totals_.set_updates(totals_.updates() + 1);
  totals_.set_staleness_sum(totals_.staleness_sum() + static_cast<double>(stats.staleness));
  totals_.set_staleness_count(totals_.staleness_count() + 1);
  if (stats.has_gap) {
    totals_.set_gap_sum(totals_.gap_sum() + stats.gap.gap_mean);
    totals_.set_gap_count(totals_.gap_count() + 1);
  }
  if (!applied || first_update_seen_.exchange(true)) return;
  const int64_t since = serving_since_ns_.load();
  if (since == 0) return;
  const double seconds = std::chrono::duration<double>(
                             Clock::now().time_since_epoch() - Clock::duration(since))
                             .count();
  metrics_->SetFirstUpdateSeconds(seconds);
  spdlog::info("first update applied {:.2f} s after serving (version {})", seconds, version);
}

grpc::Status MasterService::RejectPush(RejectReason reason, grpc::Status status) {
  metrics_->RecordRejected(reason);
  if (options_.ledger != nullptr) options_.ledger->RecordRejected();
  spdlog::warn("rejected push ({}): {}", RejectReasonName(reason), status.error_message());
  return status;
}

grpc::Status MasterService::RejectMalformed(const std::string& message) {
  return RejectPush(RejectReason::kMalformed,
                    grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, message));
}

void MasterService::ReleaseStepWaiters() {
  if (step_waiters_.empty()) return;
  uint64_t version;
  {
    std::lock_guard<std::mutex> lock(mu_);
    version = engine_->version();
  }
  step_waiters_.Release(version);
}

grpc::Status MasterService::RejectPull(RejectReason reason, grpc::Status status) {
  metrics_->RecordPullRejected(reason);
  // A worker may pull before the coordinator's SetMembers arrives (start,
  // master restart) and retries: counted, but not worth a warning each time.
  spdlog::log(reason == RejectReason::kUnknownWorker ? spdlog::level::debug : spdlog::level::warn,
              "rejected pull ({}): {}", RejectReasonName(reason), status.error_message());
  return status;
}

grpc::Status MasterService::Describe(grpc::ServerContext* context, const proto::DescribeRequest*,
                                     proto::DescribeResponse* response) {
  grpc::Status auth = Authorize(context);
  if (!auth.ok()) return auth;
  std::lock_guard<std::mutex> lock(mu_);
  response->set_job_name(options_.job_name);
  LayoutToProto(options_.model_layout, response->mutable_layout());
  BufferLayoutToProto(options_.model_buffers, response->mutable_layout());
  proto::ShardRange* shard = response->mutable_shard();
  shard->set_index(options_.shard.index);
  shard->set_count(options_.shard.count);
  shard->set_begin(options_.shard.begin);
  shard->set_end(options_.shard.end);
  response->set_rule(RuleKindName(engine_->rule_config().kind));
  response->set_version(engine_->version());
  response->set_learning_rate(engine_->learning_rate());
  response->set_needs_echo(needs_echo_);
  response->set_echo_type(echo_type_);
  response->set_live_workers(static_cast<uint32_t>(engine_->num_workers()));
  *response->mutable_incarnation() = options_.incarnation;
  return grpc::Status::OK;
}

// One pull's reply, chunk by chunk. Prepare, under the engine's mutex,
// takes the shared reply of the current reply generation, or writes one
// into a pooled buffer and shares it; NextChunk then builds the chunks
// without the mutex: fp32 chunks are slices of the shared buffer, bf16
// chunks are converted into fresh slices.
class MasterService::PullReply {
 public:
  explicit PullReply(MasterService* service) : service_(service), start_(Clock::now()) {}

  grpc::Status Prepare(const proto::PullRequest& pull) {
    if (!ValidWireType(pull.wire_type())) {
      return service_->RejectPull(
          RejectReason::kMalformed,
          grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "wire_type: unknown value"));
    }
    wire_type_ = pull.wire_type();
    chunk_values_ = pull.chunk_values() == 0
                        ? service_->options_.default_chunk_values
                        : std::min(pull.chunk_values(), kMaxChunkValues);
    total_ = service_->num_values_;
    std::lock_guard<std::mutex> lock(service_->mu_);
    UpdateEngine* engine = service_->engine_.get();
    version_ = engine->version();
    if (pull.observer()) {  // θ for a reader: no membership, nothing recorded
      send_ = pull.known_version() < 0 || static_cast<uint64_t>(pull.known_version()) != version_;
    } else {
      send_ = engine->NeedsPull(pull.worker_id(), pull.known_version());
    }
    if (!send_) return grpc::Status::OK;
    SharedReply& shared = service_->shared_replies_[pull.observer() ? 1 : 0];
    if (shared.values != nullptr && shared.generation == engine->reply_generation()) {
      values_ = shared.values;  // written by an earlier pull: no copy
      if (pull.observer()) return grpc::Status::OK;
      return Refused(engine->PullFrom(pull.worker_id(), values_->data(), total_, &version_));
    }
    std::shared_ptr<std::vector<float>> fresh = service_->pool_->Acquire();
    Status s = pull.observer() ? engine->PullModel(fresh->data(), total_, &version_)
                               : engine->Pull(pull.worker_id(), fresh->data(), total_, &version_);
    if (!s.ok()) return Refused(s);
    values_ = fresh;
    shared.generation = engine->reply_generation();
    shared.values = values_;
    return grpc::Status::OK;
  }

  // A reply of one chunk with no values at `version`: the worker keeps
  // what it has (a PushPull whose pull part was refused).
  void PrepareNothing(uint64_t version) {
    total_ = service_->num_values_;
    version_ = version;
    send_ = false;
  }

  // The first chunk carries `push` (PushPull).
  void AttachPush(const proto::PushResponse& push) { push_ = push; }

  // Builds the next chunk into `out`; last_ then says whether it ends the
  // reply. Called again after the last chunk, it returns false.
  bool NextChunk(grpc::ByteBuffer* out) {
    if (last_) return false;
    proto::ParameterChunk header;
    header.set_version(version_);
    header.set_total_values(total_);
    header.set_wire_type(wire_type_);
    header.set_incarnation(service_->options_.incarnation.id());
    if (push_) {
      *header.mutable_push() = *push_;
      push_.reset();
    }
    if (!send_) {  // the worker holds this version: one chunk, no values
      last_ = true;
      *out = ParameterChunkBuffer(header, grpc::Slice());
      return true;
    }
    const size_t n = std::min<size_t>(chunk_values_, total_ - offset_);
    header.set_offset(offset_);
    grpc::Slice values;
    if (wire_type_ == proto::BFLOAT16) {
      uint8_t* bytes;
      values = NewSlice(n * 2, &bytes);
      FloatsToBf16(values_->data() + offset_, n, reinterpret_cast<bf16_t*>(bytes));
    } else {
      values = SliceOf(values_->data() + offset_, n * sizeof(float), values_);
    }
    sent_bytes_ += values.size();
    *out = ParameterChunkBuffer(header, values);
    offset_ += n;
    last_ = offset_ >= total_;
    return true;
  }

  // Starts writing the next chunk on `reactor` (a write or bidi reactor
  // whose own OnWriteDone calls the one below); the last chunk goes with
  // the call's OK status.
  template <class Reactor>
  void WriteNext(Reactor* reactor) {
    if (!NextChunk(&chunk_)) return;  // never: the last write finished the call
    if (last_) {
      RecordCompleted();
      reactor->StartWriteAndFinish(&chunk_, grpc::WriteOptions(), grpc::Status::OK);
    } else {
      reactor->StartWrite(&chunk_);
    }
  }

  // A chunk went (or the client stopped reading): the next one, or the end.
  template <class Reactor>
  void OnWriteDone(Reactor* reactor, bool ok) {
    if (!ok) {
      reactor->Finish(grpc::Status(grpc::StatusCode::CANCELLED, "the client stopped reading"));
      return;
    }
    WriteNext(reactor);
  }

  // Before the call's status goes out, so a client that has it sees the
  // pull counted.
  void RecordCompleted() {
    service_->metrics_->AddSentBytes(sent_bytes_);
    service_->metrics_->RecordPull(SecondsSince(start_), send_);
  }

 private:
  // The engine refused the pull: a worker that is not a member (NOT_FOUND)
  // or, never from this service, a reply buffer of the wrong size.
  grpc::Status Refused(const Status& s) {
    if (s.ok()) return grpc::Status::OK;
    return service_->RejectPull(s.code() == Status::Code::kNotFound ? RejectReason::kUnknownWorker
                                                                    : RejectReason::kMalformed,
                                ToGrpcStatus(s));
  }

  MasterService* const service_;
  const Clock::time_point start_;
  proto::WireType wire_type_ = proto::FLOAT32;
  size_t chunk_values_ = 0;
  size_t total_ = 0;
  uint64_t version_ = 0;
  bool send_ = false;
  std::optional<proto::PushResponse> push_;
  std::shared_ptr<const std::vector<float>> values_;
  size_t offset_ = 0;
  bool last_ = false;
  uint64_t sent_bytes_ = 0;
  grpc::ByteBuffer chunk_;  // the chunk being written
};

// Streams one pull: the reply's chunks, the last one with the status.
class MasterService::PullReactor final : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
 public:
  PullReactor(MasterService* service, grpc::CallbackServerContext* context,
              const grpc::ByteBuffer* request)
      : service_(service), reply_(service) {
    grpc::Status s = Prepare(context, request);
    if (!s.ok()) {
      Finish(s);
      return;
    }
    reply_.WriteNext(this);
  }

  void OnWriteDone(bool ok) override { reply_.OnWriteDone(this, ok); }

  void OnDone() override { delete this; }

 private:
  grpc::Status Prepare(grpc::CallbackServerContext* context, const grpc::ByteBuffer* request) {
    grpc::Status auth = service_->Authorize(context);
    if (!auth.ok()) return auth;
    proto::PullRequest pull;
    grpc::ByteBuffer copy(*request);  // shares the slices
    if (!grpc::SerializationTraits<proto::PullRequest>::Deserialize(&copy, &pull).ok()) {
      return service_->RejectPull(
          RejectReason::kMalformed,
          grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "malformed PullRequest"));
    }
    return reply_.Prepare(pull);
  }

  MasterService* const service_;
  PullReply reply_;
};

// Receives one push chunk by chunk and applies it when the client ends the
// stream with every value delivered. The gradient stays in the slices gRPC
// received it in: each chunk is checked for NaN/Inf as it arrives, and the
// rule decodes the values block by block as it applies them
// (GradientView). The echo, rarely used, is copied into one buffer.
class MasterService::PushReceiver {
 public:
  PushReceiver(MasterService* service, grpc::CallbackServerContext* context)
      : service_(service), context_(context), start_(Clock::now()) {}

  // The call's start, for `reactor` (a read or bidi reactor that reads
  // into `incoming`): the first read, or the call refused.
  template <class Reactor>
  void Start(Reactor* reactor, grpc::ByteBuffer* incoming) {
    grpc::Status auth = service_->Authorize(context_);
    if (!auth.ok()) {
      reactor->Finish(auth);
      return;
    }
    reactor->StartRead(incoming);
  }

  // A read of `reactor` ended: takes the chunk and starts the next read,
  // or ends the call on a refusal. True when the client has sent
  // everything (`ok` false): the caller then completes the push.
  template <class Reactor>
  bool ReadDone(Reactor* reactor, bool ok, grpc::ByteBuffer* incoming) {
    if (!ok) return true;
    grpc::Status s = Receive(incoming);
    if (s.ok()) {
      reactor->StartRead(incoming);
    } else {
      reactor->Finish(s);
    }
    return false;
  }

  // One more chunk; an error status ends the call.
  grpc::Status Receive(grpc::ByteBuffer* message) {
    Status parsed = ParseGradientChunk(message, &chunk_);
    if (!parsed.ok()) return service_->RejectMalformed(parsed.message());
    const proto::GradientChunk& c = chunk_.header;
    // Every payload byte read counts, whether the push is applied or not.
    service_->metrics_->AddReceivedBytes(chunk_.values.size() + chunk_.echo.size());
    const size_t total = service_->num_values_;
    if (first_) {
      if (c.total_values() != total) {
        return service_->RejectPush(
            RejectReason::kWrongSize,
            grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                         "total_values: gradient from worker " + std::to_string(c.worker_id()) +
                             " has " + std::to_string(c.total_values()) +
                             " values, the model has " + std::to_string(total)));
      }
      if (!ValidWireType(c.wire_type()) || !ValidWireType(c.echo_type())) {
        return service_->RejectMalformed("wire_type: unknown value");
      }
      header_ = c;
      has_echo_ = !chunk_.echo.empty();
      if (has_echo_) echo_.resize(total * WireTypeSize(c.echo_type()));
      first_ = false;
    } else if (c.worker_id() != header_.worker_id() ||
               c.base_version() != header_.base_version() ||
               c.total_values() != header_.total_values() ||
               c.wire_type() != header_.wire_type() || c.echo_type() != header_.echo_type()) {
      return service_->RejectMalformed("chunk at offset " + std::to_string(c.offset()) +
                                       ": header fields differ from the first chunk");
    }
    if (c.offset() != received_) {
      return service_->RejectMalformed("chunk offset " + std::to_string(c.offset()) +
                                       ", expected " + std::to_string(received_));
    }
    const size_t value_size = WireTypeSize(header_.wire_type());
    const size_t n = chunk_.values.size() / value_size;
    if (chunk_.values.size() % value_size != 0 || n == 0 || n > total - received_) {
      return service_->RejectMalformed("chunk at offset " + std::to_string(received_) +
                                       ": values must hold whole values and stay within "
                                       "total_values");
    }
    const size_t echo_size = WireTypeSize(header_.echo_type());
    if (has_echo_ != !chunk_.echo.empty() || (has_echo_ && chunk_.echo.size() != n * echo_size)) {
      return service_->RejectMalformed("chunk at offset " + std::to_string(received_) +
                                       ": echo must cover exactly the chunk's values");
    }
    // Checked outside the engine's mutex; a push with a NaN or Inf goes to
    // the engine unchecked, which rejects it and says where the value is.
    all_finite_ = all_finite_ &&
                  GradientView(&chunk_.values, WireDType(header_.wire_type()), n)
                          .FindNonFinite() == n;
    gradient_.Append(chunk_.values);
    received_slices_.push_back(std::move(chunk_.slices));  // keeps gradient_'s bytes
    if (has_echo_) {
      char* echo = echo_.data() + received_ * echo_size;
      chunk_.echo.CopyTo(echo);
      all_finite_ = all_finite_ && EchoIsFinite(echo, n);
    }
    received_ += n;
    return grpc::Status::OK;
  }

  // The client has sent everything: applies the push and describes it in
  // `reply`, or says why it was refused.
  grpc::Status Complete(proto::PushResponse* reply) {
    const size_t total = service_->num_values_;
    if (context_->IsCancelled() || first_ || received_ != total) {
      const std::string from =
          first_ ? std::string("a push") : "the push from worker " + std::to_string(header_.worker_id());
      return service_->RejectPush(
          RejectReason::kIncomplete,
          grpc::Status(grpc::StatusCode::CANCELLED,
                       from + " ended after " + std::to_string(received_) + " of " +
                           std::to_string(total) + " values; nothing was applied"));
    }
    PushRequest request;
    request.worker = header_.worker_id();
    request.base_version = header_.base_version();
    request.gradient = GradientView(&gradient_, WireDType(header_.wire_type()), total);
    request.known_finite = all_finite_;
    if (has_echo_) {
      request.echo.dtype = WireDType(header_.echo_type());
      request.echo.data = echo_.data();
      request.echo_size = total;
    }
    Status s;
    RejectReason reason = RejectReason::kNumReasons;
    uint64_t version = 0;
    {
      std::lock_guard<std::mutex> lock(service_->mu_);
      s = service_->engine_->Push(request, &stats_, &reason);
      version = service_->engine_->version();
      // Under the mutex, in the engine's order: the gauges never go back
      // to an older version or membership, and a worker that has left
      // never gets its series back from a push that finished late.
      if (s.ok()) {
        service_->metrics_->SetModel(version, service_->engine_->learning_rate(),
                                     service_->engine_->num_workers());
        service_->metrics_->SetWorkerStaleness(request.worker, stats_);
        if (stats_.outcome == ApplyStats::Outcome::kDiscardedFinished) {
          // Past maxUpdates nothing is applied: the accounting counts it
          // as refused (asynchronously, updates = pushes - rejected).
          if (service_->options_.ledger != nullptr) service_->options_.ledger->RecordRejected();
        } else {
          service_->NoteAcceptedLocked(version, stats_);
        }
      }
    }
    if (!s.ok()) {
      service_->metrics_->RecordRejected(reason);
      if (service_->options_.ledger != nullptr) service_->options_.ledger->RecordRejected();
      spdlog::warn("rejected push from worker {}: {}", request.worker, s.ToString());
      return ToGrpcStatus(s);
    }
    service_->metrics_->RecordPush(stats_, SecondsSince(start_));
    // A step taken: the pushes that wait for it answer now.
    if (stats_.outcome == ApplyStats::Outcome::kApplied) service_->ReleaseStepWaiters();
    reply->set_outcome(ToProto(stats_.outcome));
    reply->set_version(version);
    reply->set_staleness(stats_.staleness);
    reply->set_learning_rate(stats_.learning_rate);
    reply->set_gap_mean(stats_.has_gap ? stats_.gap.gap_mean : 1.0);
    reply->set_penalty_mean(stats_.penalty_mean);
    reply->set_incarnation(service_->options_.incarnation.id());
    return grpc::Status::OK;
  }

  // The first chunk's header (after the first Receive).
  const proto::GradientChunk& header() const { return header_; }

 private:
  // n echoed values at `echo`, in the push's echo type.
  bool EchoIsFinite(const char* echo, size_t n) const {
    if (header_.echo_type() == proto::BFLOAT16) {
      return FindNonFinite(reinterpret_cast<const bf16_t*>(echo), n) == n;
    }
    return FindNonFinite(reinterpret_cast<const float*>(echo), n) == n;
  }

  MasterService* const service_;
  grpc::CallbackServerContext* const context_;
  const Clock::time_point start_;
  ReceivedGradientChunk chunk_;
  proto::GradientChunk header_;
  bool first_ = true;
  bool has_echo_ = false;
  bool all_finite_ = true;  // every value decoded so far is finite
  size_t received_ = 0;
  // The gradient's wire bytes: views into received_slices_, whose vectors
  // are moved whole so the Slice objects (and inlined bytes) stay put.
  SlicedBytes gradient_;
  std::vector<std::vector<grpc::Slice>> received_slices_;
  std::vector<char> echo_;
  ApplyStats stats_;
};

// One push: reads its chunks, then answers with the PushResponse.
class MasterService::PushReactor final : public grpc::ServerReadReactor<grpc::ByteBuffer> {
 public:
  PushReactor(MasterService* service, grpc::CallbackServerContext* context,
              grpc::ByteBuffer* response)
      : response_(response), push_(service, context) {
    push_.Start(this, &incoming_);
  }

  void OnReadDone(bool ok) override {
    if (!push_.ReadDone(this, ok, &incoming_)) return;
    // The client closed its side (or the call died): apply, then answer.
    proto::PushResponse reply;
    grpc::Status s = push_.Complete(&reply);
    bool own = false;
    if (s.ok()) grpc::SerializationTraits<proto::PushResponse>::Serialize(reply, response_, &own);
    Finish(s);
  }

  void OnDone() override { delete this; }

 private:
  grpc::ByteBuffer* const response_;
  grpc::ByteBuffer incoming_;
  PushReceiver push_;
};

// A push, then the pull for the worker's next step in the same call: the
// gradient's chunks in, then the parameters' chunks out, the first one
// carrying the push's outcome. In sync mode a push that joined a step not
// yet taken (ACCUMULATED) waits for the step (StepWaiters), at most
// kStepWaitLimit, so its parameters are the step's: the worker need not
// poll for them.
class MasterService::PushPullReactor final
    : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  PushPullReactor(MasterService* service, grpc::CallbackServerContext* context)
      : service_(service), push_(service, context), reply_(service) {
    push_.Start(this, &incoming_);
  }

  void OnReadDone(bool ok) override {
    if (!push_.ReadDone(this, ok, &incoming_)) return;
    // The client closed its side: apply, then answer with parameters.
    grpc::Status s = push_.Complete(&pushed_);
    if (!s.ok()) {
      Finish(s);
      return;
    }
    if (pushed_.outcome() != proto::PushResponse::ACCUMULATED) {
      Answer();
      return;
    }
    // From Add on, another thread may answer (OnDone still waits for this
    // reaction to return).
    const uint64_t waiter =
        service_->step_waiters_.Add(pushed_.version(), [this] { Answer(); });
    waiter_ = waiter;
    // Only the alarm's own expiry touches the reactor, and only while it
    // still waits (then it is alive): its cancellation, when the reactor
    // is deleted, does nothing.
    StepWaiters* waiters = &service_->step_waiters_;
    step_limit_.Set(std::chrono::system_clock::now() + kStepWaitLimit,
                    [this, waiter, waiters](bool expired) {
                      if (expired && waiters->Remove(waiter)) Answer();
                    });
    // The step may have been taken between the push and Add.
    service_->ReleaseStepWaiters();
  }

  void OnWriteDone(bool ok) override { reply_.OnWriteDone(this, ok); }

  void OnCancel() override {
    const uint64_t waiter = waiter_;
    if (waiter != 0 && service_->step_waiters_.Remove(waiter)) {
      Finish(grpc::Status(grpc::StatusCode::CANCELLED, "the call ended waiting for the step"));
    }
  }

  void OnDone() override { delete this; }

 private:
  // The parameters for the worker's next step (the step's, when it waited
  // and the step was taken; otherwise those it has).
  void Answer() {
    proto::PullRequest pull;
    pull.set_worker_id(push_.header().worker_id());
    pull.set_known_version(static_cast<int64_t>(push_.header().base_version()));
    pull.set_wire_type(push_.header().wire_type());
    if (!reply_.Prepare(pull).ok()) {
      // The push counts; the worker learns why the pull does not from its
      // next Pull.
      reply_.PrepareNothing(pushed_.version());
    }
    reply_.AttachPush(pushed_);
    reply_.WriteNext(this);
  }

  MasterService* const service_;
  grpc::ByteBuffer incoming_;
  PushReceiver push_;
  PullReply reply_;
  proto::PushResponse pushed_;
  // Its StepWaiters id once it waits for the step (OnCancel reads it on
  // another thread); 0: it never waited.
  std::atomic<uint64_t> waiter_{0};
  grpc::Alarm step_limit_;
};

grpc::ServerWriteReactor<grpc::ByteBuffer>* MasterService::Pull(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request) {
  return new PullReactor(this, context, request);
}

grpc::ServerReadReactor<grpc::ByteBuffer>* MasterService::Push(
    grpc::CallbackServerContext* context, grpc::ByteBuffer* response) {
  return new PushReactor(this, context, response);
}

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* MasterService::PushPull(
    grpc::CallbackServerContext* context) {
  return new PushPullReactor(this, context);
}

grpc::Status MasterService::SetMembers(grpc::ServerContext* context,
                                       const proto::SetMembersRequest* request,
                                       proto::SetMembersResponse* response) {
  grpc::Status auth = Authorize(context);
  if (!auth.ok()) return auth;
  const std::set<WorkerId> wanted(request->worker_ids().begin(), request->worker_ids().end());
  std::vector<WorkerId> members;
  uint64_t version = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    // Level-triggered: converge the engine's members onto `wanted`.
    for (WorkerId w : engine_->members()) {
      if (wanted.count(w) == 0) {
        ApplyStats stats;
        Status s = engine_->Leave(w, &stats);
        if (!s.ok()) return ToGrpcStatus(s);
        response->add_left(w);
      }
    }
    for (WorkerId w : wanted) {
      if (!engine_->IsMember(w)) {
        Status s = engine_->Join(w);
        if (!s.ok()) return ToGrpcStatus(s);
        response->add_joined(w);
      }
    }
    members = engine_->members();
    version = engine_->version();
    // A leave may have completed a sync step.
    if (options_.ledger != nullptr) options_.ledger->RecordVersion(version);
    metrics_->SetModel(version, engine_->learning_rate(), members.size());
    metrics_->SetMembers(members);
  }
  ReleaseStepWaiters();  // a leave may have taken the step they wait for
  for (uint32_t w : response->joined()) spdlog::info("worker {} joined", w);
  for (uint32_t w : response->left()) spdlog::info("worker {} left; its state was released", w);
  response->set_version(version);
  *response->mutable_incarnation() = options_.incarnation;
  response->set_durable_version(durable_version_.load());
  {
    std::lock_guard<std::mutex> lock(mu_);
    *response->mutable_totals() = totals_;
  }
  return grpc::Status::OK;
}

grpc::Status MasterService::NoBuffersOnThisShard() const {
  return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                      "this master is shard " + std::to_string(options_.shard.index) + " of " +
                          std::to_string(options_.shard.count) +
                          ": the module's buffers live on shard 0");
}

grpc::Status MasterService::PushBuffers(grpc::ServerContext* context,
                                        const proto::PushBuffersRequest* request,
                                        proto::PushBuffersResponse* response) {
  grpc::Status auth = Authorize(context);
  if (!auth.ok()) return auth;
  if (options_.shard.index != 0) return NoBuffersOnThisShard();
  size_t trainers = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!engine_->IsMember(request->worker_id())) {
      return grpc::Status(grpc::StatusCode::NOT_FOUND,
                          "buffers from worker " + std::to_string(request->worker_id()) +
                              ", which is not a member");
    }
    // θ is at maxUpdates and a trainer has computed past it (a push was
    // discarded): its module's statistics now hold batches θ never took,
    // and the final evaluation may have read the buffers already. They
    // stay as they are, so the final checkpoint holds the model the job
    // reported. (A send right after the last update, before any discard,
    // still counts: those statistics are the model's.)
    if (engine_->finished() && engine_->discarded_finished() > 0) {
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                          "θ is at the job's maxUpdates (" + std::to_string(engine_->version()) +
                              "): the module's buffers stay as they are with it");
    }
    trainers = engine_->num_workers();
  }
  uint64_t merges = 0;
  Status s = buffers_->Merge(request->values(), trainers, &merges);
  if (!s.ok()) {
    spdlog::warn("refused buffers of worker {}: {}", request->worker_id(), s.message());
    return ToGrpcStatus(s);
  }
  metrics_->RecordBufferMerge();
  response->set_merges(merges);
  return grpc::Status::OK;
}

grpc::Status MasterService::PullBuffers(grpc::ServerContext* context,
                                        const proto::PullBuffersRequest*,
                                        proto::PullBuffersResponse* response) {
  grpc::Status auth = Authorize(context);
  if (!auth.ok()) return auth;
  if (options_.shard.index != 0) return NoBuffersOnThisShard();
  {
    std::lock_guard<std::mutex> lock(mu_);
    response->set_version(engine_->version());
  }
  uint64_t merges = 0;
  buffers_->Read(response->mutable_values(), &merges);
  response->set_merges(merges);
  response->set_incarnation(options_.incarnation.id());
  return grpc::Status::OK;
}

grpc::Status MasterService::DeclareModel(grpc::ServerContext* context,
                                         grpc::ServerReader<proto::ModelDeclaration>* reader,
                                         proto::DeclareModelResponse* response) {
  grpc::Status auth = Authorize(context);
  if (!auth.ok()) return auth;
  DeclarationAssembler assembler(options_.shard.index, options_.shard.count);
  proto::ModelDeclaration message;
  while (reader->Read(&message)) {
    Status s = assembler.Add(message);
    if (!s.ok()) return ToGrpcStatus(s);
  }
  DeclaredModel declared;
  Status s = assembler.Finish(&declared);
  if (!s.ok()) return ToGrpcStatus(s);
  const std::string difference =
      DeclarationDifference(declared, options_.model_layout, options_.model_buffers);
  if (!difference.empty()) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        "the master holds another model: " + difference);
  }
  response->set_adopted(false);
  return grpc::Status::OK;
}

grpc::Status MasterService::Checkpoint(grpc::ServerContext* context,
                                       const proto::CheckpointRequest*,
                                       proto::CheckpointResponse* response) {
  grpc::Status auth = Authorize(context);
  if (!auth.ok()) return auth;
  if (!checkpoint_fn_) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        "this master has no checkpoint directory");
  }
  std::string path;
  uint64_t version = 0;
  Status s = checkpoint_fn_(&path, &version);
  if (!s.ok()) return ToGrpcStatus(s);
  response->set_path(path);
  response->set_version(version);
  return grpc::Status::OK;
}

}  // namespace gaptrain
