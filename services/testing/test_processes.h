// Helpers for tests that run gaptrain's binaries as real processes, started
// from the test's runfiles (declare them as data deps): a child process that
// reports its ports through --ports-file, and polling a condition with a
// deadline (state inside another process can only be observed from
// outside; no sleeps as synchronisation).

#ifndef GAPTRAIN_SERVICES_TESTING_TEST_PROCESSES_H_
#define GAPTRAIN_SERVICES_TESTING_TEST_PROCESSES_H_

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "services/base/process.h"

namespace gaptrain {

// $TEST_TMPDIR/<name>, emptied.
std::string TestTempDir(const std::string& name);

// Runs the shell line `command`; *output gets what it printed (stdout and
// stderr, appended). Returns its wait status as pclose gives it: 0 when it
// exited 0; -1 when it could not start.
int RunShell(const std::string& command, std::string* output);

// Polls `condition` every 20 ms until it holds or `timeout` passes;
// returns its last value.
bool Eventually(const std::function<bool()>& condition,
                std::chrono::milliseconds timeout = std::chrono::seconds(60));

class ChildProcess {
 public:
  // Starts `binary` (a runfiles path such as "services/worker/gaptrain-worker")
  // with `args` plus "--ports-file <ports_file>", $GAPTRAIN_TOKEN set to
  // `token` and stdout and stderr appended to `log_file`; waits (up to 60 s)
  // until the ports file holds `port_count` numbers. started() is false when
  // the process exited or never wrote them.
  ChildProcess(const std::string& binary, std::vector<std::string> args,
               const std::string& ports_file, const std::string& log_file, const std::string& token,
               int port_count);
  ~ChildProcess();  // SIGKILL if still running (see Process)
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  bool started() const { return !ports_.empty(); }
  int port(size_t i) const { return i < ports_.size() ? ports_[i] : 0; }
  std::string address(size_t i = 0) const { return "127.0.0.1:" + std::to_string(port(i)); }
  const std::string& log_file() const { return log_file_; }

  // Sends `signal` without waiting.
  void Signal(int signal);
  // Waits up to `timeout` for the exit; true with its wait status.
  bool WaitExit(std::chrono::milliseconds timeout, int* status);
  // Sends `signal` and waits for the exit; returns the wait status (-1 if
  // it was not running).
  int Kill(int signal);
  bool running() const;

 private:
  std::unique_ptr<Process> process_;
  std::string log_file_;
  std::vector<int> ports_;
};

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_TESTING_TEST_PROCESSES_H_
