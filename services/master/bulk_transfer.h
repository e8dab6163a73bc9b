// Settings for model-sized gRPC streams between workers and the master, in
// one place for both ends: the master's server and every client channel
// (the worker's, the coordinator's, the benchmarks') must agree on them.

#ifndef GAPTRAIN_SERVICES_MASTER_BULK_TRANSFER_H_
#define GAPTRAIN_SERVICES_MASTER_BULK_TRANSFER_H_

#include <cstdint>

#include <grpcpp/grpcpp.h>

namespace gaptrain {

// The most values one Pull or Push message carries.
constexpr uint32_t kBulkMaxChunkValues = 1024 * 1024;  // 4 MiB of fp32
// The gRPC receive limit both ends set: a chunk of kBulkMaxChunkValues fp32
// values plus as many echoed values, and the header.
constexpr int kBulkMaxMessageBytes = 2 * 4 * kBulkMaxChunkValues + (64 << 10);

// HTTP/2 settings for model-sized streams: larger flow-control windows and
// frames keep a 100 MB transfer from stalling on window updates
// (docs/performance.md has the numbers), and the receive limit above.
void ApplyBulkTransferArguments(grpc::ServerBuilder* builder);
void ApplyBulkTransferArguments(grpc::ChannelArguments* args);

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_MASTER_BULK_TRANSFER_H_
