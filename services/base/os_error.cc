#include "services/base/os_error.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>

namespace gaptrain {

Status OsError(const std::string& path, const char* what, int err) {
  std::string m = path + ": " + what + ": " + std::strerror(err);
  switch (err) {
    case ENOENT:
    case ENOTDIR:
      return Status::NotFound(m);
    case ENOSPC:
    case EDQUOT:
      return Status(Status::Code::kResourceExhausted, m);
    case EACCES:
    case EPERM:
    case EROFS:
      return Status(Status::Code::kPermissionDenied, m);
    default:
      return Status::Unavailable(m);
  }
}

Status MakeDirs(const std::string& dir) {
  struct stat st;
  if (::stat(dir.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return Status::OK();
    return Status::FailedPrecondition(dir + ": exists and is not a directory");
  }
  for (size_t pos = 1; pos <= dir.size(); ++pos) {
    if (pos != dir.size() && dir[pos] != '/') continue;
    std::string prefix = dir.substr(0, pos);
    if (::mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST) {
      return OsError(prefix, "mkdir", errno);
    }
  }
  if (::stat(dir.c_str(), &st) != 0) return OsError(dir, "stat", errno);
  if (!S_ISDIR(st.st_mode)) return Status::FailedPrecondition(dir + ": is not a directory");
  return Status::OK();
}

}  // namespace gaptrain
