#include "services/plot/gnuplot.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <fstream>

namespace gaptrain {
namespace {

std::string TempDir() {
  const char* dir = std::getenv("TEST_TMPDIR");
  return dir != nullptr ? dir : "/tmp";
}

TEST(GnuplotTest, RunsAScriptThatWritesAPng) {
  const std::string script = TempDir() + "/ok.gp";
  const std::string png = TempDir() + "/ok.png";
  std::ofstream(script) << "set terminal png size 200,100\nset output '" << png
                        << "'\nplot x\n";
  Status s = RunGnuplot(script);
  ASSERT_TRUE(s.ok()) << s.ToString();
  struct stat st;
  ASSERT_EQ(stat(png.c_str(), &st), 0);
  EXPECT_GT(st.st_size, 100);
}

TEST(GnuplotTest, AFailingScriptIsAnErrorWithGnuplotsMessage) {
  const std::string script = TempDir() + "/bad.gp";
  std::ofstream(script) << "plot no_such_function(x)\n";
  Status s = RunGnuplot(script);
  EXPECT_EQ(s.code(), Status::Code::kInternal) << s.ToString();
  EXPECT_NE(s.message().find("no_such_function"), std::string::npos) << s.ToString();
}

}  // namespace
}  // namespace gaptrain
