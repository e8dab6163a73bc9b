#include "services/worker/signal_watcher.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <thread>

namespace gaptrain {
namespace {

bool WaitStopped(StopFlag* stop) {
  return stop->WaitUntil(std::chrono::steady_clock::now() + std::chrono::seconds(30));
}

TEST(SignalWatcherTest, SigtermSetsTheStopFlagAndDoneEndsTheGracePeriod) {
  StopFlag stop;
  {
    SignalWatcher watcher(&stop, /*grace_seconds=*/60);
    // Sent to the process, as Kubernetes does; whichever thread takes it,
    // the watcher sees it.
    ASSERT_EQ(kill(getpid(), SIGTERM), 0);
    ASSERT_TRUE(WaitStopped(&stop));
    EXPECT_EQ(stop.reason(), StopReason::kPreempted);
    watcher.Done();
  }  // joins without exiting the process
  SUCCEED();
}

TEST(SignalWatcherTest, ThreadsStartedAfterItDoNotTakeTheSignal) {
  StopFlag stop;
  SignalWatcher watcher(&stop, 60);
  std::thread worker([] {
    sigset_t mask;
    pthread_sigmask(SIG_BLOCK, nullptr, &mask);
    EXPECT_TRUE(sigismember(&mask, SIGTERM));
    EXPECT_TRUE(sigismember(&mask, SIGINT));
  });
  worker.join();
  watcher.Done();
}

TEST(SignalWatcherDeathTest, AProcessThatOverrunsItsGracePeriodExitsWithStatusZero) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        StopFlag stop;
        SignalWatcher watcher(&stop, /*grace_seconds=*/0.2);
        kill(getpid(), SIGINT);
        // A call that hangs past the grace period.
        std::this_thread::sleep_for(std::chrono::seconds(60));
      },
      ::testing::ExitedWithCode(0), "");  // the log line goes to stdout
}

}  // namespace
}  // namespace gaptrain
