#include "services/base/process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <thread>

extern char** environ;

namespace gaptrain {
namespace {

// In the child, between fork and exec: only async-signal-safe calls.
// Reports errno through `error_fd` (close-on-exec, so the parent reads EOF
// when exec succeeds).
[[noreturn]] void BecomeChild(const Process::Spec& spec, char* const* argv, char* const* envp,
                              pid_t parent, int error_fd) {
  setpgid(0, 0);
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(127);  // the launcher died before prctl
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  signal(SIGINT, SIG_DFL);
  signal(SIGTERM, SIG_DFL);
  const int in = open("/dev/null", O_RDONLY);
  const int out = open(spec.log_file.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (in < 0 || out < 0) {
    const int error = errno;
    ssize_t ignored = write(error_fd, &error, sizeof error);
    (void)ignored;
    _exit(127);
  }
  dup2(in, 0);
  dup2(out, 1);
  dup2(out, 2);
  execve(argv[0], argv, envp);
  const int error = errno;
  ssize_t ignored = write(error_fd, &error, sizeof error);
  (void)ignored;
  _exit(127);
}

}  // namespace

Status Process::Start(const Spec& spec, std::unique_ptr<Process>* process) {
  // Everything the child needs is built before fork: after it, only
  // async-signal-safe calls are allowed (the launcher has threads).
  std::vector<std::string> strings;
  strings.push_back(spec.binary);
  strings.insert(strings.end(), spec.args.begin(), spec.args.end());
  std::vector<char*> argv;
  for (std::string& s : strings) argv.push_back(s.data());
  argv.push_back(nullptr);
  // The environment: the launcher's, with spec.env replacing same-named
  // entries (setenv would race with other threads' getenv).
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry = *e;
    bool replaced = false;
    for (const auto& kv : spec.env) replaced |= entry.rfind(kv.first + "=", 0) == 0;
    if (!replaced) env_strings.push_back(entry);
  }
  for (const auto& [name, value] : spec.env) env_strings.push_back(name + "=" + value);
  std::vector<char*> envp;
  for (std::string& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);

  int error_pipe[2];
  if (pipe2(error_pipe, O_CLOEXEC) != 0) {
    return Status::Internal(std::string("pipe: ") + std::strerror(errno));
  }
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid == 0) BecomeChild(spec, argv.data(), envp.data(), parent, error_pipe[1]);
  const int fork_error = errno;
  close(error_pipe[1]);
  if (pid < 0) {
    close(error_pipe[0]);
    return Status::Unavailable("cannot start " + spec.binary + ": fork: " +
                               std::strerror(fork_error));
  }
  int child_error = 0;
  ssize_t n;
  do {
    n = read(error_pipe[0], &child_error, sizeof child_error);
  } while (n < 0 && errno == EINTR);
  close(error_pipe[0]);
  if (n == sizeof child_error) {
    int ignored;
    waitpid(pid, &ignored, 0);
    return Status::FailedPrecondition("cannot start " + spec.binary + " (log " + spec.log_file +
                                      "): " + std::strerror(child_error));
  }
  process->reset(new Process(spec, pid));
  return Status::OK();
}

Process::~Process() {
  if (Running()) {
    kill(pid_, SIGKILL);
    int status;
    waitpid(pid_, &status, 0);
  }
}

bool Process::Running() {
  if (wait_status_ != -1) return false;
  int status = 0;
  const pid_t r = waitpid(pid_, &status, WNOHANG);
  if (r == pid_) {
    wait_status_ = status;
    return false;
  }
  return true;
}

void Process::Signal(int signal) {
  if (Running()) kill(pid_, signal);
}

bool Process::WaitExit(std::chrono::milliseconds timeout) {
  // waitpid has no timeout; a 10 ms poll is cheap against process lifetimes.
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (Running()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

void Process::Stop(std::chrono::milliseconds grace) {
  Signal(SIGTERM);
  if (WaitExit(grace)) return;
  Signal(SIGKILL);
  WaitExit(std::chrono::hours(1));
}

std::string DescribeWaitStatus(int wait_status) {
  if (wait_status == -1) return "running";
  if (WIFEXITED(wait_status)) return "exit code " + std::to_string(WEXITSTATUS(wait_status));
  if (WIFSIGNALED(wait_status)) {
    const int s = WTERMSIG(wait_status);
    const char* name = sigabbrev_np(s);
    return std::string("killed by ") + (name != nullptr ? std::string("SIG") + name
                                                        : "signal " + std::to_string(s));
  }
  return "wait status " + std::to_string(wait_status);
}

}  // namespace gaptrain
