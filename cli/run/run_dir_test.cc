// Tests RunDir: Open creates a fresh directory, moves an existing one aside
// (its files kept there) unless resuming, refuses to resume a missing one
// (NOT_FOUND) and refuses a directory another RunDir holds (flock,
// FAILED_PRECONDITION); the job token (32 hex characters, mode 0600, the
// same on a second call and on resume); the files it writes; and
// ReadRunEndpoints' errors and success. Files live under $TEST_TMPDIR.

#include "cli/run/run_dir.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include <gtest/gtest.h>

#include "services/testing/test_files.h"

namespace gaptrain {
namespace {

using Code = Status::Code;

bool Exists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

bool IsDir(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// A path under $TEST_TMPDIR named after the running test; nothing exists there.
std::string FreshPath() {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string base = tmp != nullptr ? tmp : "/tmp";
  const std::string path =
      base + "/run_dir_test-" + ::testing::UnitTest::GetInstance()->current_test_info()->name();
  EXPECT_FALSE(Exists(path)) << path << " is left from an earlier run";
  return path;
}

TEST(RunDirTest, OpenCreatesAFreshDirectory) {
  const std::string path = FreshPath() + "/nested/runs/job";
  std::unique_ptr<RunDir> dir;
  std::string moved_to = "stale";
  ASSERT_TRUE(RunDir::Open(path, /*resume=*/false, &moved_to, &dir).ok());
  ASSERT_NE(dir, nullptr);
  EXPECT_EQ(dir->path(), path);
  EXPECT_TRUE(IsDir(path));
  EXPECT_TRUE(Exists(path + "/lock"));
  EXPECT_EQ(moved_to, "") << "nothing was moved";
}

TEST(RunDirTest, ExistingDirectoryIsMovedAside) {
  const std::string path = FreshPath();
  ASSERT_EQ(mkdir(path.c_str(), 0755), 0);
  ASSERT_EQ(mkdir((path + "/logs").c_str(), 0755), 0);
  WriteRaw(path + "/summary.json", "{\"outcome\": \"Succeeded\"}\n");
  WriteRaw(path + "/logs/master.log", "old log\n");

  std::unique_ptr<RunDir> dir;
  std::string moved_to;
  ASSERT_TRUE(RunDir::Open(path, /*resume=*/false, &moved_to, &dir).ok());
  ASSERT_FALSE(moved_to.empty());
  EXPECT_EQ(moved_to.rfind(path + "-", 0), 0u) << moved_to;
  // The old files are kept, aside.
  EXPECT_EQ(ReadRaw(moved_to + "/summary.json"), "{\"outcome\": \"Succeeded\"}\n");
  EXPECT_EQ(ReadRaw(moved_to + "/logs/master.log"), "old log\n");
  // The run directory is fresh.
  EXPECT_TRUE(IsDir(path));
  EXPECT_FALSE(Exists(path + "/summary.json"));
  EXPECT_FALSE(Exists(path + "/logs"));
}

TEST(RunDirTest, EveryEarlierRunIsKeptAside) {
  const std::string path = FreshPath();
  std::string moved_to, first_aside, second_aside;
  {
    std::unique_ptr<RunDir> dir;
    ASSERT_TRUE(RunDir::Open(path, false, &moved_to, &dir).ok());
    ASSERT_TRUE(dir->WriteSummary("run 1").ok());
  }
  {
    std::unique_ptr<RunDir> dir;
    ASSERT_TRUE(RunDir::Open(path, false, &first_aside, &dir).ok());
    ASSERT_TRUE(dir->WriteSummary("run 2").ok());
  }
  std::unique_ptr<RunDir> dir;
  ASSERT_TRUE(RunDir::Open(path, false, &second_aside, &dir).ok());
  ASSERT_FALSE(first_aside.empty());
  ASSERT_FALSE(second_aside.empty());
  // Within one second both get the same time stamp: the second is numbered.
  EXPECT_NE(first_aside, second_aside);
  EXPECT_EQ(ReadRaw(first_aside + "/summary.json"), "run 1");
  EXPECT_EQ(ReadRaw(second_aside + "/summary.json"), "run 2");
  EXPECT_FALSE(Exists(path + "/summary.json"));
}

TEST(RunDirTest, TrailingSlashIsTheSameDirectory) {
  const std::string path = FreshPath();
  ASSERT_EQ(mkdir(path.c_str(), 0755), 0);
  WriteRaw(path + "/summary.json", "old");
  std::unique_ptr<RunDir> dir;
  std::string moved_to;
  const Status s = RunDir::Open(path + "//", /*resume=*/false, &moved_to, &dir);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(dir->path(), path);
  EXPECT_EQ(moved_to.rfind(path + "-", 0), 0u) << moved_to;
  EXPECT_EQ(ReadRaw(moved_to + "/summary.json"), "old");
  EXPECT_FALSE(Exists(path + "/summary.json"));
}

TEST(RunDirTest, ResumeKeepsTheDirectory) {
  const std::string path = FreshPath();
  ASSERT_EQ(mkdir(path.c_str(), 0755), 0);
  ASSERT_EQ(mkdir((path + "/checkpoints").c_str(), 0755), 0);
  WriteRaw(path + "/checkpoints/ckpt-100", "weights");
  std::unique_ptr<RunDir> dir;
  std::string moved_to = "stale";
  ASSERT_TRUE(RunDir::Open(path, /*resume=*/true, &moved_to, &dir).ok());
  EXPECT_EQ(moved_to, "");
  EXPECT_EQ(ReadRaw(path + "/checkpoints/ckpt-100"), "weights");
}

TEST(RunDirTest, ResumeOfAMissingDirectoryIsNotFound) {
  const std::string path = FreshPath();
  std::unique_ptr<RunDir> dir;
  std::string moved_to;
  const Status s = RunDir::Open(path, /*resume=*/true, &moved_to, &dir);
  EXPECT_EQ(s.code(), Code::kNotFound);
  EXPECT_NE(s.message().find(path), std::string::npos) << s.message();
  EXPECT_EQ(dir, nullptr);
  EXPECT_FALSE(Exists(path)) << "a failed resume creates nothing";
}

TEST(RunDirTest, SecondOpenWhileTheFirstIsAliveIsRefused) {
  const std::string path = FreshPath();
  std::unique_ptr<RunDir> first;
  std::string moved_to;
  ASSERT_TRUE(RunDir::Open(path, false, &moved_to, &first).ok());
  WriteRaw(path + "/job.yaml", "kind: TrainingJob\n");

  for (bool resume : {false, true}) {
    std::unique_ptr<RunDir> second;
    const Status s = RunDir::Open(path, resume, &moved_to, &second);
    EXPECT_EQ(s.code(), Code::kFailedPrecondition) << "resume=" << resume;
    EXPECT_NE(s.message().find("another 'gaptrain run'"), std::string::npos) << s.message();
    EXPECT_EQ(second, nullptr);
    EXPECT_EQ(moved_to, "");
  }
  // The running job's directory was not moved away from under it.
  EXPECT_EQ(ReadRaw(path + "/job.yaml"), "kind: TrainingJob\n");

  // Once the first is gone, the lock is free again.
  first.reset();
  std::unique_ptr<RunDir> again;
  EXPECT_TRUE(RunDir::Open(path, /*resume=*/true, &moved_to, &again).ok());
}

TEST(RunDirTest, TokenIsRandomHexWithMode0600AndStable) {
  const std::string path = FreshPath();
  std::string token, again, resumed;
  {
    std::unique_ptr<RunDir> dir;
    std::string moved_to;
    ASSERT_TRUE(RunDir::Open(path, false, &moved_to, &dir).ok());
    ASSERT_TRUE(dir->Token(&token).ok());
    EXPECT_EQ(token.size(), 32u) << token;
    EXPECT_EQ(token.find_first_not_of("0123456789abcdef"), std::string::npos) << token;
    struct stat st;
    ASSERT_EQ(stat((path + "/token").c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0600u);
    EXPECT_EQ(ReadRaw(path + "/token"), token + "\n");
    ASSERT_TRUE(dir->Token(&again).ok());
    EXPECT_EQ(again, token);
  }
  {
    std::unique_ptr<RunDir> dir;
    std::string moved_to;
    ASSERT_TRUE(RunDir::Open(path, /*resume=*/true, &moved_to, &dir).ok());
    ASSERT_TRUE(dir->Token(&resumed).ok());
    EXPECT_EQ(resumed, token) << "a resumed run keeps its token";
  }
  {
    std::unique_ptr<RunDir> dir;
    std::string moved_to, fresh;
    ASSERT_TRUE(RunDir::Open(path, /*resume=*/false, &moved_to, &dir).ok());
    ASSERT_TRUE(dir->Token(&fresh).ok());
    EXPECT_EQ(fresh.size(), 32u);
    EXPECT_NE(fresh, token) << "a new run gets a new token";
  }
}

TEST(RunDirTest, StoresTheManifestAndTheSummary) {
  const std::string path = FreshPath();
  std::unique_ptr<RunDir> dir;
  std::string moved_to, stored;
  ASSERT_TRUE(RunDir::Open(path, false, &moved_to, &dir).ok());
  ASSERT_TRUE(dir->StoreManifest("apiVersion: gaptrain/v1\n", &stored).ok());
  EXPECT_EQ(stored, path + "/job.yaml");
  EXPECT_EQ(ReadRaw(stored), "apiVersion: gaptrain/v1\n");
  ASSERT_TRUE(dir->WriteSummary("{\"outcome\":\"Failed\"}\n").ok());
  EXPECT_EQ(ReadRaw(path + "/summary.json"), "{\"outcome\":\"Failed\"}\n");
}

TEST(RunDirTest, EndpointsAreWrittenAndRemovedWithTheRunDir) {
  const std::string path = FreshPath();
  std::unique_ptr<RunDir> dir;
  std::string moved_to, token;
  ASSERT_TRUE(RunDir::Open(path, false, &moved_to, &dir).ok());
  ASSERT_TRUE(dir->Token(&token).ok());
  LocalJob::Options options;
  options.run_dir = path;
  options.trainers = 2;
  LocalJob job(options);  // nothing started: no metrics targets, no pids
  ASSERT_TRUE(dir->WriteEndpoints("mnist", &job, 4242).ok());

  const nlohmann::json endpoints = nlohmann::json::parse(ReadRaw(path + "/endpoints.json"));
  EXPECT_EQ(endpoints["launcherPid"].get<int>(), 4242);
  EXPECT_EQ(endpoints["coordinator"], job.coordinator_address());
  EXPECT_EQ(endpoints["master"], job.master_address());
  EXPECT_TRUE(endpoints["metrics"].is_object());
  EXPECT_TRUE(endpoints["metrics"].empty());
  EXPECT_TRUE(endpoints["pids"].empty());
  const nlohmann::json targets =
      nlohmann::json::parse(ReadRaw(path + "/prometheus-targets.json"));
  EXPECT_EQ(targets, nlohmann::json::array());

  // What `gaptrain status` reads back.
  std::string address, read_token;
  ASSERT_TRUE(ReadRunEndpoints(path, &address, &read_token).ok());
  EXPECT_EQ(address, job.coordinator_address());
  EXPECT_EQ(read_token, token);

  dir.reset();
  EXPECT_FALSE(Exists(path + "/endpoints.json")) << "no launcher runs there any more";
  EXPECT_EQ(ReadRunEndpoints(path, &address, &read_token).code(), Code::kNotFound);
}

// ---- ReadRunEndpoints ----

TEST(ReadRunEndpointsTest, MissingEndpointsFileIsNotFoundAndNamed) {
  const std::string path = FreshPath();
  ASSERT_EQ(mkdir(path.c_str(), 0755), 0);
  std::string address, token;
  const Status s = ReadRunEndpoints(path, &address, &token);
  EXPECT_EQ(s.code(), Code::kNotFound);
  EXPECT_NE(s.message().find(path + "/endpoints.json"), std::string::npos) << s.message();
  // No run directory at all reads the same.
  EXPECT_EQ(ReadRunEndpoints(path + "/missing", &address, &token).code(), Code::kNotFound);
}

TEST(ReadRunEndpointsTest, MalformedEndpointsAreDataLoss) {
  const std::string path = FreshPath();
  ASSERT_EQ(mkdir(path.c_str(), 0755), 0);
  WriteRaw(path + "/token", "abc\n");
  for (const std::string bad : {"{not json", "", "[1, 2]", "{\"master\": \"127.0.0.1:1\"}",
                                "{\"coordinator\": 5}"}) {
    WriteRaw(path + "/endpoints.json", bad);
    std::string address, token;
    const Status s = ReadRunEndpoints(path, &address, &token);
    EXPECT_EQ(s.code(), Code::kDataLoss) << "'" << bad << "': " << s.ToString();
    EXPECT_NE(s.message().find("endpoints.json"), std::string::npos) << s.message();
  }
}

TEST(ReadRunEndpointsTest, ReadsAddressAndToken) {
  const std::string path = FreshPath();
  ASSERT_EQ(mkdir(path.c_str(), 0755), 0);
  WriteRaw(path + "/endpoints.json",
           "{\"launcherPid\": 12, \"coordinator\": \"127.0.0.1:40123\", "
           "\"master\": \"127.0.0.1:40124\"}\n");
  WriteRaw(path + "/token", "0123456789abcdef0123456789abcdef\n");
  std::string address, token;
  ASSERT_TRUE(ReadRunEndpoints(path, &address, &token).ok());
  EXPECT_EQ(address, "127.0.0.1:40123");
  EXPECT_EQ(token, "0123456789abcdef0123456789abcdef");
}

TEST(ReadRunEndpointsTest, MissingTokenIsNotFoundAndNamed) {
  const std::string path = FreshPath();
  ASSERT_EQ(mkdir(path.c_str(), 0755), 0);
  WriteRaw(path + "/endpoints.json", "{\"coordinator\": \"127.0.0.1:40123\"}\n");
  std::string address, token;
  Status s = ReadRunEndpoints(path, &address, &token);
  EXPECT_EQ(s.code(), Code::kNotFound);
  EXPECT_NE(s.message().find(path + "/token"), std::string::npos) << s.message();
  WriteRaw(path + "/token", "");
  s = ReadRunEndpoints(path, &address, &token);
  EXPECT_EQ(s.code(), Code::kNotFound) << "an empty token file";
}


TEST(DataCacheDirTest, TheFlagThenTheXdgCacheThenHomeThenTheRunDir) {
  EXPECT_EQ(DataCacheDir("/fast/cache", "/xdg", "/home/u", "runs/j"), "/fast/cache");
  EXPECT_EQ(DataCacheDir("none", "/xdg", "/home/u", "runs/j"), "");
  EXPECT_EQ(DataCacheDir("", "/xdg", "/home/u", "runs/j"), "/xdg/gaptrain/data");
  EXPECT_EQ(DataCacheDir("", nullptr, "/home/u", "runs/j"), "/home/u/.cache/gaptrain/data");
  // A relative or empty $XDG_CACHE_HOME is ignored, as the spec says.
  EXPECT_EQ(DataCacheDir("", "rel", "/home/u", "runs/j"), "/home/u/.cache/gaptrain/data");
  EXPECT_EQ(DataCacheDir("", "", "/home/u", "runs/j"), "/home/u/.cache/gaptrain/data");
  EXPECT_EQ(DataCacheDir("", nullptr, nullptr, "runs/j"), "runs/j/data-cache");
  EXPECT_EQ(DataCacheDir("", nullptr, "", "runs/j"), "runs/j/data-cache");
}

}  // namespace
}  // namespace gaptrain
