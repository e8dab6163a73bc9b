#include "services/learn/epoch_order.h"

#include <gtest/gtest.h>

#include <vector>

namespace gaptrain {
namespace {

bool IsPermutation(const std::vector<uint32_t>& order, uint32_t n) {
  if (order.size() != n) return false;
  std::vector<bool> seen(n, false);
  for (uint32_t v : order) {
    if (v >= n || seen[v]) return false;
    seen[v] = true;
  }
  return true;
}

TEST(EpochPermutationTest, IsAPermutation) {
  for (uint32_t n : {0u, 1u, 2u, 3u, 7u, 1000u, 60000u}) {
    EXPECT_TRUE(IsPermutation(EpochPermutation(1, 0, n), n)) << n;
    EXPECT_TRUE(IsPermutation(EpochPermutation(99, 12, n), n)) << n;
  }
}

TEST(EpochPermutationTest, DeterministicPerSeedAndEpoch) {
  EXPECT_EQ(EpochPermutation(5, 3, 60000), EpochPermutation(5, 3, 60000));
  EXPECT_NE(EpochPermutation(5, 3, 60000), EpochPermutation(5, 4, 60000));
  EXPECT_NE(EpochPermutation(5, 3, 60000), EpochPermutation(6, 3, 60000));
  // Swapping seed and epoch gives a different order too.
  EXPECT_NE(EpochPermutation(3, 5, 60000), EpochPermutation(5, 3, 60000));
  // Not the identity.
  std::vector<uint32_t> identity(60000);
  for (uint32_t i = 0; i < 60000; ++i) identity[i] = i;
  EXPECT_NE(EpochPermutation(0, 0, 60000), identity);
}

TEST(EpochPermutationTest, EpochsAreUnrelated) {
  // Consecutive epochs agree on about one position in n, as independent
  // uniform permutations would.
  const uint32_t n = 60000;
  std::vector<uint32_t> a = EpochPermutation(1, 0, n);
  std::vector<uint32_t> b = EpochPermutation(1, 1, n);
  int same = 0;
  for (uint32_t i = 0; i < n; ++i) same += a[i] == b[i];
  EXPECT_LT(same, 10);
}

TEST(EpochPermutationTest, RoughlyUniform) {
  // Where sample 0 lands over many epochs of n = 8: each position about
  // 4000 / 8 = 500 times (a 6-sigma band).
  std::vector<int> where(8, 0);
  for (uint64_t epoch = 0; epoch < 4000; ++epoch) {
    std::vector<uint32_t> order = EpochPermutation(17, epoch, 8);
    for (uint32_t p = 0; p < 8; ++p) {
      if (order[p] == 0) ++where[p];
    }
  }
  for (int count : where) {
    EXPECT_GT(count, 500 - 125);
    EXPECT_LT(count, 500 + 125);
  }
}

// Golden values: these change only if the algorithm changes, which would
// change the sample order of every job (and of a job resumed across
// versions). The values were computed by an independent Python
// implementation of splitmix64 + xoshiro256** + Lemire + Fisher-Yates.
TEST(EpochPermutationTest, GoldenValues) {
  EXPECT_EQ(EpochPermutation(42, 0, 10),
            (std::vector<uint32_t>{5, 6, 9, 3, 0, 8, 7, 4, 2, 1}));
  EXPECT_EQ(EpochPermutation(42, 1, 10),
            (std::vector<uint32_t>{9, 7, 6, 4, 2, 0, 8, 5, 1, 3}));
  EXPECT_EQ(EpochPermutation(7, 0, 10),
            (std::vector<uint32_t>{7, 4, 0, 8, 5, 9, 6, 1, 3, 2}));
  EXPECT_EQ(EpochPermutation(1, 3, 16),
            (std::vector<uint32_t>{9, 14, 1, 0, 3, 2, 12, 7, 8, 15, 13, 10, 11, 4, 6, 5}));
  std::vector<uint32_t> big = EpochPermutation(2024, 5, 60000);
  EXPECT_EQ(std::vector<uint32_t>(big.begin(), big.begin() + 8),
            (std::vector<uint32_t>{4176, 34847, 47007, 30560, 25060, 2313, 46426, 13246}));
  EXPECT_EQ(std::vector<uint32_t>(big.end() - 3, big.end()),
            (std::vector<uint32_t>{42263, 4086, 33544}));
}

TEST(Xoshiro256Test, GoldenOutputs) {
  Xoshiro256 a(0, 0);
  EXPECT_EQ(a.Next(), 0xfb5405f7bd79c540ull);
  EXPECT_EQ(a.Next(), 0x780c98e26cea5883ull);
  EXPECT_EQ(a.Next(), 0x2a146e0980febc66ull);
  Xoshiro256 b(42, 7);
  EXPECT_EQ(b.Next(), 0x24bfb39aeb008c15ull);
  EXPECT_EQ(b.Next(), 0xd858489e7fc02496ull);
}

TEST(Xoshiro256Test, BelowStaysInRange) {
  Xoshiro256 rng(3, 4);
  EXPECT_EQ(rng.Below(1), 0u);
  for (uint32_t bound : {2u, 3u, 10u, 60000u, 0x80000001u, 0xFFFFFFFFu}) {
    for (int i = 0; i < 1000; ++i) ASSERT_LT(rng.Below(bound), bound) << bound;
  }
}

void ExpectShardsCover(uint32_t n, uint32_t workers) {
  std::vector<int> hits(n, 0);
  uint32_t expected_begin = 0;
  const uint32_t small = n / workers;
  for (uint32_t w = 0; w < workers; ++w) {
    SampleRange r = ShardRange(w, workers, n);
    ASSERT_EQ(r.begin, expected_begin) << "n=" << n << " workers=" << workers << " w=" << w;
    ASSERT_LE(r.begin, r.end);
    ASSERT_TRUE(r.size() == small || r.size() == small + 1)
        << "n=" << n << " workers=" << workers << " w=" << w << " size=" << r.size();
    for (uint32_t p = r.begin; p < r.end; ++p) ++hits[p];
    expected_begin = r.end;
  }
  EXPECT_EQ(expected_begin, n) << "n=" << n << " workers=" << workers;
  for (uint32_t p = 0; p < n; ++p) ASSERT_EQ(hits[p], 1) << "n=" << n << " position " << p;
}

TEST(ShardRangeTest, CoversEveryPositionOnce) {
  for (uint32_t n : {0u, 1u, 7u, 60000u}) {
    for (uint32_t workers : {1u, 2u, 3u, 7u, 8u, 13u, 64u}) ExpectShardsCover(n, workers);
  }
}

TEST(ShardRangeTest, BalancedExamples) {
  // 7 over 3: 3, 2, 2.
  EXPECT_EQ(ShardRange(0, 3, 7).begin, 0u);
  EXPECT_EQ(ShardRange(0, 3, 7).end, 3u);
  EXPECT_EQ(ShardRange(1, 3, 7).begin, 3u);
  EXPECT_EQ(ShardRange(1, 3, 7).end, 5u);
  EXPECT_EQ(ShardRange(2, 3, 7).begin, 5u);
  EXPECT_EQ(ShardRange(2, 3, 7).end, 7u);
  // More workers than samples: the last ones get nothing.
  EXPECT_TRUE(ShardRange(5, 8, 1).empty());
  EXPECT_EQ(ShardRange(0, 8, 1).size(), 1u);
}

TEST(ShardRangeTest, OutOfRangeWorkerGetsEmptyRange) {
  SampleRange r = ShardRange(3, 3, 100);
  EXPECT_TRUE(r.empty());
  EXPECT_EQ(r.begin, 100u);
  r = ShardRange(0, 0, 100);
  EXPECT_TRUE(r.empty());
  // Large n: no overflow in worker * (n / workers).
  r = ShardRange(0xFFFFFFFEu, 0xFFFFFFFFu, 0xFFFFFFFFu);
  EXPECT_EQ(r.begin, 0xFFFFFFFEu);
  EXPECT_EQ(r.end, 0xFFFFFFFFu);
}

}  // namespace
}  // namespace gaptrain
