#include "services/master/master_client.h"

#include <algorithm>
#include <chrono>

#include "services/common/wire_values.h"
#include "services/master/master_service.h"

namespace gaptrain {

Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return Status::OK();
  return Status(static_cast<Status::Code>(status.error_code()), status.error_message());
}

std::shared_ptr<grpc::Channel> CreateMasterChannel(
    const std::string& target, std::shared_ptr<grpc::ChannelCredentials> credentials) {
  grpc::ChannelArguments args;
  ApplyBulkTransferArguments(&args);
  return grpc::CreateCustomChannel(target, credentials, args);
}

MasterClient::MasterClient(std::shared_ptr<grpc::Channel> channel, Options options)
    : stub_(proto::Master::NewStub(channel)), options_(std::move(options)) {}

void MasterClient::Prepare(grpc::ClientContext* context) const {
  if (!options_.token.empty()) context->AddMetadata("authorization", "Bearer " + options_.token);
  context->set_deadline(std::chrono::system_clock::now() +
                        std::chrono::milliseconds(
                            static_cast<int64_t>(options_.deadline_seconds * 1000)));
}

Status MasterClient::Describe(proto::DescribeResponse* response) {
  grpc::ClientContext context;
  Prepare(&context);
  return FromGrpcStatus(stub_->Describe(&context, proto::DescribeRequest(), response));
}

Status MasterClient::Pull(uint32_t worker, int64_t known_version, float* out, size_t n,
                          PullResult* result) {
  grpc::ClientContext context;
  Prepare(&context);
  proto::PullRequest request;
  request.set_worker_id(worker);
  request.set_known_version(known_version);
  request.set_wire_type(options_.wire_type);
  request.set_chunk_values(options_.chunk_values);
  auto reader = stub_->Pull(&context, request);
  proto::ParameterChunk chunk;
  size_t received = 0;
  bool first = true;
  *result = PullResult();
  Status bad;
  while (reader->Read(&chunk)) {
    if (first) {
      result->version = chunk.version();
      if (chunk.total_values() != n) {
        bad = Status::FailedPrecondition("pull: the master's model has " +
                                         std::to_string(chunk.total_values()) +
                                         " values, this worker's has " + std::to_string(n));
        context.TryCancel();
        break;
      }
      first = false;
    }
    if (chunk.values().empty()) continue;  // not modified
    const size_t count = CountValues(chunk.values(), chunk.wire_type());
    if (count == SIZE_MAX || chunk.offset() != received || count > n - received ||
        chunk.version() != result->version) {
      bad = Status::DataLoss("pull: malformed chunk at offset " + std::to_string(chunk.offset()));
      context.TryCancel();
      break;
    }
    DecodeValues(chunk.values(), chunk.wire_type(), out + received);
    received += count;
  }
  grpc::Status finish = reader->Finish();
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

Status MasterClient::Push(uint32_t worker, uint64_t base_version, const float* gradient,
                          size_t n, float loss, proto::PushResponse* response, const void* echo,
                          proto::WireType echo_type) {
  grpc::ClientContext context;
  Prepare(&context);
  auto writer = stub_->Push(&context, response);
  proto::GradientChunk chunk;
  chunk.set_worker_id(worker);
  chunk.set_base_version(base_version);
  chunk.set_total_values(n);
  chunk.set_wire_type(options_.wire_type);
  chunk.set_echo_type(echo_type);
  chunk.set_loss(loss);
  const size_t echo_size = WireTypeSize(echo_type);
  for (size_t offset = 0; offset < n; offset += options_.chunk_values) {
    const size_t count = std::min<size_t>(options_.chunk_values, n - offset);
    chunk.set_offset(offset);
    EncodeValues(gradient + offset, count, options_.wire_type, chunk.mutable_values());
    if (echo != nullptr) {
      chunk.set_echo(static_cast<const char*>(echo) + offset * echo_size, count * echo_size);
    }
    if (!writer->Write(chunk)) break;  // the server ended the call; Finish says why
  }
  writer->WritesDone();
  return FromGrpcStatus(writer->Finish());
}

Status MasterClient::SetMembers(const std::vector<uint32_t>& workers,
                                proto::SetMembersResponse* response) {
  grpc::ClientContext context;
  Prepare(&context);
  proto::SetMembersRequest request;
  for (uint32_t w : workers) request.add_worker_ids(w);
  return FromGrpcStatus(stub_->SetMembers(&context, request, response));
}

Status MasterClient::Checkpoint(proto::CheckpointResponse* response) {
  grpc::ClientContext context;
  Prepare(&context);
  return FromGrpcStatus(stub_->Checkpoint(&context, proto::CheckpointRequest(), response));
}

}  // namespace gaptrain
