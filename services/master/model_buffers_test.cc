#include "services/master/model_buffers.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>

namespace gaptrain {
namespace {

BufferLayout TwoFloatsAndACount() {
  BufferLayout layout;
  EXPECT_TRUE(layout.Add("bn.running_mean", {2}, BufferDType::kFloat32).ok());
  EXPECT_TRUE(layout.Add("bn.num_batches_tracked", {}, BufferDType::kInt64).ok());
  return layout;
}

std::string Values(float a, float b, int64_t count) {
  std::string bytes(16, '\0');
  std::memcpy(&bytes[0], &a, 4);
  std::memcpy(&bytes[4], &b, 4);
  std::memcpy(&bytes[8], &count, 8);
  return bytes;
}

TEST(ModelBuffersTest, TheFirstSendReplacesTheInitialValuesThenTrainersAverage) {
  ModelBuffers buffers(TwoFloatsAndACount(), Values(0, 1, 0));
  std::string read;
  uint64_t merges = 7;
  buffers.Read(&read, &merges);
  EXPECT_EQ(read, Values(0, 1, 0));
  EXPECT_EQ(merges, 0u);
  ASSERT_TRUE(buffers.Merge(Values(4, 8, 3), 2, &merges).ok());
  EXPECT_EQ(merges, 1u);
  buffers.Read(&read, &merges);
  EXPECT_EQ(read, Values(4, 8, 3));
  // Two trainers: half way.
  ASSERT_TRUE(buffers.Merge(Values(2, 0, 5), 2).ok());
  buffers.Read(&read, &merges);
  EXPECT_EQ(read, Values(3, 4, 5));
  EXPECT_EQ(merges, 2u);
}

TEST(ModelBuffersTest, RefusesAWrongSizeAndNonFiniteValuesChangingNothing) {
  ModelBuffers buffers(TwoFloatsAndACount(), Values(0, 1, 0));
  Status s = buffers.Merge(std::string(15, '\0'), 1);
  EXPECT_EQ(s.message(), "buffers: 15 bytes, the model's buffers hold 16");
  s = buffers.Merge(Values(1, std::numeric_limits<float>::quiet_NaN(), 1), 1);
  EXPECT_EQ(s.message(), "buffers: bn.running_mean holds a NaN or an infinity");
  s = buffers.Merge(Values(std::numeric_limits<float>::infinity(), 0, 1), 1);
  EXPECT_FALSE(s.ok());
  std::string read;
  uint64_t merges;
  buffers.Read(&read, &merges);
  EXPECT_EQ(read, Values(0, 1, 0));
  EXPECT_EQ(merges, 0u);
}

TEST(ModelBuffersTest, AModelWithoutBuffersHoldsNothing) {
  ModelBuffers none(BufferLayout(), "");
  EXPECT_TRUE(none.Merge("", 1).ok());
  EXPECT_FALSE(none.Merge("x", 1).ok());
}

}  // namespace
}  // namespace gaptrain
