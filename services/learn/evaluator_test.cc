// EvaluateModel on a synthetic split, its errors, and an end-to-end run:
// an mlp trained by hand-written SGD on the real MNIST train split
// (../shared/data; missing data fails the test) must reach 90% on test.

#include "services/learn/evaluator.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <random>
#include <vector>

#include "services/learn/batch_loader.h"
#include "services/learn/compute_threads.h"
#include "services/learn/dataset.h"
#include "services/learn/epoch_order.h"
#include "services/testing/testdata_dir.h"

namespace gaptrain {
namespace {

// n random channels x side x side images with random labels, normalised by their own
// statistics.
Dataset RandomDataset(size_t n, int64_t channels, int64_t side, uint32_t seed) {
  Dataset d;
  d.channels = channels;
  d.height = side;
  d.width = side;
  std::mt19937 gen(seed);
  d.images.resize(n * d.image_size());
  for (uint8_t& v : d.images) v = static_cast<uint8_t>(gen() & 0xff);
  for (size_t i = 0; i < n; ++i) d.labels.push_back(static_cast<uint8_t>(gen() % 10));
  ComputeChannelStats(d.images.data(), n, channels, static_cast<size_t>(side * side), &d.mean,
                      &d.stddev);
  return d;
}

std::unique_ptr<Model> Mlp(uint64_t seed, int64_t channels = 1, int64_t side = 28) {
  std::unique_ptr<Model> model;
  Status s = Model::CreateBuiltin("mlp", ModelInput{channels, side, side, 10}, seed, &model);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return model;
}

TEST(EvaluatorTest, MatchesOneBigBatch) {
  const Dataset d = RandomDataset(50, 1, 28, 1);
  auto model = Mlp(1);
  EvalResult result;
  Status s = EvaluateModel(model.get(), d, 7, &result);  // 7 batches, the last of 1
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(result.samples, 50);

  BatchLoader loader(d, 50);
  std::vector<float> images(loader.images_buffer_size());
  std::vector<int64_t> labels(loader.labels_buffer_size());
  std::vector<uint32_t> all(50);
  for (uint32_t i = 0; i < 50; ++i) all[i] = i;
  ASSERT_EQ(loader.Fill(all.data(), 50, images.data(), labels.data()), 50u);
  double loss_sum = 0;
  int64_t correct = 0;
  model->Evaluate(images.data(), labels.data(), 50, &loss_sum, &correct);
  EXPECT_NEAR(result.loss, loss_sum / 50, 1e-5);
  EXPECT_DOUBLE_EQ(result.accuracy, correct / 50.0);
  EXPECT_GT(result.loss, 1.0);  // an untrained net on random labels
  EXPECT_TRUE(std::isfinite(result.loss));

  // The same with a batch larger than the split.
  EvalResult big;
  ASSERT_TRUE(EvaluateModel(model.get(), d, 1000, &big).ok());
  EXPECT_EQ(big.samples, 50);
  EXPECT_DOUBLE_EQ(big.accuracy, result.accuracy);
  EXPECT_NEAR(big.loss, result.loss, 1e-5);
}

TEST(EvaluatorTest, Errors) {
  auto model = Mlp(2);
  EvalResult result;
  result.samples = 99;

  const Dataset cifar_shaped = RandomDataset(4, 3, 32, 2);
  Status s = EvaluateModel(model.get(), cifar_shaped, 8, &result);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(s.message().find("[3, 32, 32]"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("[1, 28, 28]"), std::string::npos) << s.message();
  EXPECT_EQ(result.samples, 0);

  const Dataset d = RandomDataset(4, 1, 28, 3);
  s = EvaluateModel(model.get(), d, 0, &result);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(s.message().find("batch_size"), std::string::npos) << s.message();

  const Dataset empty = RandomDataset(0, 1, 28, 4);
  s = EvaluateModel(model.get(), empty, 8, &result);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
}

TEST(MnistTrainingTest, MlpReachesNinetyPercent) {
  std::string dir;
  Status s = FindSharedDataDir(&dir);
  ASSERT_TRUE(s.ok()) << s.ToString();
  Dataset train, test;
  s = LoadDataset(DatasetFormat::kMnistIdx, dir + "/mnist", Split::kTrain, &train);
  ASSERT_TRUE(s.ok()) << s.ToString();
  s = LoadDataset(DatasetFormat::kMnistIdx, dir + "/mnist", Split::kTest, &test);
  ASSERT_TRUE(s.ok()) << s.ToString();

  SetComputeThreads(1);  // robust when other builds share the cores
  auto model = Mlp(2024);
  const int64_t kBatch = 64;
  const int kSteps = 300;
  const float kLearningRate = 0.1f;
  BatchLoader loader(train, kBatch);
  const std::vector<uint32_t> order =
      EpochPermutation(7, 0, static_cast<uint32_t>(train.size()));
  BatchIterator it(loader, order, SampleRange{0, static_cast<uint32_t>(order.size())});
  std::vector<float> images(loader.images_buffer_size());
  std::vector<int64_t> labels(loader.labels_buffer_size());

  const auto start = std::chrono::steady_clock::now();
  float first_loss = 0, last_loss = 0;
  const size_t p = model->layout().size();
  for (int step = 0; step < kSteps; ++step) {
    const size_t n = it.Next(images.data(), labels.data());
    ASSERT_EQ(n, static_cast<size_t>(kBatch)) << it.status().ToString();
    const float loss = model->ComputeGradient(images.data(), labels.data(), kBatch);
    ASSERT_TRUE(std::isfinite(loss)) << "step " << step;
    if (step == 0) first_loss = loss;
    last_loss = loss;
    float* w = model->parameters();
    const float* g = model->gradients();
    for (size_t i = 0; i < p; ++i) w[i] -= kLearningRate * g[i];
  }
  const double train_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  EvalResult result;
  const auto eval_start = std::chrono::steady_clock::now();
  s = EvaluateModel(model.get(), test, 1000, &result);
  const double eval_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - eval_start).count();
  ASSERT_TRUE(s.ok()) << s.ToString();
  std::printf(
      "mlp, %d SGD steps of %d (lr %.2f): loss %.3f -> %.3f in %.2f s (%.2f ms/step); "
      "test accuracy %.4f, loss %.4f over %lld samples in %.2f s\n",
      kSteps, static_cast<int>(kBatch), kLearningRate, first_loss, last_loss, train_s,
      1000 * train_s / kSteps, result.accuracy, result.loss,
      static_cast<long long>(result.samples), eval_s);
  EXPECT_EQ(result.samples, 10000);
  EXPECT_GE(result.accuracy, 0.90);
  EXPECT_LT(result.loss, 0.4);
}

}  // namespace
}  // namespace gaptrain
