// Tests WriteFileAtomically and AtomicFile on real files under $TEST_TMPDIR:
// the bytes land exactly, an existing file is replaced whole, no temp file
// outlives a write (nor a stale one left by a crash), an uncommitted
// AtomicFile leaves the old file, and failures (missing or unwritable
// directory, a directory in the way) name the path and leave what was there.

#include "services/base/atomic_file.h"

#include <dirent.h>
#include <linux/capability.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "services/testing/test_files.h"

namespace gaptrain {
namespace {

using Code = Status::Code;

std::set<std::string> Entries(const std::string& dir) {
  std::set<std::string> names;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return names;
  while (struct dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name != "." && name != "..") names.insert(name);
  }
  ::closedir(d);
  return names;
}

Status Write(const std::string& path, const std::string& bytes) {
  return WriteFileAtomically(path, bytes.data(), bytes.size());
}

// While alive, the calling thread lacks the capabilities that let root
// ignore file modes, so a 0555 directory is unwritable even to root (the
// tests may run as root in a container). A no-op for other users.
class WithoutFileCapabilities {
 public:
  WithoutFileCapabilities() {
    header_.version = _LINUX_CAPABILITY_VERSION_3;
    header_.pid = 0;
    if (::syscall(SYS_capget, &header_, saved_) != 0) {
      ADD_FAILURE() << "capget: " << std::strerror(errno);
      return;
    }
    __user_cap_data_struct reduced[2];
    std::memcpy(reduced, saved_, sizeof reduced);
    for (int cap : {CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER}) {
      reduced[CAP_TO_INDEX(cap)].effective &= ~CAP_TO_MASK(cap);
    }
    if (::syscall(SYS_capset, &header_, reduced) != 0) {
      ADD_FAILURE() << "capset: " << std::strerror(errno);
      return;
    }
    dropped_ = true;
  }
  ~WithoutFileCapabilities() {
    if (dropped_) ::syscall(SYS_capset, &header_, saved_);
  }
  WithoutFileCapabilities(const WithoutFileCapabilities&) = delete;
  WithoutFileCapabilities& operator=(const WithoutFileCapabilities&) = delete;

 private:
  __user_cap_header_struct header_{};
  __user_cap_data_struct saved_[2]{};
  bool dropped_ = false;
};

TEST(AtomicFileTest, WritesTheBytes) {
  const std::string dir = TestDir("atomic_file_test");
  const std::string path = dir + "/data.bin";
  const std::string bytes("a\0b\xff\n", 5);
  ASSERT_TRUE(Write(path, bytes).ok());
  EXPECT_EQ(ReadRaw(path), bytes);

  const std::string empty = dir + "/empty";
  ASSERT_TRUE(Write(empty, "").ok());
  EXPECT_TRUE(PathExists(empty));
  EXPECT_EQ(ReadRaw(empty), "");
}

TEST(AtomicFileTest, ReplacesAnExistingFileWhole) {
  const std::string path = TestDir("atomic_file_test") + "/state";
  ASSERT_TRUE(Write(path, std::string(100000, 'a')).ok());
  ASSERT_TRUE(Write(path, "xyz").ok());
  EXPECT_EQ(ReadRaw(path), "xyz");  // not "xyzaaaa..."
}

TEST(AtomicFileTest, LeavesNoTempFileBehind) {
  const std::string dir = TestDir("atomic_file_test");
  const std::string path = dir + "/ports";
  ASSERT_TRUE(Write(path, "1").ok());
  ASSERT_TRUE(Write(path, "2").ok());
  EXPECT_EQ(Entries(dir), std::set<std::string>{"ports"});

  // A crash's leftover is reused, not left beside the new file.
  std::ofstream(path + kAtomicFileTempSuffix) << "stale and longer";
  ASSERT_TRUE(Write(path, "3").ok());
  EXPECT_EQ(Entries(dir), std::set<std::string>{"ports"});
  EXPECT_EQ(ReadRaw(path), "3");
}

// A symlink planted at the temp path is never written through.
TEST(AtomicFileTest, NeverWritesThroughASymlinkedTempFile) {
  const std::string dir = TestDir("atomic_file_test");
  const std::string path = dir + "/model.pt";
  const std::string victim = dir + "/victim";
  std::ofstream(victim) << "keep me";
  ASSERT_EQ(::symlink(victim.c_str(), (path + kAtomicFileTempSuffix).c_str()), 0);
  EXPECT_FALSE(Write(path, "payload").ok());
  EXPECT_EQ(ReadRaw(victim), "keep me");
  EXPECT_FALSE(PathExists(path));
}

TEST(AtomicFileTest, StreamedWriteAppearsOnlyOnCommit) {
  const std::string dir = TestDir("atomic_file_test");
  const std::string path = dir + "/model";
  ASSERT_TRUE(Write(path, "old").ok());
  {
    AtomicFile file(path);
    ASSERT_TRUE(file.Open().ok());
    ASSERT_TRUE(file.Append("new ", 4).ok());
    ASSERT_TRUE(file.Append("content", 7).ok());
    EXPECT_EQ(ReadRaw(path), "old");
    ASSERT_TRUE(file.Commit().ok());
  }
  EXPECT_EQ(ReadRaw(path), "new content");
  EXPECT_EQ(Entries(dir), std::set<std::string>{"model"});

  {
    AtomicFile abandoned(path);
    ASSERT_TRUE(abandoned.Open().ok());
    ASSERT_TRUE(abandoned.Append("partial", 7).ok());
    EXPECT_TRUE(PathExists(path + kAtomicFileTempSuffix));
  }
  EXPECT_EQ(ReadRaw(path), "new content");
  EXPECT_EQ(Entries(dir), std::set<std::string>{"model"});
}

TEST(AtomicFileTest, UnwritableDirectoryIsAnErrorAndLeavesTheFile) {
  const std::string dir = TestDir("atomic_file_test");
  const std::string path = dir + "/run.json";
  ASSERT_TRUE(Write(path, "before").ok());
  ASSERT_EQ(::chmod(dir.c_str(), 0555), 0);
  Status s;
  {
    WithoutFileCapabilities unprivileged;
    s = Write(path, "after");
  }
  ASSERT_EQ(::chmod(dir.c_str(), 0755), 0);
  EXPECT_EQ(s.code(), Code::kPermissionDenied) << s.ToString();
  EXPECT_NE(s.message().find(path), std::string::npos) << s.message();
  EXPECT_EQ(ReadRaw(path), "before");
  EXPECT_EQ(Entries(dir), std::set<std::string>{"run.json"});
}

TEST(AtomicFileTest, MissingDirectoryIsNotFound) {
  const std::string path = TestDir("atomic_file_test") + "/no/such/dir/file";
  Status s = Write(path, "x");
  EXPECT_EQ(s.code(), Code::kNotFound) << s.ToString();
  EXPECT_NE(s.message().find(path), std::string::npos) << s.message();
}

TEST(AtomicFileTest, FailedRenameRemovesTheTempFile) {
  const std::string dir = TestDir("atomic_file_test");
  const std::string path = dir + "/taken";
  ASSERT_EQ(::mkdir(path.c_str(), 0755), 0);
  Status s = Write(path, "x");
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find(path), std::string::npos) << s.message();
  EXPECT_EQ(Entries(dir), std::set<std::string>{"taken"});
}

}  // namespace
}  // namespace gaptrain
