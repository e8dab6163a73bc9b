// Tests where `gaptrain run` finds the service binaries: $GAPTRAIN_BIN_DIR
// first, then Bazel runfiles ($RUNFILES_DIR), then $PATH; files that are
// not executable are passed over; a binary found nowhere is NOT_FOUND with
// a message naming it and the bazel command that builds it. Each test sets
// the environment it needs and restores it.

#include "cli/run/service_binaries.h"

#include <sys/stat.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <string>

#include <gtest/gtest.h>

namespace gaptrain {
namespace {

class ServiceBinariesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* name : {"GAPTRAIN_BIN_DIR", "RUNFILES_DIR", "PATH"}) {
      const char* value = std::getenv(name);
      if (value != nullptr) saved_[name] = value;
    }
    // Nothing is found unless a test puts it somewhere.
    unsetenv("GAPTRAIN_BIN_DIR");
    unsetenv("RUNFILES_DIR");
    setenv("PATH", MakeDir("empty-path").c_str(), 1);
  }

  void TearDown() override {
    for (const char* name : {"GAPTRAIN_BIN_DIR", "RUNFILES_DIR", "PATH"}) {
      const auto it = saved_.find(name);
      if (it == saved_.end()) {
        unsetenv(name);
      } else {
        setenv(name, it->second.c_str(), 1);
      }
    }
  }

  // A directory under $TEST_TMPDIR, unique to the running test.
  static std::string MakeDir(const std::string& name) {
    const char* tmp = std::getenv("TEST_TMPDIR");
    std::string path = std::string(tmp != nullptr ? tmp : "/tmp") + "/service_binaries_test-" +
                       ::testing::UnitTest::GetInstance()->current_test_info()->name();
    mkdir(path.c_str(), 0755);
    for (size_t start = 0; start <= name.size();) {
      const size_t slash = name.find('/', start);
      path += "/" + name.substr(start, slash - start);
      mkdir(path.c_str(), 0755);
      if (slash == std::string::npos) break;
      start = slash + 1;
    }
    return path;
  }

  static std::string MakeFile(const std::string& dir, const std::string& name, mode_t mode) {
    const std::string path = dir + "/" + name;
    { std::ofstream(path) << "#!/bin/sh\n"; }
    EXPECT_EQ(chmod(path.c_str(), mode), 0) << path;
    return path;
  }

  std::map<std::string, std::string> saved_;
};

TEST_F(ServiceBinariesTest, BinDirOverrideIsFound) {
  const std::string dir = MakeDir("bin");
  for (const char* name : {"gaptrain-master", "gaptrain-coordinator", "gaptrain-worker"}) {
    MakeFile(dir, name, 0755);
  }
  setenv("GAPTRAIN_BIN_DIR", dir.c_str(), 1);
  ServiceBinaries binaries;
  ASSERT_TRUE(FindServiceBinaries(&binaries).ok());
  EXPECT_EQ(binaries.master, dir + "/gaptrain-master");
  EXPECT_EQ(binaries.coordinator, dir + "/gaptrain-coordinator");
  EXPECT_EQ(binaries.worker, dir + "/gaptrain-worker");
}

TEST_F(ServiceBinariesTest, BinDirComesBeforeRunfilesAndPath) {
  const std::string bin = MakeDir("bin");
  const std::string runfiles = MakeDir("runfiles");
  const std::string on_path = MakeDir("on-path");
  MakeDir("runfiles/gaptrain/services/master");
  MakeFile(bin, "gaptrain-master", 0755);
  MakeFile(runfiles + "/gaptrain/services/master", "gaptrain-master", 0755);
  MakeFile(on_path, "gaptrain-master", 0755);
  setenv("GAPTRAIN_BIN_DIR", bin.c_str(), 1);
  setenv("RUNFILES_DIR", runfiles.c_str(), 1);
  setenv("PATH", on_path.c_str(), 1);

  std::string path;
  ASSERT_TRUE(FindServiceBinary("services/master", "gaptrain-master", &path).ok());
  EXPECT_EQ(path, bin + "/gaptrain-master");

  unsetenv("GAPTRAIN_BIN_DIR");
  ASSERT_TRUE(FindServiceBinary("services/master", "gaptrain-master", &path).ok());
  EXPECT_EQ(path, runfiles + "/gaptrain/services/master/gaptrain-master");

  unsetenv("RUNFILES_DIR");
  ASSERT_TRUE(FindServiceBinary("services/master", "gaptrain-master", &path).ok());
  EXPECT_EQ(path, on_path + "/gaptrain-master");
}

TEST_F(ServiceBinariesTest, NonExecutableFilesArePassedOver) {
  const std::string bin = MakeDir("bin");
  const std::string on_path = MakeDir("on-path");
  MakeFile(bin, "gaptrain-worker", 0644);
  MakeFile(on_path, "gaptrain-worker", 0755);
  setenv("GAPTRAIN_BIN_DIR", bin.c_str(), 1);
  setenv("PATH", (MakeDir("empty") + ":" + on_path).c_str(), 1);
  std::string path;
  ASSERT_TRUE(FindServiceBinary("services/worker", "gaptrain-worker", &path).ok());
  EXPECT_EQ(path, on_path + "/gaptrain-worker");
}

TEST_F(ServiceBinariesTest, EmptyBinDirIsIgnored) {
  const std::string on_path = MakeDir("on-path");
  MakeFile(on_path, "gaptrain-worker", 0755);
  setenv("GAPTRAIN_BIN_DIR", "", 1);
  setenv("PATH", on_path.c_str(), 1);
  std::string path;
  ASSERT_TRUE(FindServiceBinary("services/worker", "gaptrain-worker", &path).ok());
  EXPECT_EQ(path, on_path + "/gaptrain-worker");
}

TEST_F(ServiceBinariesTest, MissingBinaryIsNotFoundWithTheBuildCommand) {
  setenv("GAPTRAIN_BIN_DIR", MakeDir("bin").c_str(), 1);
  std::string path = "unchanged";
  const Status s = FindServiceBinary("services/nothing", "gaptrain-no-such-binary", &path);
  EXPECT_EQ(s.code(), Status::Code::kNotFound);
  EXPECT_EQ(s.message().rfind("gaptrain-no-such-binary", 0), 0u) << s.message();
  EXPECT_NE(s.message().find("$GAPTRAIN_BIN_DIR"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("$PATH"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("bazel build -c opt //cli:gaptrain"), std::string::npos)
      << s.message();
  EXPECT_EQ(path, "unchanged");
}

TEST_F(ServiceBinariesTest, FindServiceBinariesNamesTheFirstMissingOne) {
  const std::string dir = MakeDir("bin");
  MakeFile(dir, "gaptrain-master", 0755);
  MakeFile(dir, "gaptrain-worker", 0755);
  setenv("GAPTRAIN_BIN_DIR", dir.c_str(), 1);
  ServiceBinaries binaries;
  const Status s = FindServiceBinaries(&binaries);
  EXPECT_EQ(s.code(), Status::Code::kNotFound);
  EXPECT_NE(s.message().find("gaptrain-coordinator"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("bazel build"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace gaptrain
