#include "services/learn/job_data.h"

#include <gtest/gtest.h>

#include <string>

#include "services/testing/test_files.h"

namespace gaptrain {
namespace {

TrainingJob JobOf(const std::string& format, const std::string& path) {
  TrainingJob job;
  job.data.format = format;
  job.data.path = path;
  return job;
}

// samples x channels x height x width, 10 classes.
std::string ShapeText(const DatasetShape& s) {
  return std::to_string(s.samples) + "x" + std::to_string(s.channels) + "x" +
         std::to_string(s.height) + "x" + std::to_string(s.width) + "/" +
         std::to_string(s.num_classes);
}

std::string Described(const std::string& format, const std::string& dir, uint64_t samples) {
  DatasetShape shape;
  Status s = DescribeJobTrainingSet(JobOf(format, dir), samples, "the master", &shape);
  return s.ok() ? ShapeText(shape) : s.ToString();
}

TEST(JobData, ReadsSizeAndShapeFromTheHeaders) {
  const std::string dir = TestDir("job_data");
  WriteRaw(dir + "/data_batch_1.bin", std::string(3 * 3073, '\0'));
  EXPECT_EQ(Described("cifar10-bin", dir, 0), "3x3x32x32/10");
}

TEST(JobData, TrainSamplesStandsInForTheFilesWithTheFormatsShape) {
  EXPECT_EQ(Described("mnist-idx", "/nonexistent", 60000), "60000x1x28x28/10");
  EXPECT_EQ(Described("cifar10-bin", "/nonexistent", 50000), "50000x3x32x32/10");
}

TEST(JobData, AnUnreadableDatasetNamesTheServiceAndTheFlag) {
  DatasetShape shape;
  Status s = DescribeJobTrainingSet(JobOf("mnist-idx", TestDir("job_data") + "/missing"), 0,
                                    "the coordinator", &shape);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("missing"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("the coordinator reads the training set"), std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("--train-samples"), std::string::npos) << s.message();
}

TEST(JobData, AnUnknownFormatNamesTheField) {
  DatasetShape shape;
  Status s = DescribeJobTrainingSet(JobOf("png", "/nonexistent"), 100, "the master", &shape);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("data.format"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace gaptrain
