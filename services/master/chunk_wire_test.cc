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

TEST(SlicedBytesTest, DecodeFiniteToDecodesAcrossPartsAndFindsNaNAndInf) {
  const std::vector<float> values = Ramp(1000);
  const std::vector<size_t> cuts = {1, 7, 10, 999, 1001, 1002, 1999, 2001, 3999};
  for (proto::WireType type : {proto::FLOAT32, proto::BFLOAT16}) {
    SCOPED_TRACE(type);
    auto bytes_of = [&](const std::vector<float>& v) {
      return type == proto::FLOAT32 ? Fp32Bytes(v) : Bf16Bytes(v);
    };
    std::vector<float> plain(values.size()), checked(values.size());
    const std::vector<uint8_t> bytes = bytes_of(values);  // SlicedBytes points into it
    const SlicedBytes finite = Cut(bytes, cuts);
    finite.DecodeTo(type, plain.data());
    EXPECT_TRUE(finite.DecodeFiniteTo(type, checked.data()));
    EXPECT_EQ(plain, checked);
    for (size_t i = 0; i < values.size(); ++i) {
      const float expected =
          type == proto::FLOAT32 ? values[i] : Bf16ToFloat(FloatToBf16(values[i]));
      ASSERT_EQ(checked[i], expected) << i;
    }
    // A bad value anywhere (the first, one that straddles a cut, the last)
    // is found; everything is still decoded.
    for (size_t bad : {size_t{0}, size_t{2}, size_t{500}, size_t{999}}) {
      for (float x : {std::nanf(""), std::numeric_limits<float>::infinity(),
                      -std::numeric_limits<float>::infinity()}) {
        std::vector<float> v = values;
        v[bad] = x;
        std::vector<float> out(v.size());
        const std::vector<uint8_t> bad_bytes = bytes_of(v);
        EXPECT_FALSE(Cut(bad_bytes, cuts).DecodeFiniteTo(type, out.data())) << bad;
        EXPECT_EQ(out[bad == 0 ? 1 : 0], checked[bad == 0 ? 1 : 0]);
      }
    }
  }
}

}  // namespace
}  // namespace gaptrain
