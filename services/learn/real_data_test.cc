// The real MNIST and Fashion-MNIST files of ../shared/data (SOURCES.md).
// Missing data fails these tests; it never skips them.

#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <string>
#include <vector>

#include "services/learn/batch_loader.h"
#include "services/learn/dataset.h"
#include "services/learn/epoch_order.h"
#include "services/testing/testdata_dir.h"

namespace gaptrain {
namespace {

std::string DataDir(const std::string& name) {
  std::string dir;
  Status s = FindSharedDataDir(&dir);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return dir + "/" + name;
}

std::array<size_t, 10> Histogram(const Dataset& d) {
  std::array<size_t, 10> h{};
  for (uint8_t l : d.labels) ++h.at(l);
  return h;
}

size_t Sum(const std::array<size_t, 10>& h) {
  size_t total = 0;
  for (size_t v : h) total += v;
  return total;
}

double PixelMean(const Dataset& d) {
  double sum = 0;
  for (uint8_t v : d.images) sum += v;
  return sum / 255.0 / static_cast<double>(d.images.size());
}

TEST(SharedDataDirTest, FindsTheDatasets) {
  std::string dir;
  Status s = FindSharedDataDir(&dir);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(SharedDataDir(), dir);
  EXPECT_EQ(dir.find("/shared/data"), dir.size() - 12) << dir;
}

TEST(RealMnistTest, TrainSplit) {
  const std::string dir = DataDir("mnist");
  Dataset train;
  const auto start = std::chrono::steady_clock::now();
  Status s = LoadDataset(DatasetFormat::kMnistIdx, dir, Split::kTrain, &train);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_TRUE(s.ok()) << s.ToString();
  std::printf("MNIST train loaded in %.3f s\n", seconds);

  ASSERT_EQ(train.size(), 60000u);
  EXPECT_EQ(train.channels, 1);
  EXPECT_EQ(train.height, 28);
  EXPECT_EQ(train.width, 28);
  EXPECT_EQ(train.images.size(), 60000u * 784u);
  EXPECT_EQ(train.labels[0], 5);
  EXPECT_EQ(train.labels[1], 0);
  EXPECT_EQ(train.labels[2], 4);
  const std::array<size_t, 10> h = Histogram(train);
  EXPECT_EQ(Sum(h), train.size());
  EXPECT_EQ(h[1], 6742u);  // the most frequent digit
  EXPECT_EQ(h[5], 5421u);  // the least frequent

  ASSERT_EQ(train.mean.size(), 1u);
  EXPECT_NEAR(train.mean[0], 0.1307, 1e-3);
  EXPECT_NEAR(train.stddev[0], 0.3081, 1e-3);
  EXPECT_NEAR(PixelMean(train), train.mean[0], 1e-6);
}

TEST(RealMnistTest, TestSplitUsesTrainStatistics) {
  const std::string dir = DataDir("mnist");
  Dataset test;
  Status s = LoadDataset(DatasetFormat::kMnistIdx, dir, Split::kTest, &test);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_EQ(test.size(), 10000u);
  EXPECT_EQ(test.height, 28);
  EXPECT_EQ(test.width, 28);
  EXPECT_EQ(test.labels[0], 7);
  EXPECT_EQ(test.labels[1], 2);
  const std::array<size_t, 10> h = Histogram(test);
  EXPECT_EQ(Sum(h), test.size());
  EXPECT_EQ(h[1], 1135u);
  // The train split's statistics, not the test split's own (0.1325).
  EXPECT_NEAR(test.mean[0], 0.1307, 1e-3);
  EXPECT_NEAR(PixelMean(test), 0.1325, 1e-3);
}

TEST(RealMnistTest, BatchesOfAnEpoch) {
  const std::string dir = DataDir("mnist");
  Dataset train;
  Status s = LoadDataset(DatasetFormat::kMnistIdx, dir, Split::kTrain, &train);
  ASSERT_TRUE(s.ok()) << s.ToString();
  BatchLoader loader(train, 128);
  std::vector<float> images(loader.images_buffer_size());
  std::vector<int64_t> labels(loader.labels_buffer_size());
  std::vector<uint32_t> order = EpochPermutation(1, 0, static_cast<uint32_t>(train.size()));
  // The whole epoch: the normalised pixels average to about 0.
  BatchIterator it(loader, order, SampleRange{0, static_cast<uint32_t>(train.size())});
  ASSERT_TRUE(it.status().ok());
  double sum = 0;
  size_t batches = 0, samples = 0;
  std::array<size_t, 10> h{};
  while (size_t k = it.Next(images.data(), labels.data())) {
    ++batches;
    samples += k;
    for (size_t i = 0; i < k * 784; ++i) sum += images[i];
    for (size_t i = 0; i < k; ++i) ++h.at(static_cast<size_t>(labels[i]));
  }
  EXPECT_EQ(batches, 469u);  // 468 full batches and one of 96
  EXPECT_EQ(samples, 60000u);
  EXPECT_EQ(h, Histogram(train));
  EXPECT_NEAR(sum / (60000.0 * 784.0), 0.0, 1e-4);
}

TEST(RealFashionMnistTest, BalancedSplits) {
  const std::string dir = DataDir("fashion-mnist");
  Dataset train, test;
  Status s = LoadDataset(DatasetFormat::kMnistIdx, dir, Split::kTrain, &train);
  ASSERT_TRUE(s.ok()) << s.ToString();
  s = LoadDataset(DatasetFormat::kMnistIdx, dir, Split::kTest, &test);
  ASSERT_TRUE(s.ok()) << s.ToString();

  ASSERT_EQ(train.size(), 60000u);
  ASSERT_EQ(test.size(), 10000u);
  EXPECT_EQ(train.height, 28);
  EXPECT_EQ(train.width, 28);
  EXPECT_EQ(train.channels, 1);
  const std::array<size_t, 10> train_h = Histogram(train);
  const std::array<size_t, 10> test_h = Histogram(test);
  for (int c = 0; c < 10; ++c) {
    EXPECT_EQ(train_h[c], 6000u) << "class " << c;
    EXPECT_EQ(test_h[c], 1000u) << "class " << c;
  }
  // Our split (SOURCES.md) gives 0.2861 / 0.3528, close to the official
  // split's 0.2860 / 0.3530.
  EXPECT_NEAR(train.mean[0], 0.2860, 1e-3);
  EXPECT_NEAR(train.stddev[0], 0.3530, 1e-3);
  EXPECT_EQ(test.mean, train.mean);
  EXPECT_EQ(test.stddev, train.stddev);
}

}  // namespace
}  // namespace gaptrain
