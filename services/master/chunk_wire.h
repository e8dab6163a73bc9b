// The protobuf wire format of ParameterChunk and GradientChunk, written and
// read directly on gRPC byte buffers. Model-sized payloads then never pass
// through a std::string: a sender hands gRPC slices that point at its own
// buffer, and a receiver decodes values straight out of the received
// slices. Messages stay plain protobuf on the wire, so any gRPC client or
// server that uses the generated classes interoperates.

#ifndef GAPTRAIN_SERVICES_MASTER_CHUNK_WIRE_H_
#define GAPTRAIN_SERVICES_MASTER_CHUNK_WIRE_H_

#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/slice.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "proto/gaptrain.pb.h"
#include "services/base/status.h"
#include "services/numeric/sliced_bytes.h"

namespace gaptrain {

// Decodes the values of `type` in `bytes` into `out` (bytes.size() /
// WireTypeSize(type) floats).
void DecodeValues(const SlicedBytes& bytes, proto::WireType type, float* out);

// A parsed chunk: the scalar fields (and PushPull's push outcome) in
// `header` (values and echo left empty), the payloads as views into
// `slices`, which keep them alive. The views point into the Slice objects
// themselves (a small slice holds its bytes inline), so move `slices` only
// as a whole vector.
struct ReceivedParameterChunk {
  std::vector<grpc::Slice> slices;
  proto::ParameterChunk header;
  SlicedBytes values;
};

struct ReceivedGradientChunk {
  std::vector<grpc::Slice> slices;
  proto::GradientChunk header;
  SlicedBytes values;
  SlicedBytes echo;
};

// Parse a received message; a malformed one is INVALID_ARGUMENT.
Status ParseParameterChunk(grpc::ByteBuffer* buffer, ReceivedParameterChunk* chunk);
Status ParseGradientChunk(grpc::ByteBuffer* buffer, ReceivedGradientChunk* chunk);

// Builds a message from `header` (its values/echo fields must be empty)
// followed by the payload slices, without copying them.
grpc::ByteBuffer ParameterChunkBuffer(const proto::ParameterChunk& header,
                                      const grpc::Slice& values);
grpc::ByteBuffer GradientChunkBuffer(const proto::GradientChunk& header, const grpc::Slice& values,
                                     const grpc::Slice* echo);

// A slice over bytes that stay alive as long as `owner` does.
grpc::Slice SliceOf(const void* data, size_t size, std::shared_ptr<const void> owner);
// A slice over bytes the caller keeps alive until the call that sends it
// has finished.
grpc::Slice BorrowedSlice(const void* data, size_t size);
// A fresh slice of `size` bytes to fill before sending.
grpc::Slice NewSlice(size_t size, uint8_t** data);

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_MASTER_CHUNK_WIRE_H_
