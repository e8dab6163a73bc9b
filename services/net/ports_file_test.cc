// Tests WritePortsFile against the reader that consumes it: ports written
// (one, as a worker reports, or several, as the master and coordinator do)
// come back from WaitForPortsFile in order, also when written while the
// reader is already polling and when a file is rewritten; the bytes are the
// documented "A B" form; and a list no service could report is refused
// without creating the file. The process WaitForPortsFile watches is a real
// /bin/sleep.

#include "services/net/ports_file.h"

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "services/base/process.h"
#include "services/testing/test_files.h"

namespace gaptrain {
namespace {

using Code = Status::Code;
using Ports = std::vector<uint16_t>;

constexpr std::chrono::seconds kTimeout(30);

// A running stand-in for the service whose ports are awaited.
std::unique_ptr<Process> StartSleeper(const std::string& dir) {
  Process::Spec spec;
  spec.binary = "/bin/sleep";
  spec.args = {"1000"};
  spec.log_file = dir + "/sleep.log";
  std::unique_ptr<Process> process;
  Status s = Process::Start(spec, &process);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return process;
}

TEST(PortsFileTest, WrittenPortsReadBackInOrder) {
  const std::string dir = TestDir("ports_file_test");
  std::unique_ptr<Process> sleeper = StartSleeper(dir);
  ASSERT_NE(sleeper, nullptr);

  const std::string two = dir + "/master.ports";
  ASSERT_TRUE(WritePortsFile(two, {50051, 65535}).ok());
  EXPECT_EQ(ReadRaw(two), "50051 65535");
  Ports ports;
  Status s = WaitForPortsFile(sleeper.get(), two, 2, kTimeout, &ports);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(ports, (Ports{50051, 65535}));

  const std::string one = dir + "/worker.ports";
  ASSERT_TRUE(WritePortsFile(one, {1}).ok());
  s = WaitForPortsFile(sleeper.get(), one, 1, kTimeout, &ports);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(ports, (Ports{1}));
}

// Read once, without waiting: a supervisor polls many services at once.
TEST(PortsFileTest, ReadOnceIsUnavailableUntilTheFileHoldsThePorts) {
  const std::string dir = TestDir("ports_file_read_test");
  const std::string path = dir + "/trainer.ports";
  Ports ports = {7};
  EXPECT_EQ(ReadPortsFile(path, 1, &ports).code(), Code::kUnavailable);
  EXPECT_EQ(ports, (Ports{7})) << "left alone";
  ASSERT_TRUE(WritePortsFile(path, {8080}).ok());
  EXPECT_EQ(ReadPortsFile(path, 2, &ports).code(), Code::kUnavailable) << "one of two";
  Status s = ReadPortsFile(path, 1, &ports);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(ports, (Ports{8080}));
}

TEST(PortsFileTest, RewrittenFileReadsAsTheNewPorts) {
  const std::string dir = TestDir("ports_file_test");
  std::unique_ptr<Process> sleeper = StartSleeper(dir);
  ASSERT_NE(sleeper, nullptr);
  const std::string path = dir + "/coordinator.ports";
  ASSERT_TRUE(WritePortsFile(path, {40000, 40001}).ok());
  ASSERT_TRUE(WritePortsFile(path, {7, 8}).ok());
  Ports ports;
  Status s = WaitForPortsFile(sleeper.get(), path, 2, kTimeout, &ports);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(ports, (Ports{7, 8}));
  EXPECT_FALSE(PathExists(path + ".tmp"));
}

// The way a service and its starter meet: the reader polls before the file
// exists.
TEST(PortsFileTest, ReaderWaitingBeforeTheWriteGetsThePorts) {
  const std::string dir = TestDir("ports_file_test");
  std::unique_ptr<Process> sleeper = StartSleeper(dir);
  ASSERT_NE(sleeper, nullptr);
  const std::string path = dir + "/late.ports";
  Status written;
  std::thread writer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    written = WritePortsFile(path, {9090, 9091});
  });
  Ports ports;
  Status s = WaitForPortsFile(sleeper.get(), path, 2, kTimeout, &ports);
  writer.join();
  ASSERT_TRUE(written.ok()) << written.ToString();
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(ports, (Ports{9090, 9091}));
}

TEST(PortsFileTest, RefusesWhatNoServiceCouldReport) {
  const std::string path = TestDir("ports_file_test") + "/bad.ports";
  Status s = WritePortsFile(path, {});
  EXPECT_EQ(s.code(), Code::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find(path), std::string::npos) << s.message();
  s = WritePortsFile(path, {8080, 0});
  EXPECT_EQ(s.code(), Code::kInvalidArgument) << s.ToString();
  EXPECT_FALSE(PathExists(path));
}

TEST(PortsFileTest, MissingDirectoryIsNotFound) {
  const std::string path = TestDir("ports_file_test") + "/no/such/dir/x.ports";
  Status s = WritePortsFile(path, {8080});
  EXPECT_EQ(s.code(), Code::kNotFound) << s.ToString();
  EXPECT_NE(s.message().find(path), std::string::npos) << s.message();
}

}  // namespace
}  // namespace gaptrain
