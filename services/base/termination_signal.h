// TerminationSignal: waits for SIGTERM or SIGINT in a service's main().
//
// Blocking the signals and calling sigwait() is not enough in a process
// that links LibTorch: OpenBLAS starts its threads before main(), with the
// signals unblocked, and a SIGTERM delivered to one of them would kill the
// process with the default action, before it writes its final checkpoint.
// So a real handler is installed: it runs on whichever thread receives the
// signal and only writes the signal number to a pipe (async-signal-safe);
// Wait() reads it. Install before starting the service's own threads.

#ifndef GAPTRAIN_SERVICES_BASE_TERMINATION_SIGNAL_H_
#define GAPTRAIN_SERVICES_BASE_TERMINATION_SIGNAL_H_

#include "services/base/status.h"

namespace gaptrain {

class TerminationSignal {
 public:
  // Installs the SIGTERM and SIGINT handlers (once per process).
  static Status Install();
  // Blocks until one arrives; returns its number.
  static int Wait();
  // Waits at most `timeout_ms` (0: just checks); the signal's number, or 0
  // when none arrived. Lets a supervising loop sleep on its own period.
  static int WaitFor(int timeout_ms);
};

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_BASE_TERMINATION_SIGNAL_H_
