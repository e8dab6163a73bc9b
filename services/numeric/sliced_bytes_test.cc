#include "services/numeric/sliced_bytes.h"

#include <gtest/gtest.h>

#include <vector>

namespace gaptrain {
namespace {

std::vector<uint8_t> Bytes(size_t n) {
  std::vector<uint8_t> b(n);
  for (size_t i = 0; i < n; ++i) b[i] = static_cast<uint8_t>(i * 7 + 3);
  return b;
}

// `bytes` appended as pieces cut at `cuts` (ascending), with an empty
// piece in between that must be dropped.
SlicedBytes Cut(const std::vector<uint8_t>& bytes, const std::vector<size_t>& cuts) {
  SlicedBytes out;
  size_t begin = 0;
  for (size_t cut : cuts) {
    out.Append(bytes.data() + begin, cut - begin);
    out.Append(bytes.data() + cut, 0);
    begin = cut;
  }
  out.Append(bytes.data() + begin, bytes.size() - begin);
  return out;
}

TEST(SlicedBytesTest, CopyToJoinsThePieces) {
  const std::vector<uint8_t> bytes = Bytes(100);
  const SlicedBytes sliced = Cut(bytes, {1, 2, 50, 99});
  ASSERT_EQ(sliced.size(), 100u);
  std::vector<uint8_t> out(100);
  sliced.CopyTo(out.data());
  EXPECT_EQ(out, bytes);
}

TEST(SlicedBytesTest, CopyRangeReadsEveryRangeAcrossPieceBoundaries) {
  const std::vector<uint8_t> bytes = Bytes(64);
  const SlicedBytes sliced = Cut(bytes, {3, 4, 17, 40, 63});
  for (size_t begin = 0; begin <= bytes.size(); ++begin) {
    for (size_t end = begin; end <= bytes.size(); ++end) {
      std::vector<uint8_t> out(end - begin + 1, 0xEE);  // one guard byte
      sliced.CopyRange(begin, end - begin, out.data());
      ASSERT_TRUE(std::equal(bytes.begin() + begin, bytes.begin() + end, out.begin()))
          << begin << ".." << end;
      ASSERT_EQ(out.back(), 0xEE) << "wrote past the range " << begin << ".." << end;
    }
  }
}

TEST(SlicedBytesTest, AppendingAnotherRunContinuesItsOffsets) {
  const std::vector<uint8_t> bytes = Bytes(30);
  SlicedBytes head, tail;
  head.Append(bytes.data(), 4);
  head.Append(bytes.data() + 4, 6);
  tail.Append(bytes.data() + 10, 5);
  tail.Append(bytes.data() + 15, 15);
  head.Append(tail);
  ASSERT_EQ(head.size(), 30u);
  std::vector<uint8_t> out(12);
  head.CopyRange(8, 12, out.data());
  EXPECT_TRUE(std::equal(bytes.begin() + 8, bytes.begin() + 20, out.begin()));
}

TEST(SlicedBytesTest, EmptyRunHasNothingToCopy) {
  SlicedBytes empty;
  EXPECT_TRUE(empty.empty());
  EXPECT_EQ(empty.size(), 0u);
  uint8_t guard = 0xAB;
  empty.CopyRange(0, 0, &guard);
  empty.CopyTo(&guard);
  EXPECT_EQ(guard, 0xAB);
}

}  // namespace
}  // namespace gaptrain
