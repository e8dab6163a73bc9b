#include "services/master/chunk_wire.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "proto/gaptrain.pb.h"
#include "services/numeric/bfloat16.h"

namespace gaptrain {
namespace {

// `bytes` as parts cut at `cuts` (byte offsets, ascending; those past the
// end are ignored), so values straddle parts as they may on the wire.
SlicedBytes Cut(const std::vector<uint8_t>& bytes, const std::vector<size_t>& cuts) {
  SlicedBytes out;
  size_t begin = 0;
  for (size_t cut : cuts) {
    if (cut > bytes.size()) break;
    out.Append(bytes.data() + begin, cut - begin);
    begin = cut;
  }
  out.Append(bytes.data() + begin, bytes.size() - begin);
  return out;
}

std::vector<uint8_t> Fp32Bytes(const std::vector<float>& values) {
  std::vector<uint8_t> bytes(values.size() * 4);
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

std::vector<uint8_t> Bf16Bytes(const std::vector<float>& values) {
  std::vector<bf16_t> half(values.size());
  FloatsToBf16(values.data(), values.size(), half.data());
  std::vector<uint8_t> bytes(values.size() * 2);
  std::memcpy(bytes.data(), half.data(), bytes.size());
  return bytes;
}

std::vector<float> Ramp(size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = 0.25f * static_cast<float>(i) - 3.0f;
  return v;
}

TEST(DecodeValuesTest, DecodesFp32AndBf16AcrossParts) {
  const std::vector<float> values = Ramp(10000);  // bf16 crosses its 4096-value blocks
  const std::vector<size_t> cuts = {1, 7, 10, 999, 1001, 1002, 1999, 2001, 3999, 8193, 16385};
  for (proto::WireType type : {proto::FLOAT32, proto::BFLOAT16}) {
    SCOPED_TRACE(type);
    const std::vector<uint8_t> bytes =
        type == proto::FLOAT32 ? Fp32Bytes(values) : Bf16Bytes(values);
    std::vector<float> out(values.size() + 1, -1.0f);  // one guard value
    DecodeValues(Cut(bytes, cuts), type, out.data());
    for (size_t i = 0; i < values.size(); ++i) {
      const float expected =
          type == proto::FLOAT32 ? values[i] : Bf16ToFloat(FloatToBf16(values[i]));
      ASSERT_EQ(out[i], expected) << i;
    }
    EXPECT_EQ(out.back(), -1.0f);
  }
}

// Parses `message` as a GradientChunk received in one slice.
Status ParseGradientBytes(const std::string& message, ReceivedGradientChunk* chunk) {
  grpc::Slice slice(message.data(), message.size());
  grpc::ByteBuffer buffer(&slice, 1);
  return ParseGradientChunk(&buffer, chunk);
}

TEST(ParseGradientChunkTest, ReadsWhatProtobufWrites) {
  proto::GradientChunk sent;
  sent.set_worker_id(3);
  sent.set_base_version(41);
  sent.set_total_values(2);
  sent.set_wire_type(proto::BFLOAT16);
  sent.set_values(std::string("\x01\x02\x03\x04", 4));
  sent.set_loss(0.5f);
  ReceivedGradientChunk chunk;
  ASSERT_TRUE(ParseGradientBytes(sent.SerializeAsString(), &chunk).ok());
  EXPECT_EQ(chunk.header.worker_id(), 3u);
  EXPECT_EQ(chunk.header.base_version(), 41u);
  EXPECT_EQ(chunk.header.wire_type(), proto::BFLOAT16);
  EXPECT_EQ(chunk.header.loss(), 0.5f);
  EXPECT_EQ(chunk.values.size(), 4u);
}

// Found by chunk_wire_fuzzer: tags longer than protobuf allows (a varint
// of more than 5 bytes, or above 32 bits) were skipped as unknown fields,
// so the master accepted pushes that protobuf itself rejects.
TEST(ParseGradientChunkTest, RejectsTagsProtobufRejects) {
  const std::string tail = "\x4a\x4a\x4a\xb8";  // a fixed32 field's 4 bytes
  const std::vector<std::string> tags = {
      std::string("\xb5\xb5\xb5\xb5\xb5\xb5\xb5\xb5\x43"),  // 9 bytes, above 2^32
      std::string("\x8d\x80\x80\x80\x80\x00", 6),              // field 1, fixed32, 6 bytes
      std::string("\x85\x80\x80\x80\x10"),                      // 2^32 + 5
  };
  for (const std::string& tag : tags) {
    proto::GradientChunk reference;
    EXPECT_FALSE(reference.ParseFromString(tag + tail));
    ReceivedGradientChunk chunk;
    Status parsed = ParseGradientBytes(tag + tail, &chunk);
    EXPECT_EQ(parsed.code(), Status::Code::kInvalidArgument) << parsed.ToString();
  }
  // The largest tag protobuf takes (field 2^29 - 1, fixed32) is skipped.
  const std::string largest("\xfd\xff\xff\xff\x0f", 5);
  proto::GradientChunk reference;
  EXPECT_TRUE(reference.ParseFromString(largest + tail));
  ReceivedGradientChunk chunk;
  EXPECT_TRUE(ParseGradientBytes(largest + tail, &chunk).ok());
}

// A PushPull reply's first chunk: the push's outcome is parsed whole,
// an empty outcome (every field at its default) is still there, and a
// chunk without one has none.
TEST(ParseParameterChunkTest, ReadsThePushOutcomeOfAPushPull) {
  proto::ParameterChunk header;
  header.set_version(12);
  header.set_total_values(3);
  header.mutable_push()->set_outcome(proto::PushResponse::ACCUMULATED);
  header.mutable_push()->set_version(12);
  header.mutable_push()->set_gap_mean(1.25);
  header.mutable_push()->set_incarnation(77);
  const std::vector<float> values = {1.0f, 2.0f, 3.0f};
  grpc::ByteBuffer buffer = ParameterChunkBuffer(header, grpc::Slice(values.data(), 12));
  ReceivedParameterChunk chunk;
  ASSERT_TRUE(ParseParameterChunk(&buffer, &chunk).ok());
  ASSERT_TRUE(chunk.header.has_push());
  EXPECT_EQ(chunk.header.push().outcome(), proto::PushResponse::ACCUMULATED);
  EXPECT_EQ(chunk.header.push().gap_mean(), 1.25);
  EXPECT_EQ(chunk.header.push().incarnation(), 77u);
  EXPECT_EQ(chunk.header.version(), 12u);
  EXPECT_EQ(chunk.values.size(), 12u);

  header.mutable_push()->Clear();
  buffer = ParameterChunkBuffer(header, grpc::Slice());
  ASSERT_TRUE(ParseParameterChunk(&buffer, &chunk).ok());
  EXPECT_TRUE(chunk.header.has_push());
  header.clear_push();
  buffer = ParameterChunkBuffer(header, grpc::Slice());
  ASSERT_TRUE(ParseParameterChunk(&buffer, &chunk).ok());
  EXPECT_FALSE(chunk.header.has_push()) << "cleared from the previous parse";

  // An outcome that is not a PushResponse (a truncated varint inside),
  // alone or followed by a valid one (found by chunk_wire_fuzzer: only
  // the last occurrence was parsed, protobuf parses and merges them all).
  for (const std::string& bad :
       {std::string("\x3a\x02\x10\x80", 4), std::string("\x3a\x02\x10\x80\x3a\x00", 6)}) {
    grpc::Slice slice(bad.data(), bad.size());
    grpc::ByteBuffer malformed(&slice, 1);
    EXPECT_EQ(ParseParameterChunk(&malformed, &chunk).code(), Status::Code::kInvalidArgument);
    EXPECT_FALSE(proto::ParameterChunk().ParseFromString(bad));
  }
  // Two valid occurrences merge, as protobuf merges them.
  const std::string twice = std::string("\x3a\x02\x10\x05\x3a\x02\x18\x03", 8);
  grpc::Slice slice(twice.data(), twice.size());
  grpc::ByteBuffer merged(&slice, 1);
  ASSERT_TRUE(ParseParameterChunk(&merged, &chunk).ok());
  EXPECT_EQ(chunk.header.push().version(), 5u);
  EXPECT_EQ(chunk.header.push().staleness(), 3u);
}

}  // namespace
}  // namespace gaptrain
