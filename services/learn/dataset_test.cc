#include "services/learn/dataset.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <zlib.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "services/testing/test_files.h"

namespace gaptrain {
namespace {


std::string BigEndian32(uint32_t v) {
  std::string s(4, '\0');
  s[0] = static_cast<char>(v >> 24);
  s[1] = static_cast<char>(v >> 16);
  s[2] = static_cast<char>(v >> 8);
  s[3] = static_cast<char>(v);
  return s;
}

// An IDX3 image file's bytes: header (magic, count, rows, cols), then the
// first `stored` images of pixel i*7 + k (mod 256) for byte k of image i.
std::string IdxImages(uint32_t magic, uint32_t count, uint32_t rows, uint32_t cols,
                      uint32_t stored) {
  std::string s = BigEndian32(magic) + BigEndian32(count) + BigEndian32(rows) + BigEndian32(cols);
  for (uint32_t i = 0; i < stored; ++i) {
    for (uint32_t k = 0; k < rows * cols; ++k) s += static_cast<char>((i * 7 + k) & 0xFF);
  }
  return s;
}

std::string IdxLabels(uint32_t magic, const std::vector<uint8_t>& labels) {
  std::string s = BigEndian32(magic) + BigEndian32(static_cast<uint32_t>(labels.size()));
  for (uint8_t l : labels) s += static_cast<char>(l);
  return s;
}

std::vector<uint8_t> CyclicLabels(size_t n) {
  std::vector<uint8_t> labels(n);
  for (size_t i = 0; i < n; ++i) labels[i] = static_cast<uint8_t>((i * 3) % 10);
  return labels;
}

// A well-formed 4x5 IDX dataset: `train` and `test` images.
void WriteIdxDataset(const std::string& dir, uint32_t train, uint32_t test) {
  WriteRaw(dir + "/train-images-idx3-ubyte", IdxImages(2051, train, 4, 5, train));
  WriteRaw(dir + "/train-labels-idx1-ubyte", IdxLabels(2049, CyclicLabels(train)));
  WriteRaw(dir + "/t10k-images-idx3-ubyte", IdxImages(2051, test, 4, 5, test));
  WriteRaw(dir + "/t10k-labels-idx1-ubyte", IdxLabels(2049, CyclicLabels(test)));
}

// CIFAR-10 binary records: label, then the R, G and B planes of 32x32.
// Record i of file f: label (i + f) % 10; R = (i + f) & 0xFF, G = p & 0xFF
// for pixel p, B = 255 - R.
std::string CifarRecords(int file, int records) {
  std::string s;
  for (int i = 0; i < records; ++i) {
    s += static_cast<char>((i + file) % 10);
    for (int p = 0; p < 1024; ++p) s += static_cast<char>((i + file) & 0xFF);
    for (int p = 0; p < 1024; ++p) s += static_cast<char>(p & 0xFF);
    for (int p = 0; p < 1024; ++p) s += static_cast<char>(255 - ((i + file) & 0xFF));
  }
  return s;
}

bool Contains(const Status& s, const std::string& text) {
  return s.message().find(text) != std::string::npos;
}

TEST(DatasetFormatTest, ParsesManifestSpellings) {
  DatasetFormat f = DatasetFormat::kCifar10Bin;
  ASSERT_TRUE(ParseDatasetFormat("mnist-idx", &f).ok());
  EXPECT_EQ(f, DatasetFormat::kMnistIdx);
  ASSERT_TRUE(ParseDatasetFormat("cifar10-bin", &f).ok());
  EXPECT_EQ(f, DatasetFormat::kCifar10Bin);
  EXPECT_STREQ(DatasetFormatName(DatasetFormat::kMnistIdx), "mnist-idx");
  EXPECT_STREQ(DatasetFormatName(DatasetFormat::kCifar10Bin), "cifar10-bin");

  Status s = ParseDatasetFormat("cifar-10", &f);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_TRUE(Contains(s, "data.format")) << s.message();
  EXPECT_TRUE(Contains(s, "'cifar-10'")) << s.message();
  EXPECT_TRUE(Contains(s, "mnist-idx | cifar10-bin")) << s.message();
}

TEST(ChannelStatsTest, ExactMeanAndPopulationStd) {
  // Two images, 2 channels of 2 pixels: channel 0 = {0, 255, 255, 0},
  // channel 1 = {51, 51, 51, 51} (constant: std falls back to 1).
  const uint8_t images[] = {0, 255, 51, 51, 255, 0, 51, 51};
  std::vector<float> mean, stddev;
  ComputeChannelStats(images, 2, 2, 2, &mean, &stddev);
  ASSERT_EQ(mean.size(), 2u);
  ASSERT_EQ(stddev.size(), 2u);
  EXPECT_FLOAT_EQ(mean[0], 0.5f);
  EXPECT_FLOAT_EQ(stddev[0], 0.5f);
  EXPECT_FLOAT_EQ(mean[1], 0.2f);
  EXPECT_FLOAT_EQ(stddev[1], 1.0f);
}

TEST(IdxTest, LoadsPlainAndGzipFiles) {
  const std::string dir = TestDir("dataset_test");
  WriteIdxDataset(dir, 12, 6);
  // The test split as .gz only: both spellings are accepted.
  WriteGzip(dir + "/t10k-images-idx3-ubyte.gz", ReadRaw(dir + "/t10k-images-idx3-ubyte"));
  WriteGzip(dir + "/t10k-labels-idx1-ubyte.gz", ReadRaw(dir + "/t10k-labels-idx1-ubyte"));
  std::remove((dir + "/t10k-images-idx3-ubyte").c_str());
  std::remove((dir + "/t10k-labels-idx1-ubyte").c_str());

  Dataset train, test;
  Status s = LoadDataset(DatasetFormat::kMnistIdx, dir, Split::kTrain, &train);
  ASSERT_TRUE(s.ok()) << s.ToString();
  s = LoadDataset(DatasetFormat::kMnistIdx, dir, Split::kTest, &test);
  ASSERT_TRUE(s.ok()) << s.ToString();

  EXPECT_EQ(train.size(), 12u);
  EXPECT_EQ(test.size(), 6u);
  EXPECT_EQ(train.channels, 1);
  EXPECT_EQ(train.height, 4);
  EXPECT_EQ(train.width, 5);
  EXPECT_EQ(train.num_classes, 10);
  EXPECT_EQ(train.image_size(), 20u);
  ASSERT_EQ(train.images.size(), 12u * 20u);
  EXPECT_EQ(train.labels[4], 2);
  EXPECT_EQ(train.image(3)[5], 3 * 7 + 5);
  EXPECT_EQ(test.image(5)[19], 5 * 7 + 19);

  // Both splits carry the train split's statistics.
  std::vector<float> mean, stddev;
  ComputeChannelStats(train.images.data(), train.size(), 1, 20, &mean, &stddev);
  ASSERT_EQ(train.mean.size(), 1u);
  EXPECT_EQ(train.mean, mean);
  EXPECT_EQ(train.stddev, stddev);
  EXPECT_EQ(test.mean, mean);
  EXPECT_EQ(test.stddev, stddev);
  std::vector<float> test_mean, test_stddev;
  ComputeChannelStats(test.images.data(), test.size(), 1, 20, &test_mean, &test_stddev);
  EXPECT_NE(test_mean, mean);  // so the check above means something
}

TEST(CifarTest, LoadsTrainBatchesInOrderAndTestBatch) {
  const std::string dir = TestDir("dataset_test");
  WriteRaw(dir + "/data_batch_1.bin", CifarRecords(1, 20));
  WriteRaw(dir + "/data_batch_2.bin", CifarRecords(2, 20));
  WriteRaw(dir + "/test_batch.bin", CifarRecords(100, 20));
  ASSERT_EQ(ReadRaw(dir + "/data_batch_1.bin").size(), 20u * 3073u);

  Dataset train;
  Status s = LoadDataset(DatasetFormat::kCifar10Bin, dir, Split::kTrain, &train);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(train.size(), 40u);
  EXPECT_EQ(train.channels, 3);
  EXPECT_EQ(train.height, 32);
  EXPECT_EQ(train.width, 32);
  ASSERT_EQ(train.images.size(), 40u * 3072u);
  for (size_t n = 0; n < 40; ++n) {
    const int file = n < 20 ? 1 : 2;
    const int i = static_cast<int>(n % 20);
    ASSERT_EQ(train.labels[n], (i + file) % 10) << n;
    const uint8_t* img = train.image(n);
    const uint8_t r = static_cast<uint8_t>(i + file);
    for (int p = 0; p < 1024; ++p) {
      ASSERT_EQ(img[p], r) << "R plane, image " << n << " pixel " << p;
      ASSERT_EQ(img[1024 + p], p & 0xFF) << "G plane, image " << n << " pixel " << p;
      ASSERT_EQ(img[2048 + p], 255 - r) << "B plane, image " << n << " pixel " << p;
    }
  }
  // R of the train split: 1..20 (file 1) and 2..21 (file 2), mean 11.
  ASSERT_EQ(train.mean.size(), 3u);
  EXPECT_NEAR(train.mean[0], 11.0 / 255.0, 1e-6);
  EXPECT_NEAR(train.mean[1], 127.5 / 255.0, 1e-6);
  EXPECT_NEAR(train.mean[2], (255 - 11.0) / 255.0, 1e-6);
  EXPECT_NEAR(train.stddev[1], std::sqrt((256.0 * 256.0 - 1.0) / 12.0) / 255.0, 1e-6);

  Dataset test;
  s = LoadDataset(DatasetFormat::kCifar10Bin, dir, Split::kTest, &test);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(test.size(), 20u);
  EXPECT_EQ(test.labels[0], 0);  // (0 + 100) % 10
  EXPECT_EQ(test.labels[7], 7);
  EXPECT_EQ(test.image(7)[0], 107);
  EXPECT_EQ(test.image(7)[2048], 255 - 107);
  EXPECT_EQ(test.mean, train.mean);  // the train split's statistics
  EXPECT_EQ(test.stddev, train.stddev);
}

// Through the inflate cache a dataset loads the same, the first process
// leaves the copies, and the next (here: the next call) reads them.
TEST(InflateCacheTest, LoadsTheSameAndTheNextLoadReadsTheCopies) {
  const std::string dir = TestDir("dataset_test");
  const std::string cache = dir + "/cache";
  WriteGzip(dir + "/train-images-idx3-ubyte.gz", IdxImages(2051, 12, 4, 5, 12));
  WriteGzip(dir + "/train-labels-idx1-ubyte.gz", IdxLabels(2049, CyclicLabels(12)));
  WriteGzip(dir + "/t10k-images-idx3-ubyte.gz", IdxImages(2051, 6, 4, 5, 6));
  WriteGzip(dir + "/t10k-labels-idx1-ubyte.gz", IdxLabels(2049, CyclicLabels(6)));
  const std::string cifar = TestDir("dataset_test_cifar");  // gzip, named as plain
  WriteGzip(cifar + "/data_batch_1.bin", CifarRecords(1, 20));
  WriteGzip(cifar + "/test_batch.bin", CifarRecords(9, 10));

  struct Case {
    DatasetFormat format;
    std::string dir;
    Split split;
    int files;  // image files the split reads (the test split: train's too)
  };
  for (const Case& c : {Case{DatasetFormat::kMnistIdx, dir, Split::kTrain, 1},
                        Case{DatasetFormat::kMnistIdx, dir, Split::kTest, 2},
                        Case{DatasetFormat::kCifar10Bin, cifar, Split::kTrain, 1},
                        Case{DatasetFormat::kCifar10Bin, cifar, Split::kTest, 2}}) {
    Dataset plain;
    Status loaded = LoadDataset(c.format, c.dir, c.split, &plain);
    ASSERT_TRUE(loaded.ok()) << loaded.ToString();
    Dataset cached;
    DatasetCacheUse use;
    for (int round = 0; round < 2; ++round) {
      Status s = LoadDataset(c.format, c.dir, c.split, cache, &cached, &use);
      ASSERT_TRUE(s.ok()) << s.ToString();
      EXPECT_EQ(cached.images, plain.images);
      EXPECT_EQ(cached.labels, plain.labels);
      EXPECT_EQ(cached.mean, plain.mean);
      EXPECT_EQ(cached.stddev, plain.stddev);
      EXPECT_EQ(use.bypassed, "");
    }
    EXPECT_EQ(use.files_from_cache, c.files);  // the second round
    EXPECT_EQ(use.files_cached, 0);
  }
  EXPECT_EQ(FilesEndingIn(cache, ".lock").size(), 4u);  // one per image file
}

// Plain files need no cache: loaded as they are, and not reported as the
// cache failing (the worker warns about what `bypassed` names).
TEST(InflateCacheTest, PlainFilesAreReadAsTheyAreWithoutAComplaint) {
  const std::string dir = TestDir("dataset_test");
  WriteIdxDataset(dir, 12, 6);
  Dataset plain, cached;
  ASSERT_TRUE(LoadDataset(DatasetFormat::kMnistIdx, dir, Split::kTest, &plain).ok());
  DatasetCacheUse use;
  Status s = LoadDataset(DatasetFormat::kMnistIdx, dir, Split::kTest, dir + "/cache", &cached,
                         &use);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(cached.images, plain.images);
  EXPECT_EQ(use.files_from_cache + use.files_cached, 0);
  EXPECT_EQ(use.bypassed, "");
}

TEST(CifarTest, UsesWhicheverTrainBatchesExist) {
  const std::string dir = TestDir("dataset_test");
  WriteRaw(dir + "/data_batch_3.bin", CifarRecords(3, 2));
  WriteRaw(dir + "/data_batch_5.bin", CifarRecords(5, 3));
  Dataset train;
  Status s = LoadDataset(DatasetFormat::kCifar10Bin, dir, Split::kTrain, &train);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_EQ(train.size(), 5u);
  EXPECT_EQ(train.labels[0], 3);
  EXPECT_EQ(train.labels[2], 5);
}

// ------------------------------------------------------------------ bad files

TEST(DescribeTest, IdxShapeFromTheHeadersAlone) {
  const std::string dir = TestDir("dataset_describe_idx");
  WriteIdxDataset(dir, 37, 11);
  for (Split split : {Split::kTrain, Split::kTest}) {
    DatasetShape shape;
    Status s = DescribeDataset(DatasetFormat::kMnistIdx, dir, split, &shape);
    ASSERT_TRUE(s.ok()) << s.ToString();
    Dataset loaded;
    ASSERT_TRUE(LoadDataset(DatasetFormat::kMnistIdx, dir, split, &loaded).ok());
    EXPECT_EQ(shape.samples, loaded.size());
    EXPECT_EQ(shape.channels, loaded.channels);
    EXPECT_EQ(shape.height, loaded.height);
    EXPECT_EQ(shape.width, loaded.width);
    EXPECT_EQ(shape.num_classes, loaded.num_classes);
  }
  // A file whose pixels are cut short describes fine (only the headers are
  // read) but does not load.
  WriteRaw(dir + "/train-images-idx3-ubyte", IdxImages(2051, 37, 4, 5, 30));
  DatasetShape shape;
  EXPECT_TRUE(DescribeDataset(DatasetFormat::kMnistIdx, dir, Split::kTrain, &shape).ok());
  Dataset loaded;
  EXPECT_FALSE(LoadDataset(DatasetFormat::kMnistIdx, dir, Split::kTrain, &loaded).ok());
}

TEST(DescribeTest, IdxHeaderErrorsAreLoadDatasetsErrors) {
  const std::string dir = TestDir("dataset_describe_bad");
  WriteIdxDataset(dir, 5, 5);
  WriteRaw(dir + "/train-labels-idx1-ubyte", IdxLabels(2049, CyclicLabels(4)));
  DatasetShape shape;
  Status s = DescribeDataset(DatasetFormat::kMnistIdx, dir, Split::kTrain, &shape);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_TRUE(Contains(s, "label count 4 (offset 4) differs from the image count 5")) << s.ToString();
  EXPECT_EQ(shape.samples, 0u);
  WriteRaw(dir + "/train-images-idx3-ubyte", IdxImages(1234, 5, 4, 5, 5));
  s = DescribeDataset(DatasetFormat::kMnistIdx, dir, Split::kTrain, &shape);
  EXPECT_TRUE(Contains(s, "bad magic number 1234 at offset 0")) << s.ToString();
  s = DescribeDataset(DatasetFormat::kMnistIdx, dir + "/nope", Split::kTrain, &shape);
  EXPECT_FALSE(s.ok());
}

TEST(DescribeTest, CifarCountsRecordsOfPlainAndGzipBatches) {
  const std::string dir = TestDir("dataset_describe_cifar");
  WriteRaw(dir + "/data_batch_1.bin", CifarRecords(1, 3));
  WriteGzip(dir + "/data_batch_2.bin", CifarRecords(2, 4));
  WriteRaw(dir + "/test_batch.bin", CifarRecords(0, 2));
  DatasetShape shape;
  Status s = DescribeDataset(DatasetFormat::kCifar10Bin, dir, Split::kTrain, &shape);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(shape.samples, 7u);
  EXPECT_EQ(shape.channels, 3);
  EXPECT_EQ(shape.height, 32);
  ASSERT_TRUE(DescribeDataset(DatasetFormat::kCifar10Bin, dir, Split::kTest, &shape).ok());
  EXPECT_EQ(shape.samples, 2u);
  WriteRaw(dir + "/data_batch_1.bin", CifarRecords(1, 3) + "xx");
  s = DescribeDataset(DatasetFormat::kCifar10Bin, dir, Split::kTrain, &shape);
  EXPECT_TRUE(Contains(s, "is not a positive multiple of the 3073-byte record")) << s.ToString();
}

TEST(BadFilesTest, TruncatedIdxImages) {
  const std::string dir = TestDir("dataset_test");
  WriteIdxDataset(dir, 100, 10);
  // The header says 100 images of 4x5; the file holds 50.
  WriteRaw(dir + "/train-images-idx3-ubyte", IdxImages(2051, 100, 4, 5, 50));
  Dataset d;
  Status s = LoadDataset(DatasetFormat::kMnistIdx, dir, Split::kTrain, &d);
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(Contains(s, dir + "/train-images-idx3-ubyte")) << s.message();
  EXPECT_TRUE(Contains(s, "truncated: expected 2000 bytes of pixel data at offset 16, file has 1000"))
      << s.message();
  EXPECT_EQ(d.size(), 0u);
}

TEST(BadFilesTest, TrailingBytesInIdxImages) {
  const std::string dir = TestDir("dataset_test");
  WriteIdxDataset(dir, 10, 10);
  WriteRaw(dir + "/train-images-idx3-ubyte", IdxImages(2051, 10, 4, 5, 11));
  Dataset d;
  Status s = LoadDataset(DatasetFormat::kMnistIdx, dir, Split::kTrain, &d);
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(Contains(s, "train-images-idx3-ubyte")) << s.message();
  EXPECT_TRUE(Contains(s, "20 trailing bytes")) << s.message();
}

TEST(BadFilesTest, WrongMagic) {
  const std::string dir = TestDir("dataset_test");
  WriteIdxDataset(dir, 10, 10);
  // A label file's magic in the image file.
  WriteRaw(dir + "/t10k-images-idx3-ubyte", IdxImages(2049, 10, 4, 5, 10));
  Dataset d;
  Status s = LoadDataset(DatasetFormat::kMnistIdx, dir, Split::kTest, &d);
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(Contains(s, dir + "/t10k-images-idx3-ubyte")) << s.message();
  EXPECT_TRUE(Contains(s, "bad magic number 2049 at offset 0 (expected 2051")) << s.message();

  WriteIdxDataset(dir, 10, 10);
  WriteRaw(dir + "/train-labels-idx1-ubyte", IdxLabels(2051, CyclicLabels(10)));
  s = LoadDataset(DatasetFormat::kMnistIdx, dir, Split::kTrain, &d);
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(Contains(s, dir + "/train-labels-idx1-ubyte")) << s.message();
  EXPECT_TRUE(Contains(s, "expected 2049")) << s.message();
}

TEST(BadFilesTest, ZeroRowsAndShortHeader) {
  const std::string dir = TestDir("dataset_test");
  WriteIdxDataset(dir, 10, 10);
  WriteRaw(dir + "/train-images-idx3-ubyte", IdxImages(2051, 10, 0, 5, 10));
  Dataset d;
  Status s = LoadDataset(DatasetFormat::kMnistIdx, dir, Split::kTrain, &d);
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(Contains(s, "train-images-idx3-ubyte: image size 0x5")) << s.message();

  WriteRaw(dir + "/train-images-idx3-ubyte", BigEndian32(2051) + "\x01");
  s = LoadDataset(DatasetFormat::kMnistIdx, dir, Split::kTrain, &d);
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(Contains(s, "train-images-idx3-ubyte: truncated: expected a 16-byte IDX header"))
      << s.message();
}

TEST(BadFilesTest, LabelOutOfRange) {
  const std::string dir = TestDir("dataset_test");
  WriteIdxDataset(dir, 10, 10);
  std::vector<uint8_t> labels = CyclicLabels(10);
  labels[3] = 11;
  WriteRaw(dir + "/train-labels-idx1-ubyte", IdxLabels(2049, labels));
  Dataset d;
  Status s = LoadDataset(DatasetFormat::kMnistIdx, dir, Split::kTrain, &d);
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(Contains(s, dir + "/train-labels-idx1-ubyte")) << s.message();
  EXPECT_TRUE(Contains(s, "label 11 of record 3 at offset 11")) << s.message();
}

TEST(BadFilesTest, ImageAndLabelCountsDiffer) {
  const std::string dir = TestDir("dataset_test");
  WriteIdxDataset(dir, 10, 10);
  WriteRaw(dir + "/train-labels-idx1-ubyte", IdxLabels(2049, CyclicLabels(9)));
  Dataset d;
  Status s = LoadDataset(DatasetFormat::kMnistIdx, dir, Split::kTrain, &d);
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(Contains(s, "train-labels-idx1-ubyte: label count 9")) << s.message();
  EXPECT_TRUE(Contains(s, "image count 10")) << s.message();
}

TEST(BadFilesTest, CifarPartialRecord) {
  const std::string dir = TestDir("dataset_test");
  std::string bytes = CifarRecords(1, 3);
  bytes.resize(3073 * 2 + 100);
  WriteRaw(dir + "/data_batch_1.bin", bytes);
  Dataset d;
  Status s = LoadDataset(DatasetFormat::kCifar10Bin, dir, Split::kTrain, &d);
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(Contains(s, dir + "/data_batch_1.bin")) << s.message();
  EXPECT_TRUE(Contains(s, "size 6246 is not a multiple of the 3073-byte record")) << s.message();
  EXPECT_TRUE(Contains(s, "partial record 2 at offset 6146 has 100 bytes")) << s.message();
}

TEST(BadFilesTest, CifarLabelOutOfRange) {
  const std::string dir = TestDir("dataset_test");
  WriteRaw(dir + "/data_batch_1.bin", CifarRecords(1, 4));
  std::string bytes = CifarRecords(2, 4);
  bytes[3 * 3073] = 10;
  WriteRaw(dir + "/data_batch_2.bin", bytes);
  Dataset d;
  Status s = LoadDataset(DatasetFormat::kCifar10Bin, dir, Split::kTrain, &d);
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(Contains(s, dir + "/data_batch_2.bin")) << s.message();
  EXPECT_TRUE(Contains(s, "label 10 of record 3 at offset 9219")) << s.message();
}

TEST(BadFilesTest, CifarMissingFiles) {
  const std::string dir = TestDir("dataset_test");
  Dataset d;
  Status s = LoadDataset(DatasetFormat::kCifar10Bin, dir, Split::kTrain, &d);
  EXPECT_EQ(s.code(), Status::Code::kNotFound);
  EXPECT_TRUE(Contains(s, dir + "/data_batch_1.bin")) << s.message();
  s = LoadDataset(DatasetFormat::kCifar10Bin, dir, Split::kTest, &d);
  EXPECT_EQ(s.code(), Status::Code::kNotFound);
  EXPECT_TRUE(Contains(s, dir + "/test_batch.bin")) << s.message();

  // The test split alone is not enough: its statistics come from train.
  WriteRaw(dir + "/test_batch.bin", CifarRecords(0, 2));
  s = LoadDataset(DatasetFormat::kCifar10Bin, dir, Split::kTest, &d);
  EXPECT_EQ(s.code(), Status::Code::kNotFound);
  EXPECT_TRUE(Contains(s, dir + "/data_batch_1.bin")) << s.message();
  EXPECT_TRUE(Contains(s, "normalisation statistics")) << s.message();
}

TEST(BadFilesTest, CorruptGzip) {
  const std::string dir = TestDir("dataset_test");
  WriteIdxDataset(dir, 200, 10);
  // Compressible pixels (image i, byte k = i*7 + k) give a real deflate
  // stream; flipping bytes in its middle breaks it.
  WriteGzip(dir + "/train-images-idx3-ubyte.gz", ReadRaw(dir + "/train-images-idx3-ubyte"));
  std::remove((dir + "/train-images-idx3-ubyte").c_str());
  std::string gz = ReadRaw(dir + "/train-images-idx3-ubyte.gz");
  ASSERT_GT(gz.size(), 64u);
  for (size_t i = gz.size() / 2 - 4; i < gz.size() / 2 + 4; ++i) gz[i] = static_cast<char>(~gz[i]);
  WriteRaw(dir + "/train-images-idx3-ubyte.gz", gz);

  Dataset d;
  Status s = LoadDataset(DatasetFormat::kMnistIdx, dir, Split::kTrain, &d);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), Status::Code::kDataLoss) << s.ToString();
  EXPECT_TRUE(Contains(s, dir + "/train-images-idx3-ubyte.gz")) << s.message();
  EXPECT_TRUE(Contains(s, "corrupt gzip stream")) << s.message();
  EXPECT_TRUE(Contains(s, "offset")) << s.message();
}

TEST(BadFilesTest, MissingDirectory) {
  const std::string dir = TestDir("dataset_test") + "/does-not-exist";
  Dataset d;
  for (DatasetFormat f : {DatasetFormat::kMnistIdx, DatasetFormat::kCifar10Bin}) {
    Status s = LoadDataset(f, dir, Split::kTrain, &d);
    EXPECT_EQ(s.code(), Status::Code::kNotFound);
    EXPECT_TRUE(Contains(s, dir)) << s.message();
    EXPECT_TRUE(Contains(s, "dataset directory not found")) << s.message();
  }
}

TEST(BadFilesTest, MissingIdxFileNamesBothSpellings) {
  const std::string dir = TestDir("dataset_test");
  WriteIdxDataset(dir, 10, 10);
  std::remove((dir + "/t10k-labels-idx1-ubyte").c_str());
  Dataset d;
  Status s = LoadDataset(DatasetFormat::kMnistIdx, dir, Split::kTest, &d);
  EXPECT_EQ(s.code(), Status::Code::kNotFound);
  EXPECT_TRUE(Contains(s, dir + "/t10k-labels-idx1-ubyte(.gz): file not found")) << s.message();
}

}  // namespace
}  // namespace gaptrain
