// ProcessCpuSeconds and ProcessMemoryMb of this test's own process, and of
// one that is gone; MachineBusyCpuSeconds counting this process's work.

#include "bench/process_stats.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
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

TEST(ProcessStatsTest, TheMachineCountsThisProcesssWork) {
  const double machine0 = MachineBusyCpuSeconds(), own0 = ProcessCpuSeconds(getpid());
  ASSERT_GT(machine0, 0);
  // Spin until this process has used 0.3 s of CPU (clock ticks are 10 ms).
  volatile uint64_t spin = 0;
  while (ProcessCpuSeconds(getpid()) - own0 < 0.3) {
    for (int i = 0; i < 1000000; ++i) spin = spin + i;
  }
  const double own = ProcessCpuSeconds(getpid()) - own0;
  // The machine was busy at least while this process ran (less a tick of
  // each reading's rounding).
  EXPECT_GE(MachineBusyCpuSeconds() - machine0, own - 0.05);
}

}  // namespace
}  // namespace gaptrain
