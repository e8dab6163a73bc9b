#include "services/master/master_service.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <set>

#include "services/common/wire_values.h"
#include "services/master/layout_proto.h"

namespace gaptrain {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

bool ValidWireType(int type) { return proto::WireType_IsValid(type); }

// Compares without an early exit, so timing does not reveal the token.
bool SameSecret(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

proto::PushResponse::Outcome ToProto(ApplyStats::Outcome outcome) {
  switch (outcome) {
    case ApplyStats::Outcome::kApplied: return proto::PushResponse::APPLIED;
    case ApplyStats::Outcome::kAccumulated: return proto::PushResponse::ACCUMULATED;
    case ApplyStats::Outcome::kDiscardedLate: return proto::PushResponse::DISCARDED_LATE;
  }
  return proto::PushResponse::APPLIED;
}

}  // namespace

grpc::Status ToGrpcStatus(const Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), status.message());
}

namespace {
constexpr int kLookaheadBytes = 64 << 20;
constexpr int kMaxFrameSize = (1 << 24) - 1;  // HTTP/2's largest
constexpr int kWriteBufferSize = 8 << 20;
}  // namespace

void ApplyBulkTransferArguments(grpc::ServerBuilder* builder) {
  builder->SetMaxReceiveMessageSize(MasterService::kMaxMessageBytes);
  builder->AddChannelArgument("grpc.http2.lookahead_bytes", kLookaheadBytes);
  builder->AddChannelArgument("grpc.http2.max_frame_size", kMaxFrameSize);
  builder->AddChannelArgument("grpc.http2.write_buffer_size", kWriteBufferSize);
}

void ApplyBulkTransferArguments(grpc::ChannelArguments* args) {
  args->SetMaxReceiveMessageSize(MasterService::kMaxMessageBytes);
  args->SetInt("grpc.http2.lookahead_bytes", kLookaheadBytes);
  args->SetInt("grpc.http2.max_frame_size", kMaxFrameSize);
  args->SetInt("grpc.http2.write_buffer_size", kWriteBufferSize);
}

MasterService::MasterService(std::unique_ptr<UpdateEngine> engine, Options options,
                             std::shared_ptr<MasterMetrics> metrics)
    : options_(std::move(options)),
      metrics_(std::move(metrics)),
      num_values_(engine->store().size()),
      needs_echo_(engine->rule_config().NeedsWorkerCopy() &&
                  engine->rule_config().gap_source == GapSource::kEcho),
      echo_type_(engine->rule_config().gap_precision == GapPrecision::kBfloat16
                     ? proto::BFLOAT16
                     : proto::FLOAT32),
      engine_(std::move(engine)) {
  metrics_->SetModel(engine_->version(), engine_->learning_rate(), engine_->num_workers());
}

void MasterService::WithEngine(const std::function<void(UpdateEngine*)>& fn) {
  std::lock_guard<std::mutex> lock(mu_);
  fn(engine_.get());
}

grpc::Status MasterService::Authorize(grpc::ServerContext* context) const {
  if (options_.token.empty()) return grpc::Status::OK;
  const auto& metadata = context->client_metadata();
  auto it = metadata.find("authorization");
  if (it == metadata.end()) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                        "missing 'authorization: Bearer <job token>' metadata");
  }
  const std::string value(it->second.data(), it->second.size());
  if (!SameSecret(value, "Bearer " + options_.token)) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "wrong job token");
  }
  return grpc::Status::OK;
}

grpc::Status MasterService::RejectMalformed(const std::string& message) {
  metrics_->RecordRejected(RejectReason::kMalformed);
  return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, message);
}

grpc::Status MasterService::Describe(grpc::ServerContext* context, const proto::DescribeRequest*,
                                     proto::DescribeResponse* response) {
  grpc::Status auth = Authorize(context);
  if (!auth.ok()) return auth;
  std::lock_guard<std::mutex> lock(mu_);
  response->set_job_name(options_.job_name);
  LayoutToProto(engine_->store().layout(), response->mutable_layout());
  response->set_rule(RuleKindName(engine_->rule_config().kind));
  response->set_version(engine_->version());
  response->set_learning_rate(engine_->learning_rate());
  response->set_needs_echo(needs_echo_);
  response->set_echo_type(echo_type_);
  response->set_live_workers(static_cast<uint32_t>(engine_->num_workers()));
  return grpc::Status::OK;
}

grpc::Status MasterService::Pull(grpc::ServerContext* context, const proto::PullRequest* request,
                                 grpc::ServerWriter<proto::ParameterChunk>* writer) {
  grpc::Status auth = Authorize(context);
  if (!auth.ok()) return auth;
  const Clock::time_point start = Clock::now();
  if (!ValidWireType(request->wire_type())) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "wire_type: unknown value");
  }
  const size_t chunk_values = request->chunk_values() == 0
                                  ? options_.default_chunk_values
                                  : std::min(request->chunk_values(), kMaxChunkValues);

  // The reply is copied under the mutex (a whole update, never half of
  // one) into this thread's buffer, then streamed without the mutex.
  thread_local std::vector<float> reply;
  uint64_t version = 0;
  bool send = true;
  {
    std::lock_guard<std::mutex> lock(mu_);
    version = engine_->version();
    send = engine_->NeedsPull(request->worker_id(), request->known_version());
    if (send) {
      reply.resize(num_values_);
      Status s = engine_->Pull(request->worker_id(), reply.data(), num_values_, &version);
      if (!s.ok()) return ToGrpcStatus(s);
    }
  }

  proto::ParameterChunk chunk;
  chunk.set_version(version);
  chunk.set_total_values(num_values_);
  chunk.set_wire_type(request->wire_type());
  if (!send) {
    writer->Write(chunk);
    metrics_->RecordPull(SecondsSince(start), false);
    return grpc::Status::OK;
  }
  uint64_t sent = 0;
  for (size_t offset = 0; offset < num_values_; offset += chunk_values) {
    const size_t n = std::min(chunk_values, num_values_ - offset);
    chunk.set_offset(offset);
    EncodeValues(reply.data() + offset, n, request->wire_type(), chunk.mutable_values());
    if (!writer->Write(chunk)) {
      return grpc::Status(grpc::StatusCode::CANCELLED, "the client stopped reading");
    }
    sent += chunk.values().size();
  }
  metrics_->AddSentBytes(sent);
  metrics_->RecordPull(SecondsSince(start), true);
  return grpc::Status::OK;
}

grpc::Status MasterService::ReceivePush(grpc::ServerReader<proto::GradientChunk>* reader,
                                        std::vector<float>* gradient, std::vector<char>* echo,
                                        PushRequest* request, float* loss) {
  proto::GradientChunk chunk;
  proto::GradientChunk header;
  size_t received = 0;
  bool first = true;
  bool has_echo = false;
  uint64_t bytes = 0;
  while (reader->Read(&chunk)) {
    bytes += chunk.values().size() + chunk.echo().size();
    if (first) {
      if (chunk.total_values() != num_values_) {
        metrics_->RecordRejected(RejectReason::kWrongSize);
        return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                            "total_values: gradient has " + std::to_string(chunk.total_values()) +
                                " values, the model has " + std::to_string(num_values_));
      }
      if (!ValidWireType(chunk.wire_type()) || !ValidWireType(chunk.echo_type())) {
        return RejectMalformed("wire_type: unknown value");
      }
      header = chunk;
      has_echo = !chunk.echo().empty();
      gradient->resize(num_values_);
      if (has_echo) echo->resize(num_values_ * WireTypeSize(chunk.echo_type()));
      first = false;
    } else if (chunk.worker_id() != header.worker_id() ||
               chunk.base_version() != header.base_version() ||
               chunk.total_values() != header.total_values() ||
               chunk.wire_type() != header.wire_type() ||
               chunk.echo_type() != header.echo_type()) {
      return RejectMalformed("chunk at offset " + std::to_string(chunk.offset()) +
                             ": header fields differ from the first chunk");
    }
    if (chunk.offset() != received) {
      return RejectMalformed("chunk offset " + std::to_string(chunk.offset()) + ", expected " +
                             std::to_string(received));
    }
    const size_t n = CountValues(chunk.values(), header.wire_type());
    if (n == SIZE_MAX || n == 0 || n > num_values_ - received) {
      return RejectMalformed("chunk at offset " + std::to_string(received) +
                             ": values must hold whole values and stay within total_values");
    }
    if (has_echo != !chunk.echo().empty() ||
        (has_echo && CountValues(chunk.echo(), header.echo_type()) != n)) {
      return RejectMalformed("chunk at offset " + std::to_string(received) +
                             ": echo must cover exactly the chunk's values");
    }
    DecodeValues(chunk.values(), header.wire_type(), gradient->data() + received);
    if (has_echo) {
      std::memcpy(echo->data() + received * WireTypeSize(header.echo_type()),
                  chunk.echo().data(), chunk.echo().size());
    }
    received += n;
  }
  metrics_->AddReceivedBytes(bytes);
  if (first || received != num_values_) {
    return grpc::Status(grpc::StatusCode::CANCELLED,
                        "push stream ended after " + std::to_string(received) + " of " +
                            std::to_string(num_values_) + " values; nothing was applied");
  }
  request->worker = header.worker_id();
  request->base_version = header.base_version();
  request->gradient = gradient->data();
  request->gradient_size = num_values_;
  if (has_echo) {
    request->echo.dtype =
        header.echo_type() == proto::BFLOAT16 ? DType::kBfloat16 : DType::kFloat32;
    request->echo.data = echo->data();
    request->echo_size = num_values_;
  }
  *loss = header.loss();
  return grpc::Status::OK;
}

grpc::Status MasterService::Push(grpc::ServerContext* context,
                                 grpc::ServerReader<proto::GradientChunk>* reader,
                                 proto::PushResponse* response) {
  grpc::Status auth = Authorize(context);
  if (!auth.ok()) return auth;
  const Clock::time_point start = Clock::now();
  // Decoded outside the mutex into this thread's buffers.
  thread_local std::vector<float> gradient;
  thread_local std::vector<char> echo;
  thread_local ApplyStats stats;
  PushRequest request;
  float loss = 0;
  grpc::Status received = ReceivePush(reader, &gradient, &echo, &request, &loss);
  if (!received.ok()) return received;
  if (context->IsCancelled()) {
    return grpc::Status(grpc::StatusCode::CANCELLED, "push cancelled; nothing was applied");
  }

  Status s;
  RejectReason reason = RejectReason::kNumReasons;
  uint64_t version = 0;
  double next_lr = 0;
  size_t live = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    s = engine_->Push(request, &stats, &reason);
    version = engine_->version();
    next_lr = engine_->learning_rate();
    live = engine_->num_workers();
  }
  if (!s.ok()) {
    metrics_->RecordRejected(reason);
    spdlog::warn("rejected push from worker {}: {}", request.worker, s.ToString());
    return ToGrpcStatus(s);
  }
  metrics_->RecordPush(request.worker, stats, SecondsSince(start));
  metrics_->SetModel(version, next_lr, live);
  response->set_outcome(ToProto(stats.outcome));
  response->set_version(version);
  response->set_staleness(stats.staleness);
  response->set_learning_rate(stats.learning_rate);
  response->set_gap_mean(stats.has_gap ? stats.gap.gap_mean : 1.0);
  response->set_penalty_mean(stats.penalty_mean);
  return grpc::Status::OK;
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
    metrics_->SetModel(version, engine_->learning_rate(), members.size());
  }
  metrics_->SetMembers(members);
  for (uint32_t w : response->joined()) spdlog::info("worker {} joined", w);
  for (uint32_t w : response->left()) spdlog::info("worker {} left; its state was released", w);
  response->set_version(version);
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
