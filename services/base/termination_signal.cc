#include "services/base/termination_signal.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace gaptrain {
namespace {

int g_pipe[2] = {-1, -1};

void OnSignal(int signal) {
  const int saved = errno;
  unsigned char number = static_cast<unsigned char>(signal);
  ssize_t ignored = write(g_pipe[1], &number, 1);
  (void)ignored;
  errno = saved;
}

}  // namespace

Status TerminationSignal::Install() {
  if (g_pipe[0] >= 0) return Status::OK();
  if (pipe2(g_pipe, O_CLOEXEC) != 0) {
    return Status::Internal(std::string("cannot create the signal pipe: ") + std::strerror(errno));
  }
  struct sigaction action {};
  action.sa_handler = OnSignal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  for (int signal : {SIGTERM, SIGINT}) {
    if (sigaction(signal, &action, nullptr) != 0) {
      return Status::Internal(std::string("cannot install a signal handler: ") +
                              std::strerror(errno));
    }
  }
  return Status::OK();
}

int TerminationSignal::Wait() {
  unsigned char number = 0;
  while (read(g_pipe[0], &number, 1) != 1) {
    if (errno != EINTR) return SIGTERM;
  }
  return number;
}

int TerminationSignal::WaitFor(int timeout_ms) {
  struct pollfd fd {};
  fd.fd = g_pipe[0];
  fd.events = POLLIN;
  const int ready = poll(&fd, 1, timeout_ms);
  if (ready <= 0) return 0;  // timeout, or EINTR: the signal's byte is read next time
  unsigned char number = 0;
  return read(g_pipe[0], &number, 1) == 1 ? number : 0;
}

}  // namespace gaptrain
