// PrivateHosts: name resolution a test controls, for servers that move to a
// new address behind the same name, as a Kubernetes pod replaced behind a
// headless Service does (a new pod, a new IP, the same DNS name).
//
// Enter() moves the calling thread into a mount namespace of its own
// (unshare(CLONE_NEWNS), every mount made private so nothing leaks back)
// and bind-mounts two files of the test's over /etc/hosts and
// /etc/resolv.conf. The resolv.conf names no reachable DNS server and asks
// c-ares (gRPC's default resolver) to look in the hosts file only, so a
// name that is not there fails at once instead of after a DNS timeout.
// Set() rewrites the hosts file in place: a bind mount pins the file's
// inode, so it is never replaced, and both gRPC's c-ares resolver and
// glibc read it again on every lookup.
//
// What callers may rely on:
//   - A mount namespace belongs to a thread: Enter() affects the thread
//     that calls it and the processes that thread starts afterwards
//     (ChildProcess from the test's main thread), not threads that already
//     run (gRPC's). Give the processes under test the names; let the test
//     itself reach them by address.
//   - Enter() needs root (CAP_SYS_ADMIN); without it, an error saying so
//     (for GAPTRAIN_SKIP_OR_FAIL_IN_CI). Entering twice is harmless.
//   - Not thread-safe.

#ifndef GAPTRAIN_SERVICES_TESTING_PRIVATE_HOSTS_H_
#define GAPTRAIN_SERVICES_TESTING_PRIVATE_HOSTS_H_

#include <map>
#include <memory>
#include <string>

#include "services/base/status.h"

namespace gaptrain {

class PrivateHosts {
 public:
  // Writes the files in `dir` and mounts them; *hosts maps nothing yet
  // except localhost.
  static Status Enter(const std::string& dir, std::unique_ptr<PrivateHosts>* hosts);

  // `name` resolves to the IPv4 address `ip` from now on; "" removes it
  // (the name then does not resolve, as a Service without ready pods).
  Status Set(const std::string& name, const std::string& ip);

 private:
  explicit PrivateHosts(std::string path) : path_(std::move(path)) {}
  Status Write();

  const std::string path_;
  std::map<std::string, std::string> names_;
};

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_TESTING_PRIVATE_HOSTS_H_
