#include "services/engine/buffer_layout.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

namespace gaptrain {
namespace {

// A BatchNorm2d(2)'s buffers.
BufferLayout BatchNorm() {
  BufferLayout layout;
  EXPECT_TRUE(layout.Add("bn.running_mean", {2}, BufferDType::kFloat32).ok());
  EXPECT_TRUE(layout.Add("bn.running_var", {2}, BufferDType::kFloat32).ok());
  EXPECT_TRUE(layout.Add("bn.num_batches_tracked", {}, BufferDType::kInt64).ok());
  return layout;
}

struct BatchNormValues {
  float mean[2];
  float var[2];
  int64_t batches;
};

std::vector<uint8_t> Pack(const BatchNormValues& v) {
  std::vector<uint8_t> bytes(24);
  std::memcpy(bytes.data(), v.mean, 8);
  std::memcpy(bytes.data() + 8, v.var, 8);
  std::memcpy(bytes.data() + 16, &v.batches, 8);
  return bytes;
}

BatchNormValues Unpack(const std::vector<uint8_t>& bytes) {
  BatchNormValues v;
  std::memcpy(v.mean, bytes.data(), 8);
  std::memcpy(v.var, bytes.data() + 8, 8);
  std::memcpy(&v.batches, bytes.data() + 16, 8);
  return v;
}

TEST(BufferLayoutTest, PacksBuffersBackToBackInTheirDtypes) {
  const BufferLayout layout = BatchNorm();
  ASSERT_EQ(layout.buffers().size(), 3u);
  EXPECT_EQ(layout.buffers()[1].offset, 8u);
  EXPECT_EQ(layout.buffers()[2].offset, 16u);
  EXPECT_EQ(layout.buffers()[2].bytes, 8u);
  EXPECT_EQ(layout.bytes(), 24u);
}

TEST(BufferLayoutTest, RefusesWhatCannotBePacked) {
  BufferLayout layout = BatchNorm();
  EXPECT_FALSE(layout.Add("", {1}, BufferDType::kFloat32).ok());
  EXPECT_FALSE(layout.Add("bn.running_mean", {1}, BufferDType::kFloat32).ok());
  EXPECT_FALSE(layout.Add("neg", {-1}, BufferDType::kFloat32).ok());
  const Status big = layout.Add("mask", {1 << 20, 2}, BufferDType::kFloat32);
  EXPECT_NE(big.message().find("more than 4 MiB"), std::string::npos) << big.ToString();
  const Status huge = layout.Add("huge", {int64_t{1} << 40, int64_t{1} << 40},
                                 BufferDType::kFloat64);
  EXPECT_FALSE(huge.ok());
  EXPECT_EQ(layout.bytes(), 24u);  // nothing refused was added
}

TEST(BufferLayoutTest, DifferencesNameTheFirstBufferThatDiffers) {
  BufferLayout other;
  ASSERT_TRUE(other.Add("bn.running_mean", {2}, BufferDType::kFloat32).ok());
  ASSERT_TRUE(other.Add("bn.running_var", {2}, BufferDType::kFloat64).ok());
  EXPECT_EQ(BatchNorm().DifferenceFrom(other),
            "buffer 1 is bn.running_var [2] float32 here, bn.running_var [2] float64 there");
  EXPECT_EQ(BatchNorm().DifferenceFrom(BatchNorm()), "");
  EXPECT_TRUE(BatchNorm() == BatchNorm());
  EXPECT_EQ(BufferLayout().DifferenceFrom(BatchNorm()), "0 buffers here, 3 there");
}

TEST(BufferLayoutTest, MergingAveragesFloatsAndKeepsTheLargerCount) {
  const BufferLayout layout = BatchNorm();
  std::vector<uint8_t> master = Pack({{0, 0}, {1, 1}, 0});
  // The first send is taken as it is.
  MergeBufferValues(layout, Pack({{2, 4}, {3, 5}, 10}).data(), 1.0, master.data());
  BatchNormValues v = Unpack(master);
  EXPECT_EQ(v.mean[0], 2);
  EXPECT_EQ(v.var[1], 5);
  EXPECT_EQ(v.batches, 10);
  // Two trainers: half way towards the next one's.
  MergeBufferValues(layout, Pack({{4, 0}, {1, 5}, 7}).data(), 0.5, master.data());
  v = Unpack(master);
  EXPECT_EQ(v.mean[0], 3);
  EXPECT_EQ(v.mean[1], 2);
  EXPECT_EQ(v.var[0], 2);
  EXPECT_EQ(v.var[1], 5);
  EXPECT_EQ(v.batches, 10);  // the larger count stays
}

TEST(BufferLayoutTest, DtypeNamesRoundTrip) {
  for (BufferDType d : {BufferDType::kFloat32, BufferDType::kFloat64, BufferDType::kInt64,
                        BufferDType::kInt32, BufferDType::kUint8, BufferDType::kBool}) {
    BufferDType back;
    ASSERT_TRUE(ParseBufferDType(BufferDTypeName(d), &back));
    EXPECT_EQ(back, d);
  }
  BufferDType unused;
  EXPECT_FALSE(ParseBufferDType("float16", &unused));
}

}  // namespace
}  // namespace gaptrain
