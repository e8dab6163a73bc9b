// ContainerProcess: one container of the test node (LocalNode), run as a
// local process the way a container runtime would start it, without an
// image: in the pod's network namespace, in a private mount namespace where
// the pod's volumes (and its /etc/hosts and /etc/resolv.conf) are
// bind-mounted at their paths, and in a UTS namespace with the pod's
// hostname.
//
// What the caller may rely on:
//   - Start() returns once the command was exec'd: a failure of any step
//     (entering the network namespace, a mount, the working directory,
//     the log file, exec itself) is an error naming the step and the OS
//     error, and no process is left behind.
//   - The process leads its own session and process group. It gets exactly
//     Spec::env, stdin from /dev/null, stdout and stderr appended to
//     Spec::log_file, default signal dispositions and no file descriptors
//     of the caller's.
//   - Missing mountpoints and the working directory are created, as runc
//     creates them in a container's root: inside an enclosing volume when
//     there is one, else on the host's file system, where they stay (empty)
//     after the process is gone; the mounts themselves are visible only to
//     the process and its children.
//   - The kernel SIGKILLs the process when the thread that called Start()
//     exits (PR_SET_PDEATHSIG), so call Start() from a thread that lives as
//     long as the process should.
//   - When the main process exits, whatever is left of its process group
//     is SIGKILLed (a container's processes die with its init); then
//     `on_exit` runs, on a thread of this object's. It must not block on
//     anything held by the caller of the destructor.
//   - Signals never reach a recycled pid: the process is reaped only under
//     the lock that Signal* take.
//   - The destructor SIGKILLs the process group if it still runs and waits
//     until it has been reaped and `on_exit` has returned.
// Thread-safe.

#ifndef GAPTRAIN_OPERATOR_TESTING_CONTAINER_PROCESS_H_
#define GAPTRAIN_OPERATOR_TESTING_CONTAINER_PROCESS_H_

#include <sys/types.h>

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "services/base/status.h"

namespace gaptrain {
namespace kube_testing {

struct BindMount {
  std::string source;  // a host directory or file
  std::string target;  // an absolute path in the container
  bool read_only = false;
};

class ContainerProcess {
 public:
  struct Spec {
    std::string network_namespace;  // a path such as /run/netns/NAME; "" keeps the host's
    std::string hostname;           // "" keeps the host's
    std::vector<BindMount> mounts;  // mounted in this order (parents first)
    std::string working_dir;        // "" for "/"
    std::string binary;             // an absolute path
    std::vector<std::string> argv;  // argv[0] included
    std::vector<std::string> env;   // "NAME=value": the whole environment
    std::string log_file;
  };

  static Status Start(const Spec& spec, std::function<void(int wait_status)> on_exit,
                      std::unique_ptr<ContainerProcess>* process);

  ContainerProcess(const ContainerProcess&) = delete;
  ContainerProcess& operator=(const ContainerProcess&) = delete;
  ~ContainerProcess();

  pid_t pid() const { return pid_; }

  // To the main process / to its whole process group, while not reaped.
  void Signal(int signal);
  void SignalGroup(int signal);

 private:
  ContainerProcess(pid_t pid, std::function<void(int)> on_exit);
  void Reap();

  const pid_t pid_;
  std::function<void(int)> on_exit_;
  std::mutex mu_;
  bool reaped_ = false;  // guarded by mu_
  std::thread reaper_;
};

}  // namespace kube_testing
}  // namespace gaptrain

#endif  // GAPTRAIN_OPERATOR_TESTING_CONTAINER_PROCESS_H_
