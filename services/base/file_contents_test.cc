#include "services/base/file_contents.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <string>

#include "services/testing/test_files.h"

namespace gaptrain {
namespace {

TEST(ReadFile, ReadsEveryByte) {
  const std::string path = TestDir("file_contents") + "/bytes";
  std::string bytes(200000, '\0');  // more than one read's buffer
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(i * 7919 % 251);
  WriteRaw(path, bytes);
  std::string read = "left over";
  ASSERT_TRUE(ReadFile(path, &read).ok());
  EXPECT_EQ(read, bytes);
}

TEST(ReadFile, AnEmptyFileIsEmpty) {
  const std::string path = TestDir("file_contents") + "/empty";
  WriteRaw(path, "");
  std::string read = "left over";
  ASSERT_TRUE(ReadFile(path, &read).ok());
  EXPECT_EQ(read, "");
}

TEST(ReadFile, ReadsFilesOfUnknownSizeToTheirEnd) {
  std::string read;
  ASSERT_TRUE(ReadFile("/proc/self/status", &read).ok());
  EXPECT_NE(read.find("Pid:"), std::string::npos);
}

TEST(ReadFile, AMissingFileIsNotFoundAndNamed) {
  const std::string path = TestDir("file_contents") + "/missing";
  std::string read = "left over";
  Status s = ReadFile(path, &read);
  EXPECT_EQ(s.code(), Status::Code::kNotFound);
  EXPECT_EQ(s.message(), path + ": cannot read: No such file or directory");
  EXPECT_EQ(read, "");
}

TEST(ReadFile, ADirectoryIsAnError) {
  std::string read = "left over";
  Status s = ReadFile(TestDir("file_contents"), &read);
  EXPECT_EQ(s.code(), Status::Code::kUnavailable) << s.ToString();
  EXPECT_NE(s.message().find("cannot read"), std::string::npos);
  EXPECT_EQ(read, "");
}

// Root reads any file, so as root the read runs in a child that has
// become nobody (65534), on a file in a folder nobody may enter.
TEST(ReadFile, AnUnreadableFileIsPermissionDenied) {
  char dir[] = "/tmp/gaptrain-file-contents-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  ASSERT_EQ(::chmod(dir, 0755), 0);
  const std::string path = std::string(dir) + "/secret";
  WriteRaw(path, "secret");
  ASSERT_EQ(::chmod(path.c_str(), 0), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    if (::geteuid() == 0 && (::setgid(65534) != 0 || ::setuid(65534) != 0)) ::_exit(3);
    std::string read;
    const Status s = ReadFile(path, &read);
    ::_exit(s.code() == Status::Code::kPermissionDenied && read.empty() ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ::unlink(path.c_str());
  ::rmdir(dir);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "1: not PERMISSION_DENIED; 3: could not become nobody";
}

}  // namespace
}  // namespace gaptrain
