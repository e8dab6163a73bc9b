// Fuzz target: the chunked push/pull wire decoding (chunk_wire.h) of
// ParameterChunk and GradientChunk messages, fp32 and bf16, echo included,
// split into gRPC slices anywhere. Input: byte 0 picks the message (bit 0:
// gradient) and how many cuts split it into slices (bits 1-3); then one
// byte per cut (where it falls, as a fraction of what is left); the rest
// is the message. Contract:
//   - a malformed message is INVALID_ARGUMENT with a message, never a crash;
//   - the slices are read in place and never past their ends (they borrow
//     the input, which libFuzzer and the replay test size exactly);
//   - an accepted message is one protobuf accepts too, with the same
//     fields, values and echo bytes, however it was split;
//   - DecodeValues fills exactly values.size() / WireTypeSize values, equal
//     to a plain conversion, fp32 or bf16, at any alignment.

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "proto/gaptrain.pb.h"
#include "services/master/chunk_wire.h"
#include "services/numeric/bfloat16.h"
#include "services/numeric/sliced_bytes.h"
#include "services/numeric/wire_values.h"
#include "services/testing/fuzz_contract.h"

namespace gaptrain {
namespace {

std::string Joined(const SlicedBytes& bytes) {
  std::string out(bytes.size(), '\0');
  bytes.CopyTo(&out[0]);
  return out;
}

bool SameFloatBits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }

// Decodes `bytes` as values of `type` and compares with a plain loop.
void CheckDecode(const SlicedBytes& bytes, proto::WireType type) {
  const size_t value_size = WireTypeSize(type);
  if (bytes.size() % value_size != 0) return;  // callers reject these first
  const size_t n = bytes.size() / value_size;
  std::unique_ptr<float[]> out(new float[n]);  // exactly n: ASan sees overruns
  DecodeValues(bytes, type, out.get());
  const std::string raw = Joined(bytes);
  for (size_t i = 0; i < n; ++i) {
    float expected;
    if (type == proto::BFLOAT16) {
      bf16_t half;
      std::memcpy(&half, raw.data() + 2 * i, sizeof half);
      expected = Bf16ToFloat(half);
    } else {
      std::memcpy(&expected, raw.data() + 4 * i, sizeof expected);
    }
    FuzzExpect(SameFloatBits(out[i], expected), "DecodeValues: value " + std::to_string(i));
  }
}

void CheckParameterChunk(grpc::ByteBuffer* buffer, const std::string& message) {
  ReceivedParameterChunk chunk;
  Status parsed = ParseParameterChunk(buffer, &chunk);
  if (!parsed.ok()) {
    FuzzExpectRejection(parsed, {Status::Code::kInvalidArgument}, "ParseParameterChunk");
    return;
  }
  proto::ParameterChunk reference;
  FuzzExpect(reference.ParseFromString(message),
             "ParseParameterChunk accepted what protobuf rejects");
  const proto::ParameterChunk& h = chunk.header;
  FuzzExpect(h.version() == reference.version() && h.total_values() == reference.total_values() &&
                 h.offset() == reference.offset() && h.wire_type() == reference.wire_type(),
             "ParseParameterChunk: header differs from protobuf's");
  FuzzExpect(h.values().empty(), "ParseParameterChunk: values left in the header");
  FuzzExpect(Joined(chunk.values) == reference.values(), "ParseParameterChunk: values differ");
  CheckDecode(chunk.values, proto::FLOAT32);
  CheckDecode(chunk.values, proto::BFLOAT16);
}

void CheckGradientChunk(grpc::ByteBuffer* buffer, const std::string& message) {
  ReceivedGradientChunk chunk;
  Status parsed = ParseGradientChunk(buffer, &chunk);
  if (!parsed.ok()) {
    FuzzExpectRejection(parsed, {Status::Code::kInvalidArgument}, "ParseGradientChunk");
    return;
  }
  proto::GradientChunk reference;
  FuzzExpect(reference.ParseFromString(message),
             "ParseGradientChunk accepted what protobuf rejects");
  const proto::GradientChunk& h = chunk.header;
  FuzzExpect(h.worker_id() == reference.worker_id() &&
                 h.base_version() == reference.base_version() &&
                 h.total_values() == reference.total_values() &&
                 h.offset() == reference.offset() && h.wire_type() == reference.wire_type() &&
                 h.echo_type() == reference.echo_type() &&
                 SameFloatBits(h.loss(), reference.loss()),
             "ParseGradientChunk: header differs from protobuf's");
  FuzzExpect(h.values().empty() && h.echo().empty(),
             "ParseGradientChunk: payload left in the header");
  FuzzExpect(Joined(chunk.values) == reference.values(), "ParseGradientChunk: values differ");
  FuzzExpect(Joined(chunk.echo) == reference.echo(), "ParseGradientChunk: echo differs");
  CheckDecode(chunk.values, proto::FLOAT32);
  CheckDecode(chunk.values, proto::BFLOAT16);
  CheckDecode(chunk.echo, proto::BFLOAT16);
}

}  // namespace
}  // namespace gaptrain

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gaptrain;
  if (size == 0) return 0;
  const bool gradient = (data[0] & 1) != 0;
  size_t cuts = (data[0] >> 1) & 7;
  size_t pos = 1;
  if (cuts > size - pos) cuts = size - pos;
  const uint8_t* cut_bytes = data + pos;
  pos += cuts;
  const uint8_t* message = data + pos;
  const size_t message_size = size - pos;

  // Slices that borrow the input: a read past a slice is a read past the
  // input. Empty slices are kept (gRPC may hand them over).
  std::vector<grpc::Slice> slices;
  size_t start = 0;
  for (size_t i = 0; i < cuts; ++i) {
    const size_t left = message_size - start;
    const size_t length = left * cut_bytes[i] / 255;
    slices.push_back(BorrowedSlice(message + start, length));
    start += length;
  }
  slices.push_back(BorrowedSlice(message + start, message_size - start));
  grpc::ByteBuffer buffer(slices.data(), slices.size());
  const std::string whole(reinterpret_cast<const char*>(message), message_size);
  if (gradient) {
    CheckGradientChunk(&buffer, whole);
  } else {
    CheckParameterChunk(&buffer, whole);
  }
  return 0;
}
