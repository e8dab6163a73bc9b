#include "services/common/finite_scan.h"

#include <gtest/gtest.h>

#include <cmath>
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

}  // namespace
}  // namespace gaptrain
