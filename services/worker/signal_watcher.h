// SignalWatcher: SIGTERM and SIGINT for a worker process. A spot node
// being reclaimed sends SIGTERM, then SIGKILL after the pod's grace period.
//
// What callers may rely on:
//   - Construct it in main() before any thread of the program's own
//     starts. It blocks the signals in the calling thread, so every thread
//     created later inherits the mask; only its own thread unblocks them.
//     Threads that libraries started before main() (OpenBLAS's pool) still
//     have them unblocked, so a signal may land there: the handler only
//     writes the signal number to a pipe (async-signal-safe) and the
//     watcher's thread does the rest. Nothing else runs in signal context.
//   - A signal sets the StopFlag with kPreempted; the loops then finish or
//     abandon their batch and leave.
//   - After a stop, the process has `grace_seconds` to call Done(); if it
//     has not (a call hung past its deadline), the watcher logs it and
//     exits the process with status 0: a preemption is never a failure,
//     and the coordinator's lease takes the task back.
//   - The destructor calls Done() and joins the thread. One watcher per
//     process.

#ifndef GAPTRAIN_SERVICES_WORKER_SIGNAL_WATCHER_H_
#define GAPTRAIN_SERVICES_WORKER_SIGNAL_WATCHER_H_

#include <condition_variable>
#include <mutex>
#include <thread>

#include "services/worker/stop_flag.h"

namespace gaptrain {

class SignalWatcher {
 public:
  SignalWatcher(StopFlag* stop, double grace_seconds);
  ~SignalWatcher();
  SignalWatcher(const SignalWatcher&) = delete;
  SignalWatcher& operator=(const SignalWatcher&) = delete;

  // The process is about to exit on its own.
  void Done();

 private:
  void Loop();

  StopFlag* const stop_;
  const double grace_seconds_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  int pipe_[2] = {-1, -1};  // the handler writes, the thread reads
  std::thread thread_;
};

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_WORKER_SIGNAL_WATCHER_H_
