#include "services/testing/private_hosts.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace gaptrain {
namespace {

Status OsError(const std::string& what) {
  return Status::FailedPrecondition(what + ": " + std::strerror(errno) +
                                    (errno == EPERM ? " (needs root)" : ""));
}

// Truncates and writes `text` with one write(2), keeping the inode.
Status WriteInPlace(const std::string& path, const std::string& text) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return OsError("cannot open " + path);
  const ssize_t n = write(fd, text.data(), text.size());
  const int saved = errno;
  close(fd);
  errno = saved;
  if (n != static_cast<ssize_t>(text.size())) return OsError("cannot write " + path);
  return Status::OK();
}

}  // namespace

Status PrivateHosts::Enter(const std::string& dir, std::unique_ptr<PrivateHosts>* hosts) {
  const std::string hosts_path = dir + "/hosts";
  const std::string resolv_path = dir + "/resolv.conf";
  std::unique_ptr<PrivateHosts> h(new PrivateHosts(hosts_path));
  GAPTRAIN_RETURN_IF_ERROR(h->Write());
  // "lookup file": c-ares answers from the hosts file only. glibc ignores
  // the line; for it, the unreachable server fails within a second.
  GAPTRAIN_RETURN_IF_ERROR(WriteInPlace(
      resolv_path,
      "# services/testing/private_hosts.h: names come from the hosts file only\n"
      "lookup file\nnameserver 127.0.0.1\noptions timeout:1 attempts:1\n"));
  if (unshare(CLONE_NEWNS) != 0) return OsError("unshare(CLONE_NEWNS)");
  if (mount("none", "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
    return OsError("making the mounts private");
  }
  if (mount(hosts_path.c_str(), "/etc/hosts", nullptr, MS_BIND, nullptr) != 0) {
    return OsError("bind-mounting " + hosts_path + " over /etc/hosts");
  }
  if (mount(resolv_path.c_str(), "/etc/resolv.conf", nullptr, MS_BIND, nullptr) != 0) {
    return OsError("bind-mounting " + resolv_path + " over /etc/resolv.conf");
  }
  *hosts = std::move(h);
  return Status::OK();
}

Status PrivateHosts::Set(const std::string& name, const std::string& ip) {
  if (ip.empty()) {
    names_.erase(name);
  } else {
    names_[name] = ip;
  }
  return Write();
}

Status PrivateHosts::Write() {
  std::string text = "127.0.0.1 localhost\n::1 localhost\n";
  for (const auto& [name, ip] : names_) text += ip + " " + name + "\n";
  return WriteInPlace(path_, text);
}

}  // namespace gaptrain
