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
#include "services/common/status.h"

namespace gaptrain {

// Bytes of one field of a received message, possibly spread over slices.
class SlicedBytes {
 public:
  void Append(const uint8_t* data, size_t size);
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  // Copies all bytes to `out` (size() bytes).
  void CopyTo(void* out) const;
  // Decodes values of `type` into `out` (size() / WireTypeSize values).
  void DecodeTo(proto::WireType type, float* out) const;
  // The same, and true when every decoded value is finite. Each part is
  // checked right after it is decoded, while it is still in cache, so the
  // check costs no extra pass over memory.
  bool DecodeFiniteTo(proto::WireType type, float* out) const;

 private:
  struct Part {
    const uint8_t* data;
    size_t size;
  };
  // Decodes part by part; after each part calls on_part(v), v being the
  // number of values complete in `out` so far.
  template <class OnPart>
  void Decode(proto::WireType type, float* out, OnPart on_part) const;

  std::vector<Part> parts_;
  size_t size_ = 0;
};

// A parsed chunk: the scalar fields in `header` (values and echo left
// empty), the payloads as views into `slices`, which keep them alive.
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
