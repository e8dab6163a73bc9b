#include "services/numeric/bfloat16.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include <gtest/gtest.h>

namespace gaptrain {
namespace {

float FromBits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

uint32_t ToBits(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  return bits;
}

bf16_t Round(uint32_t float_bits) { return FloatToBf16(FromBits(float_bits)); }

TEST(Bfloat16Test, ExactValuesKeepTheirTopHalf) {
  EXPECT_EQ(FloatToBf16(0.0f), 0x0000);
  EXPECT_EQ(FloatToBf16(-0.0f), 0x8000);
  EXPECT_EQ(FloatToBf16(1.0f), 0x3F80);
  EXPECT_EQ(FloatToBf16(-1.0f), 0xBF80);
  EXPECT_EQ(FloatToBf16(2.0f), 0x4000);
  EXPECT_EQ(FloatToBf16(0.5f), 0x3F00);
  EXPECT_EQ(FloatToBf16(-3.0f), 0xC040);
  EXPECT_EQ(FloatToBf16(3.140625f), 0x4049);  // 0x40490000 exactly
  EXPECT_EQ(FloatToBf16(std::numeric_limits<float>::infinity()), 0x7F80);
  EXPECT_EQ(FloatToBf16(-std::numeric_limits<float>::infinity()), 0xFF80);
}

TEST(Bfloat16Test, RoundsToNearest) {
  // Below the halfway point: round down (truncate).
  EXPECT_EQ(Round(0x3F807FFFu), 0x3F80);
  EXPECT_EQ(Round(0x3F800001u), 0x3F80);
  // Above the halfway point: round up.
  EXPECT_EQ(Round(0x3F808001u), 0x3F81);
  EXPECT_EQ(Round(0x3F80FFFFu), 0x3F81);
  // pi = 0x40490FDB: low half 0x0FDB < 0x8000.
  EXPECT_EQ(FloatToBf16(3.14159265f), 0x4049);
  // 0.1f = 0x3DCCCCCD: low half 0xCCCD > 0x8000.
  EXPECT_EQ(FloatToBf16(0.1f), 0x3DCD);
  // Negative values round by magnitude.
  EXPECT_EQ(Round(0xBF808001u), 0xBF81);
  EXPECT_EQ(Round(0xBF807FFFu), 0xBF80);
}

TEST(Bfloat16Test, TiesGoToEven) {
  // 1 + 2^-8 lies exactly between 0x3F80 (even) and 0x3F81 (odd).
  EXPECT_EQ(FloatToBf16(1.0f + 1.0f / 256.0f), 0x3F80);
  EXPECT_EQ(Round(0x3F808000u), 0x3F80);
  // Between 0x3F81 (odd) and 0x3F82 (even): up.
  EXPECT_EQ(Round(0x3F818000u), 0x3F82);
  EXPECT_EQ(Round(0x3F828000u), 0x3F82);
  EXPECT_EQ(Round(0x3F838000u), 0x3F84);
  // Negative ties.
  EXPECT_EQ(Round(0xBF808000u), 0xBF80);
  EXPECT_EQ(Round(0xBF818000u), 0xBF82);
  // The carry propagates into the exponent: 0x3FFF is odd, so the tie goes
  // up to 0x4000 = 2.0.
  EXPECT_EQ(Round(0x3FFF8000u), 0x4000);
  EXPECT_EQ(Bf16ToFloat(Round(0x3FFF8000u)), 2.0f);
  // Subnormals follow the same rule.
  EXPECT_EQ(Round(0x00008000u), 0x0000);
  EXPECT_EQ(Round(0x00018000u), 0x0002);
  EXPECT_EQ(Round(0x00008001u), 0x0001);
}

TEST(Bfloat16Test, LargeValuesOverflowToInfinity) {
  // FLT_MAX is more than half a bf16 step above the largest bf16 (0x7F7F).
  EXPECT_EQ(FloatToBf16(std::numeric_limits<float>::max()), 0x7F80);
  EXPECT_EQ(FloatToBf16(-std::numeric_limits<float>::max()), 0xFF80);
  // A tie between 0x7F7F (odd) and 0x7F80 (even, +Inf).
  EXPECT_EQ(Round(0x7F7F8000u), 0x7F80);
  // Just below the tie stays finite.
  EXPECT_EQ(Round(0x7F7F7FFFu), 0x7F7F);
}

TEST(Bfloat16Test, Bf16ToFloatIsExact) {
  EXPECT_EQ(Bf16ToFloat(0x3F80), 1.0f);
  EXPECT_EQ(Bf16ToFloat(0xBF80), -1.0f);
  EXPECT_EQ(Bf16ToFloat(0x4049), 3.140625f);
  EXPECT_EQ(Bf16ToFloat(0x3F81), 1.0f + 1.0f / 128.0f);
  EXPECT_EQ(Bf16ToFloat(0x0000), 0.0f);
  EXPECT_TRUE(std::signbit(Bf16ToFloat(0x8000)));
  EXPECT_EQ(Bf16ToFloat(0x7F80), std::numeric_limits<float>::infinity());
  EXPECT_EQ(ToBits(Bf16ToFloat(0x1234)), 0x12340000u);
}

TEST(Bfloat16Test, EveryFiniteBf16RoundTrips) {
  for (uint32_t b = 0; b <= 0xFFFFu; ++b) {
    const bf16_t h = static_cast<bf16_t>(b);
    if (((b >> 7) & 0xFFu) == 0xFFu) continue;  // Inf / NaN
    const float f = Bf16ToFloat(h);
    ASSERT_EQ(ToBits(f), b << 16);
    ASSERT_EQ(FloatToBf16(f), h) << "bf16 0x" << std::hex << b;
  }
  // And the infinities.
  EXPECT_EQ(FloatToBf16(Bf16ToFloat(0x7F80)), 0x7F80);
  EXPECT_EQ(FloatToBf16(Bf16ToFloat(0xFF80)), 0xFF80);
}

TEST(Bfloat16Test, ExactlyRepresentableFloatsRoundTrip) {
  // Small integers and dyadic fractions with <= 8 significant bits.
  const std::vector<float> values = {0.0f,  1.0f,   -1.0f,  2.0f,    3.0f,   255.0f,
                                     -128.0f, 0.75f, 0.375f, 1.5f,  -0.0078125f,
                                     65536.0f};
  for (float v : values) {
    EXPECT_EQ(Bf16ToFloat(FloatToBf16(v)), v) << v;
  }
}

// An independent reference: pick the nearer of the two bf16 neighbours by
// exact double arithmetic, and the even one on a tie.
bf16_t ReferenceRound(float f) {
  const uint32_t bits = ToBits(f);
  const uint32_t lo = bits & 0xFFFF0000u;         // truncated toward zero
  const uint32_t hi = lo + 0x00010000u;           // next away from zero
  const double df = std::fabs(static_cast<double>(f));
  const double dlo = std::fabs(static_cast<double>(FromBits(lo)));
  const double dhi = std::fabs(static_cast<double>(FromBits(hi)));
  const double below = df - dlo;
  const double above = dhi - df;
  uint32_t pick;
  if (below < above) {
    pick = lo;
  } else if (above < below) {
    pick = hi;
  } else {
    pick = ((lo >> 16) & 1u) == 0 ? lo : hi;
  }
  return static_cast<bf16_t>(pick >> 16);
}

TEST(Bfloat16Test, MatchesNearestEvenReferenceOnRandomFloats) {
  std::mt19937 rng(12345);
  std::uniform_int_distribution<uint32_t> bits_dist;
  int checked = 0;
  while (checked < 200000) {
    uint32_t bits = bits_dist(rng);
    const uint32_t exponent = (bits >> 23) & 0xFFu;
    if (exponent >= 0xFEu) continue;  // keep away from Inf/NaN and overflow
    if ((checked & 7) == 0) bits = (bits & 0xFFFF0000u) | 0x8000u;  // many ties
    const float f = FromBits(bits);
    ASSERT_EQ(FloatToBf16(f), ReferenceRound(f)) << "float bits 0x" << std::hex << bits;
    ++checked;
  }
}

TEST(Bfloat16Test, ArrayConversionsMatchScalar) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  for (size_t n : {size_t{0}, size_t{1}, size_t{7}, size_t{64}, size_t{1001}}) {
    std::vector<float> in(n);
    for (float& x : in) x = normal(rng);
    std::vector<bf16_t> half(n + 1, 0xABCD);
    FloatsToBf16(in.data(), n, half.data());
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(half[i], FloatToBf16(in[i])) << i;
    EXPECT_EQ(half[n], 0xABCD) << "wrote past the end";

    std::vector<float> back(n + 1, -7.0f);
    Bf16ToFloats(half.data(), n, back.data());
    for (size_t i = 0; i < n; ++i) {
      ASSERT_EQ(back[i], Bf16ToFloat(half[i])) << i;
      // bf16 keeps 8 significant bits: relative error <= 2^-9.
      EXPECT_LE(std::fabs(back[i] - in[i]), std::ldexp(std::fabs(in[i]), -8)) << i;
    }
    EXPECT_EQ(back[n], -7.0f) << "wrote past the end";
  }
}

TEST(Bfloat16Test, LoadAsFloat) {
  const float f[3] = {1.5f, -2.25f, 0.1f};
  const bf16_t h[3] = {0x3FC0, 0xC010, 0x3DCD};
  EXPECT_EQ(LoadAsFloat(f, 0), 1.5f);
  EXPECT_EQ(LoadAsFloat(f, 2), 0.1f);
  EXPECT_EQ(LoadAsFloat(h, 0), 1.5f);
  EXPECT_EQ(LoadAsFloat(h, 1), -2.25f);
  EXPECT_EQ(LoadAsFloat(h, 2), Bf16ToFloat(0x3DCD));
}

}  // namespace
}  // namespace gaptrain
