// The corpus replay test of a fuzz target (bazel/fuzz.bzl): every file
// under the folders given as arguments goes through the target once. A
// broken contract aborts the test and names the input on stderr.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "services/testing/fuzz_replay.h"

namespace gaptrain {
namespace {

std::vector<std::string> corpus_folders;

TEST(FuzzCorpusTest, EveryInputKeepsTheContract) {
  ASSERT_FALSE(corpus_folders.empty()) << "no corpus folder given";
  std::vector<std::string> files;
  Status listed = ListFuzzInputs(corpus_folders, &files);
  ASSERT_TRUE(listed.ok()) << listed.ToString();
  // A corpus that lost its files would pass vacuously.
  ASSERT_FALSE(files.empty()) << "empty corpus";
  for (const std::string& file : files) {
    SCOPED_TRACE(file);
    std::fprintf(stderr, "replaying %s\n", file.c_str());
    Status replayed = ReplayFuzzInput(file);
    ASSERT_TRUE(replayed.ok()) << replayed.ToString();
  }
}

}  // namespace
}  // namespace gaptrain

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  for (int i = 1; i < argc; ++i) gaptrain::corpus_folders.push_back(argv[i]);
  return RUN_ALL_TESTS();
}
