#include "operator/testing/container_process.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <utility>

namespace gaptrain {
namespace kube_testing {
namespace {

// The steps of BecomeContainer, for error messages.
enum class Step : int {
  kParentGone,
  kSetNetworkNamespace,
  kUnshare,
  kPrivateMounts,
  kBindMount,
  kReadOnly,
  kHostname,
  kWorkingDir,
  kOpenLog,
  kExec,
};

struct ChildError {
  Step step;
  int index;  // the mount, for kBindMount and kReadOnly
  int error;
};

// Everything the child needs, built before fork: after it, the child of a
// multi-threaded parent may only make async-signal-safe calls.
struct ChildPlan {
  struct Mount {
    std::string source;
    std::string target;  // mutable copy: MakePath writes into it
    bool read_only;
    bool is_file;
  };
  pid_t parent = 0;
  int network_namespace_fd = -1;
  std::string hostname;
  std::vector<Mount> mounts;
  std::string working_dir;
  std::string binary;
  std::string log_file;
  std::vector<char*> argv;
  std::vector<char*> envp;
};

[[noreturn]] void Fail(int error_fd, Step step, int index) {
  const ChildError error{step, index, errno};
  ssize_t ignored = write(error_fd, &error, sizeof error);
  (void)ignored;
  _exit(127);
}

// mkdir -p of the directories above `path` (and of `path` itself unless it
// is to be a file, which is created empty). Failures show up in the mount.
void MakePath(char* path, bool is_file) {
  for (char* p = path + 1; *p != '\0'; ++p) {
    if (*p != '/') continue;
    *p = '\0';
    mkdir(path, 0755);
    *p = '/';
  }
  if (!is_file) {
    mkdir(path, 0755);
    return;
  }
  const int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd >= 0) close(fd);
}

[[noreturn]] void BecomeContainer(ChildPlan& plan, int error_fd) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != plan.parent) Fail(error_fd, Step::kParentGone, 0);
  setsid();
  if (plan.network_namespace_fd >= 0 && setns(plan.network_namespace_fd, CLONE_NEWNET) != 0) {
    Fail(error_fd, Step::kSetNetworkNamespace, 0);
  }
  if (unshare(CLONE_NEWNS | (plan.hostname.empty() ? 0 : CLONE_NEWUTS)) != 0) {
    Fail(error_fd, Step::kUnshare, 0);
  }
  if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
    Fail(error_fd, Step::kPrivateMounts, 0);
  }
  for (size_t i = 0; i < plan.mounts.size(); ++i) {
    ChildPlan::Mount& m = plan.mounts[i];
    MakePath(m.target.data(), m.is_file);
    if (mount(m.source.c_str(), m.target.c_str(), nullptr, MS_BIND | MS_REC, nullptr) != 0) {
      Fail(error_fd, Step::kBindMount, static_cast<int>(i));
    }
    if (m.read_only && mount(nullptr, m.target.c_str(), nullptr,
                             MS_BIND | MS_REMOUNT | MS_RDONLY, nullptr) != 0) {
      Fail(error_fd, Step::kReadOnly, static_cast<int>(i));
    }
  }
  if (!plan.hostname.empty() && sethostname(plan.hostname.data(), plan.hostname.size()) != 0) {
    Fail(error_fd, Step::kHostname, 0);
  }
  MakePath(plan.working_dir.data(), false);
  if (chdir(plan.working_dir.c_str()) != 0) Fail(error_fd, Step::kWorkingDir, 0);

  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  struct sigaction default_action;
  std::memset(&default_action, 0, sizeof default_action);
  default_action.sa_handler = SIG_DFL;
  for (int s = 1; s < NSIG; ++s) {
    if (s != SIGKILL && s != SIGSTOP) sigaction(s, &default_action, nullptr);
  }
  const int in = open("/dev/null", O_RDONLY);
  const int out = open(plan.log_file.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (in < 0 || out < 0) Fail(error_fd, Step::kOpenLog, 0);
  dup2(in, 0);
  dup2(out, 1);
  dup2(out, 2);
  close_range(3, UINT_MAX, CLOSE_RANGE_CLOEXEC);  // error_fd too: exec closes it
  execve(plan.binary.c_str(), plan.argv.data(), plan.envp.data());
  Fail(error_fd, Step::kExec, 0);
}

std::string Describe(const ChildError& e, const ContainerProcess::Spec& spec) {
  auto mount_named = [&](int i) {
    if (i < 0 || static_cast<size_t>(i) >= spec.mounts.size()) return std::string("a mount");
    return spec.mounts[i].source + " at " + spec.mounts[i].target;
  };
  std::string what;
  switch (e.step) {
    case Step::kParentGone: what = "the parent exited before the container started"; break;
    case Step::kSetNetworkNamespace: what = "entering " + spec.network_namespace; break;
    case Step::kUnshare: what = "creating the mount and UTS namespaces"; break;
    case Step::kPrivateMounts: what = "making the mounts private"; break;
    case Step::kBindMount: what = "bind-mounting " + mount_named(e.index); break;
    case Step::kReadOnly: what = "making " + mount_named(e.index) + " read-only"; break;
    case Step::kHostname: what = "setting the hostname " + spec.hostname; break;
    case Step::kWorkingDir: what = "entering the working directory " + spec.working_dir; break;
    case Step::kOpenLog: what = "opening /dev/null and the log " + spec.log_file; break;
    case Step::kExec: what = "exec " + spec.binary; break;
  }
  return what + ": " + std::strerror(e.error);
}

}  // namespace

Status ContainerProcess::Start(const Spec& spec, std::function<void(int)> on_exit,
                               std::unique_ptr<ContainerProcess>* process) {
  if (spec.binary.empty() || spec.binary[0] != '/') {
    return Status::InvalidArgument("binary: must be an absolute path, got \"" + spec.binary +
                                   "\"");
  }
  if (spec.argv.empty()) return Status::InvalidArgument("argv: must hold at least argv[0]");
  if (spec.log_file.empty()) return Status::InvalidArgument("log_file: Required value");
  ChildPlan plan;
  plan.parent = getpid();
  plan.hostname = spec.hostname;
  plan.working_dir = spec.working_dir.empty() ? "/" : spec.working_dir;
  plan.binary = spec.binary;
  plan.log_file = spec.log_file;
  for (const BindMount& m : spec.mounts) {
    if (m.target.empty() || m.target[0] != '/') {
      return Status::InvalidArgument("mount target \"" + m.target + "\": must be absolute");
    }
    struct stat source;
    if (stat(m.source.c_str(), &source) != 0) {
      return Status::NotFound("mount source " + m.source + ": " + std::strerror(errno));
    }
    plan.mounts.push_back({m.source, m.target, m.read_only, !S_ISDIR(source.st_mode)});
  }
  if (plan.working_dir[0] != '/') {
    return Status::InvalidArgument("working_dir \"" + plan.working_dir + "\": must be absolute");
  }
  std::vector<std::string> argv = spec.argv;
  std::vector<std::string> env = spec.env;
  for (std::string& s : argv) plan.argv.push_back(s.data());
  plan.argv.push_back(nullptr);
  for (std::string& s : env) plan.envp.push_back(s.data());
  plan.envp.push_back(nullptr);

  if (!spec.network_namespace.empty()) {
    plan.network_namespace_fd = open(spec.network_namespace.c_str(), O_RDONLY | O_CLOEXEC);
    if (plan.network_namespace_fd < 0) {
      return Status::NotFound("network namespace " + spec.network_namespace + ": " +
                              std::strerror(errno));
    }
  }
  int error_pipe[2];
  if (pipe2(error_pipe, O_CLOEXEC) != 0) {
    const int error = errno;
    if (plan.network_namespace_fd >= 0) close(plan.network_namespace_fd);
    return Status::Internal(std::string("pipe: ") + std::strerror(error));
  }
  const pid_t pid = fork();
  if (pid == 0) {
    close(error_pipe[0]);
    BecomeContainer(plan, error_pipe[1]);
  }
  const int fork_error = errno;
  close(error_pipe[1]);
  if (plan.network_namespace_fd >= 0) close(plan.network_namespace_fd);
  if (pid < 0) {
    close(error_pipe[0]);
    return Status::Unavailable("cannot start " + spec.binary + ": fork: " +
                               std::strerror(fork_error));
  }
  ChildError error{};
  ssize_t n;
  do {
    n = read(error_pipe[0], &error, sizeof error);
  } while (n < 0 && errno == EINTR);
  close(error_pipe[0]);
  if (n == sizeof error) {
    int ignored;
    while (waitpid(pid, &ignored, 0) < 0 && errno == EINTR) {
    }
    const std::string message = "cannot start " + spec.binary + ": " + Describe(error, spec);
    if (error.step == Step::kExec && (error.error == ENOENT || error.error == EACCES)) {
      return Status::NotFound(message);
    }
    return Status::FailedPrecondition(message);
  }
  process->reset(new ContainerProcess(pid, std::move(on_exit)));
  return Status::OK();
}

ContainerProcess::ContainerProcess(pid_t pid, std::function<void(int)> on_exit)
    : pid_(pid), on_exit_(std::move(on_exit)) {
  reaper_ = std::thread([this] { Reap(); });
}

ContainerProcess::~ContainerProcess() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!reaped_) {
      kill(-pid_, SIGKILL);
      kill(pid_, SIGKILL);
    }
  }
  reaper_.join();
}

void ContainerProcess::Reap() {
  siginfo_t info;
  while (waitid(P_PID, pid_, &info, WEXITED | WNOWAIT) != 0 && errno == EINTR) {
  }
  int wait_status = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    // The unreaped main process still holds the group's id.
    kill(-pid_, SIGKILL);
    while (waitpid(pid_, &wait_status, 0) < 0 && errno == EINTR) {
    }
    reaped_ = true;
  }
  if (on_exit_) on_exit_(wait_status);
}

void ContainerProcess::Signal(int signal) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!reaped_) kill(pid_, signal);
}

void ContainerProcess::SignalGroup(int signal) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!reaped_) kill(-pid_, signal);
}

}  // namespace kube_testing
}  // namespace gaptrain
