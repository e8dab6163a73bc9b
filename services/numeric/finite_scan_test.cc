#include "services/numeric/finite_scan.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

namespace gaptrain {
namespace {

TEST(FiniteScanTest, AllFiniteReturnsSize) {
  std::vector<float> v(10000, 1.5f);
  v[17] = -std::numeric_limits<float>::max();
  v[18] = std::numeric_limits<float>::denorm_min();
  EXPECT_EQ(FindNonFinite(v.data(), v.size()), v.size());
  EXPECT_EQ(FindNonFinite(v.data(), 0), 0u);
}

TEST(FiniteScanTest, FindsFirstNanOrInfAcrossBlocks) {
  std::vector<float> v(10000, 0.25f);
  v[9000] = std::numeric_limits<float>::infinity();
  EXPECT_EQ(FindNonFinite(v.data(), v.size()), 9000u);
  v[4097] = std::nanf("");
  EXPECT_EQ(FindNonFinite(v.data(), v.size()), 4097u);
  v[0] = -std::numeric_limits<float>::infinity();
  EXPECT_EQ(FindNonFinite(v.data(), v.size()), 0u);
}

TEST(FiniteScanTest, Bfloat16) {
  std::vector<bf16_t> v(5000, FloatToBf16(3.0f));
  EXPECT_EQ(FindNonFinite(v.data(), v.size()), v.size());
  v[4999] = FloatToBf16(std::numeric_limits<float>::infinity());
  EXPECT_EQ(FindNonFinite(v.data(), v.size()), 4999u);
  v[123] = 0x7FC0;  // quiet NaN
  EXPECT_EQ(FindNonFinite(v.data(), v.size()), 123u);
}

// Every exponent but all-ones is finite, at every position and alignment.
TEST(FiniteScanTest, UnalignedBytesAtEveryOffset) {
  const std::vector<float> special = {0.0f, -0.0f, std::numeric_limits<float>::max(),
                                      -std::numeric_limits<float>::max(),
                                      std::numeric_limits<float>::denorm_min(), 1.0f,
                                      std::numeric_limits<float>::min()};
  const size_t n = 9000;
  std::vector<float> values(n);
  for (size_t i = 0; i < n; ++i) values[i] = special[i % special.size()];
  std::vector<uint8_t> storage(n * 4 + 3);
  for (size_t offset = 0; offset < 4; ++offset) {
    uint8_t* bytes = storage.data() + offset;
    std::memcpy(bytes, values.data(), n * 4);
    EXPECT_EQ(FindNonFiniteFloatBytes(bytes, n), n) << offset;
    for (size_t bad : {size_t{0}, size_t{4095}, size_t{4096}, n - 1}) {
      for (float x : {std::nanf(""), std::numeric_limits<float>::infinity(),
                      -std::numeric_limits<float>::infinity()}) {
        std::memcpy(bytes + bad * 4, &x, 4);
        EXPECT_EQ(FindNonFiniteFloatBytes(bytes, n), bad) << offset << " " << bad;
        std::memcpy(bytes + bad * 4, &values[bad], 4);
      }
    }
  }
}

TEST(FiniteScanTest, UnalignedBf16Bytes) {
  const size_t n = 5000;
  std::vector<bf16_t> values(n);
  for (size_t i = 0; i < n; ++i) values[i] = static_cast<bf16_t>(i % 2 ? 0x7F7F : 0xFF00);
  std::vector<uint8_t> storage(n * 2 + 1);
  uint8_t* bytes = storage.data() + 1;
  std::memcpy(bytes, values.data(), n * 2);
  EXPECT_EQ(FindNonFiniteBf16Bytes(bytes, n), n);  // 0x7F7F: largest finite
  const bf16_t inf = 0xFF80;
  std::memcpy(bytes + 4097 * 2, &inf, 2);
  EXPECT_EQ(FindNonFiniteBf16Bytes(bytes, n), 4097u);
}

}  // namespace
}  // namespace gaptrain
