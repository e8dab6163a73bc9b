#include "services/master/master_client.h"

#include <algorithm>
#include <chrono>

#include "services/master/bulk_transfer.h"
#include "services/master/chunk_wire.h"
#include "services/net/grpc_keepalive.h"
#include "services/numeric/bfloat16.h"
#include "services/numeric/wire_values.h"

namespace gaptrain {

Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return Status::OK();
  return Status(static_cast<Status::Code>(status.error_code()), status.error_message());
}

std::shared_ptr<grpc::Channel> CreateMasterChannel(
    const std::string& target, std::shared_ptr<grpc::ChannelCredentials> credentials) {
  grpc::ChannelArguments args;
  ApplyBulkTransferArguments(&args);
  ApplyKeepaliveArguments(&args);
  return grpc::CreateCustomChannel(target, credentials, args);
}

MasterClient::MasterClient(std::shared_ptr<grpc::Channel> channel, Options options)
    : options_(std::move(options)) {
  UseChannel(channel);
}

MasterClient::MasterClient(ChannelFactory make_channel, Options options)
    : make_channel_(std::move(make_channel)), options_(std::move(options)) {
  UseChannel(make_channel_());
}

void MasterClient::UseChannel(const std::shared_ptr<grpc::Channel>& channel) {
  stub_ = proto::Master::NewStub(channel);
  generic_ = std::make_unique<grpc::GenericStub>(channel);
}

Status MasterClient::Observe(Status outcome) {
  // Making a channel does not block. It looks the name up on its first
  // call, a backoff delay from now: connecting at once (GetState(true))
  // spent that lookup too early, while the name still did not resolve, and
  // measured slower (a moved master's first update 2.3-3.7 s after it
  // served, against 0.7-0.9 s).
  if (make_channel_ != nullptr && renewal_.Renew(outcome)) UseChannel(make_channel_());
  return outcome;
}

void MasterClient::Prepare(grpc::ClientContext* context) const {
  if (!options_.token.empty()) context->AddMetadata("authorization", "Bearer " + options_.token);
  context->set_deadline(std::chrono::system_clock::now() +
                        std::chrono::milliseconds(
                            static_cast<int64_t>(options_.deadline_seconds * 1000)));
}

Status MasterClient::Describe(proto::DescribeResponse* response) {
  grpc::ClientContext context;
  Prepare(&context);
  return Observe(FromGrpcStatus(stub_->Describe(&context, proto::DescribeRequest(), response)));
}

namespace {

constexpr char kPullMethod[] = "/gaptrain.proto.Master/Pull";
constexpr char kPushMethod[] = "/gaptrain.proto.Master/Push";
constexpr char kPushPullMethod[] = "/gaptrain.proto.Master/PushPull";

// One streaming call on a private completion queue, one operation at a
// time: each step waits for its own completion.
class StreamingCall {
 public:
  StreamingCall(grpc::GenericStub* stub, grpc::ClientContext* context, const char* method)
      : call_(stub->PrepareCall(context, method, &cq_)) {
    call_->StartCall(this);
    started_ = Wait();
  }
  ~StreamingCall() {
    cq_.Shutdown();
    void* tag;
    bool ok;
    while (cq_.Next(&tag, &ok)) {
    }
  }

  bool started() const { return started_; }
  bool Write(const grpc::ByteBuffer& message) {
    call_->Write(message, this);
    return Wait();
  }
  bool WritesDone() {
    call_->WritesDone(this);
    return Wait();
  }
  bool WriteLast(const grpc::ByteBuffer& message) {
    call_->WriteLast(message, grpc::WriteOptions(), this);
    return Wait();
  }
  bool Read(grpc::ByteBuffer* message) {
    call_->Read(message, this);
    return Wait();
  }
  grpc::Status Finish() {
    grpc::Status status;
    call_->Finish(&status, this);
    Wait();
    return status;
  }

 private:
  bool Wait() {
    void* tag;
    bool ok = false;
    cq_.Next(&tag, &ok);
    return ok;
  }

  grpc::CompletionQueue cq_;
  std::unique_ptr<grpc::GenericClientAsyncReaderWriter> call_;
  bool started_ = false;
};

template <class Message>
grpc::ByteBuffer Serialize(const Message& message) {
  grpc::ByteBuffer buffer;
  bool own = false;
  grpc::SerializationTraits<Message>::Serialize(message, &buffer, &own);
  return buffer;
}

}  // namespace

Status MasterClient::Pull(uint32_t worker, int64_t known_version, float* out, size_t n,
                          PullResult* result) {
  return Observe(PullImpl(worker, /*observer=*/false, known_version, out, n, result));
}

Status MasterClient::PullModel(int64_t known_version, float* out, size_t n, PullResult* result) {
  return Observe(PullImpl(0, /*observer=*/true, known_version, out, n, result));
}

namespace {

// Reads a pull's chunks into out[0, n); `push`, when given, receives the
// PushResponse the first chunk carries (PushPull). A malformed reply
// cancels the call and is DATA_LOSS; the call's own failure comes next.
// `*answered` says whether the first chunk came (with the push outcome,
// when one is expected).
Status ReadParameters(StreamingCall* call, grpc::ClientContext* context, float* out, size_t n,
                      MasterClient::PullResult* result, proto::PushResponse* push,
                      bool* answered) {
  *result = MasterClient::PullResult();
  *answered = false;
  Status bad;
  size_t received = 0;
  bool first = true;
  grpc::ByteBuffer buffer;
  ReceivedParameterChunk chunk;
  while (call->Read(&buffer)) {
    if (!bad.ok()) continue;  // drain after cancelling
    Status parsed = ParseParameterChunk(&buffer, &chunk);
    const proto::ParameterChunk& h = chunk.header;
    if (parsed.ok() && first) {
      result->version = h.version();
      result->incarnation = h.incarnation();
      if (h.total_values() != n) {
        bad = Status::FailedPrecondition("pull: the master's model has " +
                                         std::to_string(h.total_values()) +
                                         " values, this worker's has " + std::to_string(n));
      }
      if (push != nullptr && !h.has_push()) {
        bad = Status::DataLoss("push-pull: the first chunk has no push outcome");
      } else {
        if (push != nullptr) *push = h.push();
        *answered = true;
      }
      first = false;
    }
    if (!parsed.ok()) bad = Status::DataLoss("pull: " + parsed.message());
    if (!bad.ok()) {
      context->TryCancel();
      continue;
    }
    if (chunk.values.empty()) continue;  // not modified
    const size_t value_size = WireTypeSize(h.wire_type());
    const size_t count = chunk.values.size() / value_size;
    if (!proto::WireType_IsValid(h.wire_type()) || chunk.values.size() % value_size != 0 ||
        h.offset() != received || count > n - received || h.version() != result->version) {
      bad = Status::DataLoss("pull: malformed chunk at offset " + std::to_string(h.offset()));
      context->TryCancel();
      continue;
    }
    DecodeValues(chunk.values, h.wire_type(), out + received);
    received += count;
  }
  grpc::Status finish = call->Finish();
  if (!bad.ok()) return bad;
  if (!finish.ok()) return FromGrpcStatus(finish);
  if (first) return Status::DataLoss("pull: the master sent no chunk");
  result->modified = received > 0;
  if (received != 0 && received != n) {
    return Status::DataLoss("pull: received " + std::to_string(received) + " of " +
                            std::to_string(n) + " values");
  }
  return Status::OK();
}

}  // namespace

Status MasterClient::PullImpl(uint32_t worker, bool observer, int64_t known_version, float* out,
                              size_t n, PullResult* result) {
  grpc::ClientContext context;
  Prepare(&context);
  proto::PullRequest request;
  request.set_worker_id(worker);
  request.set_observer(observer);
  request.set_known_version(known_version);
  request.set_wire_type(options_.wire_type);
  request.set_chunk_values(options_.chunk_values);

  StreamingCall call(generic_.get(), &context, kPullMethod);
  if (!(call.started() && call.WriteLast(Serialize(request)))) {
    *result = PullResult();
    const grpc::Status finish = call.Finish();
    return finish.ok() ? Status::DataLoss("pull: the master sent no chunk")
                       : FromGrpcStatus(finish);
  }
  bool answered = false;
  return ReadParameters(&call, &context, out, n, result, nullptr, &answered);
}

namespace {

// Sends a gradient as Push's chunks, closing the client's side with the
// last one; false when the call ended first (Finish says why).
bool WriteGradient(StreamingCall* call, const MasterClient::Options& options, uint32_t worker,
                   uint64_t base_version, const float* gradient, size_t n, float loss,
                   const void* echo, proto::WireType echo_type) {
  proto::GradientChunk header;
  header.set_worker_id(worker);
  header.set_base_version(base_version);
  header.set_total_values(n);
  header.set_wire_type(options.wire_type);
  header.set_echo_type(echo_type);
  header.set_loss(loss);
  const size_t echo_size = WireTypeSize(echo_type);
  bool sent = call->started();
  for (size_t offset = 0; sent && offset < n; offset += options.chunk_values) {
    const size_t count = std::min<size_t>(options.chunk_values, n - offset);
    header.set_offset(offset);
    grpc::Slice values;
    if (options.wire_type == proto::BFLOAT16) {
      uint8_t* bytes;
      values = NewSlice(count * 2, &bytes);
      FloatsToBf16(gradient + offset, count, reinterpret_cast<bf16_t*>(bytes));
    } else {
      // The caller's gradient outlives the call: Finish waits for it.
      values = BorrowedSlice(gradient + offset, count * sizeof(float));
    }
    grpc::Slice echo_slice;
    if (echo != nullptr) {
      echo_slice = BorrowedSlice(static_cast<const char*>(echo) + offset * echo_size,
                                 count * echo_size);
    }
    const grpc::ByteBuffer message =
        GradientChunkBuffer(header, values, echo != nullptr ? &echo_slice : nullptr);
    // The last chunk also closes the client's side: one operation less.
    sent = offset + count >= n ? call->WriteLast(message) : call->Write(message);
  }
  if (sent && n == 0) sent = call->WritesDone();  // nothing to send: just close
  return sent;
}

}  // namespace

Status MasterClient::Push(uint32_t worker, uint64_t base_version, const float* gradient,
                          size_t n, float loss, proto::PushResponse* response, const void* echo,
                          proto::WireType echo_type) {
  grpc::ClientContext context;
  Prepare(&context);
  StreamingCall call(generic_.get(), &context, kPushMethod);
  // A server that rejected the push early ends the stream; Finish says why.
  const bool sent =
      WriteGradient(&call, options_, worker, base_version, gradient, n, loss, echo, echo_type);
  grpc::ByteBuffer reply;
  const bool have_reply = sent && call.Read(&reply);
  grpc::Status finish = call.Finish();
  if (!finish.ok()) return Observe(FromGrpcStatus(finish));
  Observe(Status::OK());  // the master answered
  if (!have_reply ||
      !grpc::SerializationTraits<proto::PushResponse>::Deserialize(&reply, response).ok()) {
    return Status::DataLoss("push: the master's reply was missing or malformed");
  }
  return Status::OK();
}

Status MasterClient::PushPull(uint32_t worker, uint64_t base_version, const float* gradient,
                              size_t n, float loss, const void* echo, proto::WireType echo_type,
                              float* parameters, PushPullResult* result) {
  *result = PushPullResult();
  grpc::ClientContext context;
  Prepare(&context);
  StreamingCall call(generic_.get(), &context, kPushPullMethod);
  WriteGradient(&call, options_, worker, base_version, gradient, n, loss, echo, echo_type);
  // Reading starts only once the whole gradient (and echo) has gone: the
  // parameters may be written over the echo's buffer.
  bool answered = false;
  const Status read = Observe(
      ReadParameters(&call, &context, parameters, n, &result->pull, &result->push, &answered));
  // No outcome: the push's own status (refused, or the call failed with
  // its fate unknown).
  if (!answered) return read;
  result->pull_status = read;
  return Status::OK();
}

Status MasterClient::SetMembers(const std::vector<uint32_t>& workers,
                                proto::SetMembersResponse* response) {
  grpc::ClientContext context;
  Prepare(&context);
  proto::SetMembersRequest request;
  for (uint32_t w : workers) request.add_worker_ids(w);
  return Observe(FromGrpcStatus(stub_->SetMembers(&context, request, response)));
}

Status MasterClient::PushBuffers(uint32_t worker, const std::string& values,
                                 proto::PushBuffersResponse* response) {
  grpc::ClientContext context;
  Prepare(&context);
  proto::PushBuffersRequest request;
  request.set_worker_id(worker);
  request.set_values(values);
  proto::PushBuffersResponse unused;
  return Observe(FromGrpcStatus(
      stub_->PushBuffers(&context, request, response != nullptr ? response : &unused)));
}

Status MasterClient::PullBuffers(proto::PullBuffersResponse* response) {
  grpc::ClientContext context;
  Prepare(&context);
  return Observe(
      FromGrpcStatus(stub_->PullBuffers(&context, proto::PullBuffersRequest(), response)));
}

Status MasterClient::DeclareModel(uint32_t worker, const proto::ModelLayout& layout,
                                  const std::vector<float>& values,
                                  const std::string& buffer_values, bool* adopted) {
  grpc::ClientContext context;
  Prepare(&context);
  proto::DeclareModelResponse response;
  std::unique_ptr<grpc::ClientWriter<proto::ModelDeclaration>> writer(
      stub_->DeclareModel(&context, &response));
  const size_t chunk = std::max<size_t>(1, options_.chunk_values);
  size_t offset = 0;
  do {
    proto::ModelDeclaration message;
    message.set_worker_id(worker);
    message.set_total_values(values.size());
    message.set_offset(offset);
    if (offset == 0) {
      *message.mutable_layout() = layout;
      message.set_buffer_values(buffer_values);
    }
    const size_t n = std::min(chunk, values.size() - offset);
    message.set_values(reinterpret_cast<const char*>(values.data() + offset), n * sizeof(float));
    offset += n;
    if (!writer->Write(message)) break;  // the server ended the call: Finish says why
  } while (offset < values.size());
  writer->WritesDone();
  Status s = Observe(FromGrpcStatus(writer->Finish()));
  if (s.ok() && adopted != nullptr) *adopted = response.adopted();
  return s;
}

Status MasterClient::Checkpoint(proto::CheckpointResponse* response) {
  grpc::ClientContext context;
  Prepare(&context);
  return Observe(
      FromGrpcStatus(stub_->Checkpoint(&context, proto::CheckpointRequest(), response)));
}

}  // namespace gaptrain
