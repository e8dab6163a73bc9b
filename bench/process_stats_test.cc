// ProcessCpuSeconds and ProcessMemoryMb of this test's own process, and of
// one that is gone.

#include "bench/process_stats.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <vector>

namespace gaptrain {
namespace {

TEST(ProcessStatsTest, ReadsThisProcess) {
  // Touch 64 MB so that the resident set holds at least that.
  std::vector<char> block(64 << 20, 1);
  EXPECT_GE(ProcessMemoryMb(getpid(), "VmRSS"), 64);
  EXPECT_GE(ProcessMemoryMb(getpid(), "VmHWM"), ProcessMemoryMb(getpid(), "VmRSS") - 1);
  EXPECT_EQ(ProcessMemoryMb(getpid(), "NoSuchField"), 0);
  EXPECT_GE(ProcessCpuSeconds(getpid()), 0);
  EXPECT_EQ(block[12345], 1);
}

TEST(ProcessStatsTest, AProcessThatIsGoneReadsZero) {
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) _exit(0);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);  // reaped: /proc/PID is gone
  EXPECT_EQ(ProcessCpuSeconds(child), 0);
  EXPECT_EQ(ProcessMemoryMb(child, "VmRSS"), 0);
}

}  // namespace
}  // namespace gaptrain
