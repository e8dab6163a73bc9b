#include "services/learn/batch_loader.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace gaptrain {
namespace {

// 5 images of 2 channels of 2x3; pixel k of channel c of image i is
// i * 40 + c * 10 + k, and its label is (i * 3) % 10.
Dataset SmallDataset() {
  Dataset d;
  d.channels = 2;
  d.height = 2;
  d.width = 3;
  for (int i = 0; i < 5; ++i) {
    for (int c = 0; c < 2; ++c) {
      for (int k = 0; k < 6; ++k) d.images.push_back(static_cast<uint8_t>(i * 40 + c * 10 + k));
    }
    d.labels.push_back(static_cast<uint8_t>((i * 3) % 10));
  }
  d.mean = {0.5f, 0.25f};
  d.stddev = {0.25f, 0.5f};
  return d;
}

float Expected(const Dataset& d, int c, int v) {
  return (v / 255.0f - d.mean[c]) / d.stddev[c];
}

TEST(BatchLoaderTest, BufferSizes) {
  Dataset d = SmallDataset();
  BatchLoader loader(d, 4);
  EXPECT_EQ(loader.batch_size(), 4);
  EXPECT_EQ(loader.image_floats(), 12u);
  EXPECT_EQ(loader.images_buffer_size(), 48u);
  EXPECT_EQ(loader.labels_buffer_size(), 4u);
}

TEST(BatchLoaderTest, NormalisesKnownPixels) {
  Dataset d = SmallDataset();
  d.images[0] = 0;
  d.images[1] = 255;
  d.images[6] = 128;  // channel 1, pixel 0 of image 0
  BatchLoader loader(d, 2);
  std::vector<float> images(loader.images_buffer_size());
  std::vector<int64_t> labels(loader.labels_buffer_size());
  const uint32_t indices[] = {0, 3};
  ASSERT_EQ(loader.Fill(indices, 2, images.data(), labels.data()), 2u);

  EXPECT_NEAR(images[0], (0.0f - 0.5f) / 0.25f, 1e-6);   // -2
  EXPECT_NEAR(images[1], (1.0f - 0.5f) / 0.25f, 1e-6);   // 2
  EXPECT_NEAR(images[6], (128 / 255.0f - 0.25f) / 0.5f, 1e-6);
  // Every value of both samples, and the second sample is image 3.
  for (int b = 0; b < 2; ++b) {
    const uint8_t* src = d.image(indices[b]);
    for (int c = 0; c < 2; ++c) {
      for (int k = 0; k < 6; ++k) {
        ASSERT_NEAR(images[b * 12 + c * 6 + k], Expected(d, c, src[c * 6 + k]), 1e-6)
            << "sample " << b << " channel " << c << " pixel " << k;
      }
    }
  }
  EXPECT_NEAR(images[12], Expected(d, 0, 120), 1e-6);
  EXPECT_EQ(labels[0], 0);
  EXPECT_EQ(labels[1], 9);
  EXPECT_FLOAT_EQ(loader.Normalized(1, 51), (0.2f - 0.25f) / 0.5f);
}

TEST(BatchLoaderTest, WritesOnlyIntoCallerBuffersAndNoMoreThanABatch) {
  Dataset d = SmallDataset();
  BatchLoader loader(d, 2);
  // One extra slot past each buffer, as a guard.
  std::vector<float> images(loader.images_buffer_size() + 1, -7.0f);
  std::vector<int64_t> labels(loader.labels_buffer_size() + 1, -7);
  const float* images_before = images.data();
  const int64_t* labels_before = labels.data();
  const uint32_t indices[] = {4, 1, 2};
  // Three indices, batch of two: only two are written.
  ASSERT_EQ(loader.Fill(indices, 3, images.data(), labels.data()), 2u);
  EXPECT_EQ(images.back(), -7.0f);
  EXPECT_EQ(labels.back(), -7);
  EXPECT_EQ(labels[0], 2);  // label of image 4
  EXPECT_EQ(labels[1], 3);
  // The same caller-owned memory is filled again; nothing was reallocated.
  ASSERT_EQ(loader.Fill(indices + 2, 1, images.data(), labels.data()), 1u);
  EXPECT_EQ(images.data(), images_before);
  EXPECT_EQ(labels.data(), labels_before);
  EXPECT_EQ(labels[0], 6);  // image 2
  EXPECT_NEAR(images[0], Expected(d, 0, 80), 1e-6);
  // A short batch leaves the rest of the buffers as they were.
  EXPECT_EQ(labels[1], 3);
  EXPECT_NEAR(images[12], Expected(d, 0, 40), 1e-6);
}

TEST(BatchIteratorTest, WalksARangeOfThePermutationWithAShortLastBatch) {
  Dataset d = SmallDataset();
  BatchLoader loader(d, 2);
  std::vector<uint32_t> order = EpochPermutation(9, 2, 5);
  std::vector<float> images(loader.images_buffer_size());
  std::vector<int64_t> labels(loader.labels_buffer_size());

  BatchIterator it(loader, order, SampleRange{0, 5});
  ASSERT_TRUE(it.status().ok()) << it.status().ToString();
  std::vector<size_t> sizes;
  std::vector<int64_t> seen_labels;
  while (!it.Done()) {
    size_t k = it.Next(images.data(), labels.data());
    sizes.push_back(k);
    for (size_t b = 0; b < k; ++b) seen_labels.push_back(labels[b]);
  }
  EXPECT_EQ(sizes, (std::vector<size_t>{2, 2, 1}));
  EXPECT_EQ(it.position(), 5u);
  EXPECT_EQ(it.remaining(), 0u);
  EXPECT_EQ(it.Next(images.data(), labels.data()), 0u);
  ASSERT_EQ(seen_labels.size(), 5u);
  for (size_t p = 0; p < 5; ++p) EXPECT_EQ(seen_labels[p], d.labels[order[p]]) << p;
  // The last batch was order[4].
  EXPECT_NEAR(images[0], Expected(d, 0, d.image(order[4])[0]), 1e-6);
}

TEST(BatchIteratorTest, ShardOfAnEpoch) {
  Dataset d = SmallDataset();
  BatchLoader loader(d, 8);
  std::vector<uint32_t> order = EpochPermutation(1, 0, 5);
  std::vector<float> images(loader.images_buffer_size());
  std::vector<int64_t> labels(loader.labels_buffer_size());
  SampleRange shard = ShardRange(1, 2, 5);  // [3, 5)
  BatchIterator it(loader, order, shard);
  EXPECT_EQ(it.position(), 3u);
  EXPECT_EQ(it.remaining(), 2u);
  EXPECT_EQ(it.Next(images.data(), labels.data()), 2u);
  EXPECT_EQ(labels[0], d.labels[order[3]]);
  EXPECT_EQ(labels[1], d.labels[order[4]]);
  EXPECT_TRUE(it.Done());

  BatchIterator empty(loader, order, SampleRange{2, 2});
  EXPECT_TRUE(empty.status().ok());
  EXPECT_TRUE(empty.Done());
  EXPECT_EQ(empty.Next(images.data(), labels.data()), 0u);
}

TEST(BatchIteratorTest, RejectsBadRangesAndIndices) {
  Dataset d = SmallDataset();
  BatchLoader loader(d, 2);
  std::vector<float> images(loader.images_buffer_size());
  std::vector<int64_t> labels(loader.labels_buffer_size());
  std::vector<uint32_t> order = EpochPermutation(1, 0, 5);

  BatchIterator past_end(loader, order, SampleRange{3, 6});
  EXPECT_EQ(past_end.status().code(), Status::Code::kOutOfRange);
  EXPECT_NE(past_end.status().message().find("[3, 6)"), std::string::npos);
  EXPECT_TRUE(past_end.Done());
  EXPECT_EQ(past_end.Next(images.data(), labels.data()), 0u);

  BatchIterator reversed(loader, order, SampleRange{4, 1});
  EXPECT_FALSE(reversed.status().ok());

  // An order for a larger dataset names samples this one lacks.
  std::vector<uint32_t> wrong = EpochPermutation(1, 0, 100);
  BatchIterator mismatch(loader, wrong, SampleRange{0, 100});
  EXPECT_EQ(mismatch.status().code(), Status::Code::kOutOfRange);
  EXPECT_NE(mismatch.status().message().find("the dataset has 5"), std::string::npos)
      << mismatch.status().message();
  EXPECT_EQ(mismatch.remaining(), 0u);
}

}  // namespace
}  // namespace gaptrain
