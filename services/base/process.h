// Process: a child process its parent owns (`gaptrain run` starts the
// job's services with it; tests start the services and `gaptrain` itself).
//
// What the caller may rely on:
//   - Start() returns only once the binary was exec'd: a missing or
//     non-executable binary is an error naming it, not a child that dies.
//   - The child runs in its own process group, so a Ctrl-C on the terminal
//     reaches the launcher only, which then stops the children in order.
//   - The child is SIGKILLed by the kernel when the thread that called
//     Start() exits (PR_SET_PDEATHSIG), so no child outlives a launcher that
//     crashes or is killed; call Start() from the main thread.
//   - Its stdout and stderr are appended to `log_file`; stdin is /dev/null.
//   - The destructor SIGKILLs a child that is still running and reaps it.
// Not thread-safe.

#ifndef GAPTRAIN_SERVICES_BASE_PROCESS_H_
#define GAPTRAIN_SERVICES_BASE_PROCESS_H_

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "services/base/status.h"

namespace gaptrain {

class Process {
 public:
  struct Spec {
    std::string binary;  // a path; not searched on $PATH
    std::vector<std::string> args;
    std::vector<std::pair<std::string, std::string>> env;  // added to the launcher's
    std::string log_file;
  };

  static Status Start(const Spec& spec, std::unique_ptr<Process>* process);

  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;
  ~Process();

  pid_t pid() const { return pid_; }
  const Spec& spec() const { return spec_; }

  // True until the child has exited; reaps it when it has (no blocking).
  bool Running();
  // The wait status once it has exited (see waitpid), else -1.
  int wait_status() const { return wait_status_; }

  // Sends `signal` if it is still running.
  void Signal(int signal);
  // Waits up to `timeout` for the exit; true once it has exited.
  bool WaitExit(std::chrono::milliseconds timeout);
  // SIGTERM, then SIGKILL after `grace`; returns once it has exited.
  void Stop(std::chrono::milliseconds grace);

 private:
  Process(Spec spec, pid_t pid) : spec_(std::move(spec)), pid_(pid) {}

  Spec spec_;
  pid_t pid_;
  int wait_status_ = -1;
};

// "exit code 3", "killed by SIGKILL": a wait status for messages.
std::string DescribeWaitStatus(int wait_status);

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_BASE_PROCESS_H_
