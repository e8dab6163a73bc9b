// Tests Process with real children: a missing or non-executable binary is
// an error naming it (and leaves no zombie); exit codes and signals are
// read back and described; Spec.env reaches the child; stdout and stderr
// are appended to the log file and stdin is /dev/null; Stop() SIGKILLs a
// child that ignores SIGTERM once the grace is over; the child has its own
// process group; the destructor kills a running child; and the kernel
// kills the child when the process that started it dies (PR_SET_PDEATHSIG).
// Waiting on another process is done by polling with a deadline.

#include "services/base/process.h"

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "services/testing/test_files.h"

namespace gaptrain {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr char kShell[] = "/bin/sh";
constexpr char kSleep[] = "/bin/sleep";

// A path under $TEST_TMPDIR, unique to the running test.
std::string TmpPath(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  return std::string(tmp != nullptr ? tmp : "/tmp") + "/process_test-" +
         ::testing::UnitTest::GetInstance()->current_test_info()->name() + "-" + name;
}

// Polls `condition` until it holds or `timeout` passes; its final value.
bool PollUntil(const std::function<bool()>& condition, milliseconds timeout = seconds(30)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!condition()) {
    if (std::chrono::steady_clock::now() >= deadline) return condition();
    std::this_thread::sleep_for(milliseconds(5));
  }
  return true;
}

Process::Spec Shell(const std::string& script, const std::string& log_file) {
  Process::Spec spec;
  spec.binary = kShell;
  spec.args = {"-c", script};
  spec.log_file = log_file;
  return spec;
}

Process::Spec Sleeper(const std::string& log_file) {
  Process::Spec spec;
  spec.binary = kSleep;
  spec.args = {"1000"};
  spec.log_file = log_file;
  return spec;
}

// True when this process has no child left, reaped or not.
bool NoChildren() {
  int status;
  errno = 0;
  return waitpid(-1, &status, WNOHANG) == -1 && errno == ECHILD;
}

TEST(ProcessTest, MissingBinaryIsAnErrorNamingIt) {
  Process::Spec spec;
  spec.binary = TmpPath("no-such-binary");
  spec.args = {"--flag"};
  spec.log_file = TmpPath("log");
  std::unique_ptr<Process> process;
  const Status s = Process::Start(spec, &process);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find(spec.binary), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("No such file"), std::string::npos) << s.message();
  EXPECT_EQ(process, nullptr);
  EXPECT_TRUE(NoChildren()) << "the failed child was not reaped";
}

TEST(ProcessTest, NonExecutableBinaryIsAnErrorNamingIt) {
  const std::string binary = TmpPath("not-executable");
  { std::ofstream(binary) << "#!/bin/sh\nexit 0\n"; }
  ASSERT_EQ(chmod(binary.c_str(), 0644), 0);
  Process::Spec spec;
  spec.binary = binary;
  spec.log_file = TmpPath("log");
  std::unique_ptr<Process> process;
  const Status s = Process::Start(spec, &process);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find(binary), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("Permission denied"), std::string::npos) << s.message();
  EXPECT_EQ(process, nullptr);
  EXPECT_TRUE(NoChildren());
}

TEST(ProcessTest, UnwritableLogFileIsAnError) {
  Process::Spec spec = Shell("exit 0", TmpPath("missing-dir") + "/log");
  std::unique_ptr<Process> process;
  const Status s = Process::Start(spec, &process);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find(kShell), std::string::npos) << s.message();
  EXPECT_NE(s.message().find(spec.log_file), std::string::npos) << s.message();
  EXPECT_EQ(process, nullptr);
  EXPECT_TRUE(NoChildren());
}

TEST(ProcessTest, ExitCodeIsReadBack) {
  std::unique_ptr<Process> process;
  ASSERT_TRUE(Process::Start(Shell("exit 3", TmpPath("log")), &process).ok());
  ASSERT_NE(process, nullptr);
  EXPECT_GT(process->pid(), 0);
  EXPECT_EQ(process->spec().binary, kShell);
  ASSERT_TRUE(process->WaitExit(seconds(30)));
  EXPECT_FALSE(process->Running());
  const int status = process->wait_status();
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 3);
  EXPECT_EQ(DescribeWaitStatus(status), "exit code 3");
  // Signalling a child that has exited is harmless.
  process->Signal(SIGKILL);
  EXPECT_EQ(process->wait_status(), status);
}

TEST(ProcessTest, CleanExit) {
  std::unique_ptr<Process> process;
  ASSERT_TRUE(Process::Start(Shell("exit 0", TmpPath("log")), &process).ok());
  ASSERT_TRUE(process->WaitExit(seconds(30)));
  EXPECT_EQ(DescribeWaitStatus(process->wait_status()), "exit code 0");
}

TEST(ProcessTest, KilledBySigkillIsDescribed) {
  std::unique_ptr<Process> process;
  ASSERT_TRUE(Process::Start(Sleeper(TmpPath("log")), &process).ok());
  EXPECT_TRUE(process->Running());
  process->Signal(SIGKILL);
  ASSERT_TRUE(process->WaitExit(seconds(30)));
  const int status = process->wait_status();
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(WTERMSIG(status), SIGKILL);
  EXPECT_EQ(DescribeWaitStatus(status), "killed by SIGKILL");
}

TEST(ProcessTest, RunningUntilItExits) {
  std::unique_ptr<Process> process;
  ASSERT_TRUE(Process::Start(Sleeper(TmpPath("log")), &process).ok());
  EXPECT_FALSE(process->WaitExit(milliseconds(20)));
  EXPECT_TRUE(process->Running());
  EXPECT_EQ(process->wait_status(), -1);
  EXPECT_EQ(DescribeWaitStatus(process->wait_status()), "running");
}

TEST(ProcessTest, SpecEnvReachesTheChild) {
  ASSERT_EQ(setenv("GAPTRAIN_TEST_INHERITED", "from-launcher", 1), 0);
  ASSERT_EQ(setenv("GAPTRAIN_TEST_REPLACED", "old", 1), 0);
  const std::string out = TmpPath("out");
  Process::Spec spec = Shell(
      "printf '%s|%s|%s|%s\\n' \"$GAPTRAIN_X\" \"$GAPTRAIN_TEST_REPLACED\" "
      "\"$GAPTRAIN_TEST_INHERITED\" \"$(env | grep -c '^GAPTRAIN_TEST_REPLACED=')\" > " + out,
      TmpPath("log"));
  spec.env = {{"GAPTRAIN_X", "hello world"}, {"GAPTRAIN_TEST_REPLACED", "new"}};
  std::unique_ptr<Process> process;
  ASSERT_TRUE(Process::Start(spec, &process).ok());
  ASSERT_TRUE(process->WaitExit(seconds(30)));
  EXPECT_EQ(DescribeWaitStatus(process->wait_status()), "exit code 0") << ReadRaw(spec.log_file);
  // Set, replaced (once, not twice), and inherited.
  EXPECT_EQ(ReadRaw(out), "hello world|new|from-launcher|1\n");
  unsetenv("GAPTRAIN_TEST_INHERITED");
  unsetenv("GAPTRAIN_TEST_REPLACED");
}

TEST(ProcessTest, OutputIsAppendedToTheLogAndStdinIsDevNull) {
  const std::string log = TmpPath("log");
  { std::ofstream(log) << "before\n"; }
  std::unique_ptr<Process> process;
  ASSERT_TRUE(Process::Start(Shell("echo out; echo err >&2; readlink /proc/self/fd/0", log),
                             &process)
                  .ok());
  ASSERT_TRUE(process->WaitExit(seconds(30)));
  EXPECT_EQ(ReadRaw(log), "before\nout\nerr\n/dev/null\n");
  // A restart appends to the same log.
  ASSERT_TRUE(Process::Start(Shell("echo again", log), &process).ok());
  ASSERT_TRUE(process->WaitExit(seconds(30)));
  EXPECT_EQ(ReadRaw(log), "before\nout\nerr\n/dev/null\nagain\n");
}

TEST(ProcessTest, StopEndsAChildThatIgnoresSigtermWithSigkill) {
  const std::string log = TmpPath("log");
  std::unique_ptr<Process> process;
  ASSERT_TRUE(Process::Start(
                  Shell("trap '' TERM; echo ready; while :; do sleep 0.05; done", log), &process)
                  .ok());
  // SIGTERM is ignored only once the trap is set.
  ASSERT_TRUE(PollUntil([&] { return ReadRaw(log) == "ready\n"; })) << ReadRaw(log);
  const auto grace = milliseconds(300);
  const auto start = std::chrono::steady_clock::now();
  process->Stop(grace);
  EXPECT_GE(std::chrono::steady_clock::now() - start, grace) << "SIGKILL before the grace";
  EXPECT_FALSE(process->Running());
  const int status = process->wait_status();
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(WTERMSIG(status), SIGKILL);
  EXPECT_EQ(DescribeWaitStatus(status), "killed by SIGKILL");
}

TEST(ProcessTest, StopEndsACooperativeChildWithSigterm) {
  std::unique_ptr<Process> process;
  ASSERT_TRUE(Process::Start(Sleeper(TmpPath("log")), &process).ok());
  const auto start = std::chrono::steady_clock::now();
  process->Stop(seconds(120));
  EXPECT_LT(std::chrono::steady_clock::now() - start, seconds(60)) << "waited for the grace";
  EXPECT_EQ(DescribeWaitStatus(process->wait_status()), "killed by SIGTERM");
}

TEST(ProcessTest, ChildHasItsOwnProcessGroup) {
  std::unique_ptr<Process> process;
  ASSERT_TRUE(Process::Start(Sleeper(TmpPath("log")), &process).ok());
  EXPECT_EQ(getpgid(process->pid()), process->pid());
  EXPECT_NE(getpgid(0), process->pid());
}

TEST(ProcessTest, DestructorKillsAndReapsARunningChild) {
  std::unique_ptr<Process> process;
  ASSERT_TRUE(Process::Start(Sleeper(TmpPath("log")), &process).ok());
  const pid_t pid = process->pid();
  ASSERT_EQ(kill(pid, 0), 0);
  process.reset();
  errno = 0;
  EXPECT_EQ(kill(pid, 0), -1) << "still there after the destructor";
  EXPECT_EQ(errno, ESRCH);
  EXPECT_TRUE(NoChildren());
}

// /proc/<pid>/stat: state, parent and start time (clock ticks since boot).
struct ProcStat {
  char state = '?';
  pid_t ppid = 0;
  unsigned long long start_time = 0;
};

bool ReadProcStat(pid_t pid, ProcStat* stat) {
  const std::string text = ReadRaw("/proc/" + std::to_string(pid) + "/stat");
  const size_t paren = text.rfind(')');  // the command name may hold spaces
  if (paren == std::string::npos) return false;
  std::istringstream fields(text.substr(paren + 1));
  std::vector<std::string> f;
  for (std::string field; fields >> field;) f.push_back(field);
  if (f.size() < 20) return false;
  stat->state = f[0][0];        // field 3
  stat->ppid = std::stoi(f[1]);  // field 4
  stat->start_time = std::stoull(f[19]);  // field 22
  return true;
}

// True once the process `pid` that started at `start_time` has died (gone,
// a zombie, or its pid reused).
bool Dead(pid_t pid, unsigned long long start_time) {
  int status;
  waitpid(pid, &status, WNOHANG);  // in case this process reaps orphans
  ProcStat stat;
  if (kill(pid, 0) != 0 && errno == ESRCH) return true;
  if (!ReadProcStat(pid, &stat)) return true;
  return stat.start_time != start_time || stat.state == 'Z' || stat.state == 'X';
}

TEST(ProcessTest, ChildDiesWithTheProcessThatStartedIt) {
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  const std::string log = TmpPath("log");
  const pid_t launcher = fork();
  ASSERT_GE(launcher, 0);
  if (launcher == 0) {
    // The launcher: starts a long-running child, reports its pid, waits to
    // be killed.
    close(pipe_fds[0]);
    std::unique_ptr<Process> process;
    pid_t pid = -1;
    if (Process::Start(Sleeper(log), &process).ok()) pid = process->pid();
    ssize_t ignored = write(pipe_fds[1], &pid, sizeof pid);
    (void)ignored;
    for (;;) pause();
  }
  close(pipe_fds[1]);
  pid_t child = -1;
  ssize_t n;
  do {
    n = read(pipe_fds[0], &child, sizeof child);
  } while (n < 0 && errno == EINTR);
  close(pipe_fds[0]);
  ASSERT_EQ(n, static_cast<ssize_t>(sizeof child));
  if (child <= 0) {
    kill(launcher, SIGKILL);
    waitpid(launcher, nullptr, 0);
    FAIL() << "the launcher could not start its child";
  }
  ProcStat stat;
  ASSERT_TRUE(ReadProcStat(child, &stat));
  EXPECT_EQ(stat.ppid, launcher);
  EXPECT_NE(stat.state, 'Z');

  // The launcher dies without a chance to clean up.
  ASSERT_EQ(kill(launcher, SIGKILL), 0);
  int status;
  ASSERT_EQ(waitpid(launcher, &status, 0), launcher);
  ASSERT_TRUE(WIFSIGNALED(status));

  const bool died = PollUntil([&] { return Dead(child, stat.start_time); });
  if (!died) kill(child, SIGKILL);  // not ours to reap, but not left running
  EXPECT_TRUE(died) << "the child " << child << " outlived its launcher";
}

}  // namespace
}  // namespace gaptrain
