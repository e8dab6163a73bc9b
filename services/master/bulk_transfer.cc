#include "services/master/bulk_transfer.h"

namespace gaptrain {
namespace {

constexpr int kLookaheadBytes = 64 << 20;
constexpr int kMaxFrameSize = (1 << 24) - 1;  // HTTP/2's largest
constexpr int kWriteBufferSize = 8 << 20;

}  // namespace

void ApplyBulkTransferArguments(grpc::ServerBuilder* builder) {
  builder->SetMaxReceiveMessageSize(kBulkMaxMessageBytes);
  builder->AddChannelArgument("grpc.http2.lookahead_bytes", kLookaheadBytes);
  builder->AddChannelArgument("grpc.http2.max_frame_size", kMaxFrameSize);
  builder->AddChannelArgument("grpc.http2.write_buffer_size", kWriteBufferSize);
}

void ApplyBulkTransferArguments(grpc::ChannelArguments* args) {
  args->SetMaxReceiveMessageSize(kBulkMaxMessageBytes);
  args->SetInt("grpc.http2.lookahead_bytes", kLookaheadBytes);
  args->SetInt("grpc.http2.max_frame_size", kMaxFrameSize);
  args->SetInt("grpc.http2.write_buffer_size", kWriteBufferSize);
}

}  // namespace gaptrain
