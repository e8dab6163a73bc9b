#include "services/worker/signal_watcher.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>

namespace gaptrain {
namespace {

std::atomic<int> g_signal_pipe{-1};

extern "C" void OnStopSignal(int signal) {
  const int saved_errno = errno;
  const int fd = g_signal_pipe.load();
  if (fd >= 0) {
    const unsigned char byte = static_cast<unsigned char>(signal);
    ssize_t ignored = write(fd, &byte, 1);
    (void)ignored;
  }
  errno = saved_errno;
}

sigset_t StopSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  return set;
}

}  // namespace

SignalWatcher::SignalWatcher(StopFlag* stop, double grace_seconds)
    : stop_(stop), grace_seconds_(grace_seconds) {
  if (pipe2(pipe_, O_CLOEXEC | O_NONBLOCK) != 0) {
    spdlog::error("signal watcher: pipe2 failed: errno {}", errno);
  }
  g_signal_pipe.store(pipe_[1]);
  struct sigaction action = {};
  action.sa_handler = OnStopSignal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGINT, &action, nullptr);
  const sigset_t set = StopSignals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  thread_ = std::thread([this] { Loop(); });
}

SignalWatcher::~SignalWatcher() {
  Done();
  if (thread_.joinable()) thread_.join();
  g_signal_pipe.store(-1);
  for (int& fd : pipe_) {
    if (fd >= 0) close(fd);
    fd = -1;
  }
}

void SignalWatcher::Done() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    done_ = true;
  }
  cv_.notify_all();
}

void SignalWatcher::Loop() {
  const sigset_t set = StopSignals();
  pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
  while (true) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (done_) return;
    }
    pollfd readable = {pipe_[0], POLLIN, 0};
    if (poll(&readable, 1, /*ms=*/100) <= 0) continue;  // timeout (notices Done()) or EINTR
    unsigned char signal = 0;
    if (read(pipe_[0], &signal, 1) != 1) continue;
    spdlog::info("{}: finishing or abandoning the batch in flight, then leaving (grace {} s)",
                 signal == SIGTERM ? "SIGTERM" : "SIGINT", grace_seconds_);
    stop_->Stop(StopReason::kPreempted);
    break;
  }
  std::unique_lock<std::mutex> lock(mu_);
  const auto grace = std::chrono::duration<double>(grace_seconds_);
  if (cv_.wait_for(lock, grace, [this] { return done_; })) return;
  spdlog::error(
      "the grace period of {} s is over and the worker has not left; exiting (the "
      "coordinator's lease takes its task back)",
      grace_seconds_);
  spdlog::default_logger()->flush();
  std::fflush(nullptr);
  _exit(0);
}

}  // namespace gaptrain
