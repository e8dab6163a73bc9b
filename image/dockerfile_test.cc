// dockerfile_test: the root Dockerfile builds the layout image/assemble.sh
// builds (docs/image.md). No Docker daemon runs here, so the Dockerfile is
// checked against assemble.sh's config, and for running the same scripts
// on the same binaries: the two cannot drift apart unnoticed.

#include <gtest/gtest.h>

#include <regex>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "services/base/blas_environment.h"
#include "services/testing/test_files.h"

namespace gaptrain {
namespace {

// The final stage's instructions as (keyword, arguments), continuation
// lines joined; the whole file's RUN arguments into *all_runs.
std::vector<std::pair<std::string, std::string>> FinalStage(const std::string& dockerfile,
                                                            std::string* all_runs) {
  std::vector<std::pair<std::string, std::string>> stage;
  std::istringstream in(dockerfile);
  std::string instruction;
  for (std::string line; std::getline(in, line);) {
    if (instruction.empty() && (line.empty() || line[0] == '#')) continue;
    if (!line.empty() && line.back() == '\\') {
      instruction += line.substr(0, line.size() - 1) + " ";
      continue;
    }
    instruction += line;
    const size_t space = instruction.find(' ');
    const std::string keyword = instruction.substr(0, space);
    const std::string args = space == std::string::npos ? "" : instruction.substr(space + 1);
    if (keyword == "FROM") stage.clear();
    if (keyword == "RUN") *all_runs += args + "\n";
    stage.emplace_back(keyword, args);
    instruction.clear();
  }
  return stage;
}

// The one value of `keyword` in the final stage; "" when it has none or two.
std::string Only(const std::vector<std::pair<std::string, std::string>>& stage,
                 const std::string& keyword) {
  std::string value;
  int count = 0;
  for (const auto& [k, args] : stage) {
    if (k == keyword) {
      value = args;
      ++count;
    }
  }
  return count == 1 ? value : "";
}

// assemble.sh's `NAME=VALUE` assignment at the start of a line.
std::string ShellAssignment(const std::string& script, const std::string& name) {
  std::smatch m;
  const std::regex assignment("(^|\\n)" + name + "=([^\\n]*)");
  return std::regex_search(script, m, assignment) ? m[2].str() : "";
}

class DockerfileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dockerfile_ = ReadRaw("Dockerfile");
    assemble_ = ReadRaw("image/assemble.sh");
    ASSERT_FALSE(dockerfile_.empty());
    ASSERT_FALSE(assemble_.empty());
    stage_ = FinalStage(dockerfile_, &runs_);
  }

  std::string dockerfile_;
  std::string assemble_;
  std::string runs_;
  std::vector<std::pair<std::string, std::string>> stage_;
};

TEST_F(DockerfileTest, ConfigIsAssembleShs) {
  const std::string uid = ShellAssignment(assemble_, "uid");
  ASSERT_EQ(uid, "65532");
  EXPECT_NE(assemble_.find("--config.user \"$uid:$uid\""), std::string::npos);
  EXPECT_EQ(Only(stage_, "USER"), uid + ":" + uid);

  EXPECT_NE(assemble_.find("--config.workingdir /var/lib/gaptrain"), std::string::npos);
  EXPECT_EQ(Only(stage_, "WORKDIR"), "/var/lib/gaptrain");

  const std::string path = ShellAssignment(assemble_, "path_env");
  ASSERT_FALSE(path.empty());
  // The image sets what the launcher gives its children (the test's own
  // environment does not set the variable, so the function returns it).
  const std::string blas = ShellAssignment(assemble_, "blas_env");
  const auto launcher_env = BlasStartEnvironment();
  ASSERT_EQ(launcher_env.size(), 1u);
  ASSERT_EQ(blas, launcher_env[0].first + "=" + launcher_env[0].second);
  EXPECT_NE(assemble_.find("--config.env \"$blas_env\""), std::string::npos);
  EXPECT_EQ(Only(stage_, "ENV"), "PATH=" + path + " " + blas);

  EXPECT_NE(assemble_.find("--config.cmd gaptrain --config.cmd --help"), std::string::npos);
  EXPECT_EQ(Only(stage_, "CMD"), "[\"gaptrain\", \"--help\"]");
  EXPECT_EQ(Only(stage_, "ENTRYPOINT"), "");
}

TEST_F(DockerfileTest, RunsTheSameScriptsOnTheSameBinaries) {
  EXPECT_NE(runs_.find("bazel build -c opt //image:binaries //image:binaries_list"),
            std::string::npos)
      << runs_;
  EXPECT_NE(runs_.find("image/binaries.txt"), std::string::npos) << runs_;
  EXPECT_NE(runs_.find("image/runtime-packages.sh"), std::string::npos) << runs_;
  EXPECT_NE(runs_.find("image/fetch-debs.sh"), std::string::npos) << runs_;
  EXPECT_NE(runs_.find("gaptrain-rootfs-setup.sh"), std::string::npos) << runs_;
  // The build stage puts the binaries binaries.txt names in /out/bin, the
  // final stage copies that into /usr/local/bin, after the base.
  EXPECT_NE(runs_.find("xargs cp -t /out/bin/"), std::string::npos) << runs_;
  size_t last = stage_.size();
  const std::regex config("ENV|USER|WORKDIR|CMD|LABEL");
  while (last > 0 && std::regex_match(stage_[last - 1].first, config)) --last;
  ASSERT_GT(last, 0u);
  EXPECT_EQ(stage_[last - 1].first + " " + stage_[last - 1].second,
            "COPY --from=build /out/bin/ /usr/local/bin/")
      << "the binaries' layer is not the last one before the config";
}

TEST_F(DockerfileTest, CopiesOnlyFilesOfTheTree) {
  // COPY SOURCE... DEST without --from: the sources must exist here.
  std::istringstream in(dockerfile_);
  int copies = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("COPY ", 0) != 0 || line.find("--from=") != std::string::npos) continue;
    std::istringstream words(line.substr(5));
    std::vector<std::string> args;
    for (std::string w; words >> w;) args.push_back(w);
    ASSERT_GE(args.size(), 2u) << line;
    for (size_t i = 0; i + 1 < args.size(); ++i) {
      if (args[i] == ".") continue;
      ++copies;
      EXPECT_TRUE(PathExists(args[i])) << line;
    }
  }
  EXPECT_EQ(copies, 2);  // scripts/bootstrap.sh and image/rootfs-setup.sh
}

}  // namespace
}  // namespace gaptrain
