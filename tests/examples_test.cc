// Every example job file (examples/*.yaml, examples/sim/*.yaml) parses with
// the strict manifest parser, and its data path, taken relative to the
// workspace root as `gaptrain run` and `gaptrain simulate` take it there,
// holds the dataset: the README's commands work as written.

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <string>
#include <vector>

#include "services/api/training_job.h"
#include "services/testing/test_files.h"
#include "services/testing/testdata_dir.h"

namespace gaptrain {
namespace {

TEST(ExamplesTest, EveryExampleParsesAndItsDataIsThere) {
  std::string data;
  Status found = FindSharedDataDir(&data);
  ASSERT_TRUE(found.ok()) << found.ToString();
  std::vector<std::string> files = FilesEndingIn("examples", ".yaml");
  const std::vector<std::string> sim = FilesEndingIn("examples/sim", ".yaml");
  files.insert(files.end(), sim.begin(), sim.end());
  ASSERT_GE(files.size(), 10u) << "examples/ should hold the run and simulate examples";
  for (const std::string& file : files) {
    TrainingJob job;
    Status s = LoadTrainingJob(file, &job);
    EXPECT_TRUE(s.ok()) << s.ToString();
    if (!s.ok()) continue;
    ASSERT_EQ(job.data.path.rfind("../shared/data/", 0), 0u)
        << file << ": data.path should be relative to the workspace root";
    const std::string images = data + "/" + job.data.path.substr(15) + "/train-images-idx3-ubyte.gz";
    struct stat st;
    EXPECT_EQ(stat(images.c_str(), &st), 0) << file << ": no " << images;
  }
}

}  // namespace
}  // namespace gaptrain
