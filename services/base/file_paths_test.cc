#include "services/base/file_paths.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

namespace gaptrain {
namespace {

TEST(FilePathsTest, DirName) {
  EXPECT_EQ(DirName("a/b/c.pt"), "a/b");
  EXPECT_EQ(DirName("/c.pt"), "/");
  EXPECT_EQ(DirName("c.pt"), ".");
  EXPECT_EQ(DirName("/x/y"), "/x");
}

TEST(FilePathsTest, IsDirectory) {
  const std::string dir = std::getenv("TEST_TMPDIR");
  const std::string file = dir + "/file";
  std::ofstream(file) << "x";
  EXPECT_TRUE(IsDirectory(dir));
  EXPECT_FALSE(IsDirectory(file));
  EXPECT_FALSE(IsDirectory(dir + "/missing"));
}

}  // namespace
}  // namespace gaptrain
