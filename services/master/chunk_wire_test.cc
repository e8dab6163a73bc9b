#include "services/master/chunk_wire.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "services/common/bfloat16.h"

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

}  // namespace
}  // namespace gaptrain
