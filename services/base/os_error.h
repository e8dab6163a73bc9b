// A Status for a failed system call on a path, with the code chosen from
// errno so callers can tell a missing file from a full disk.

#ifndef GAPTRAIN_SERVICES_BASE_OS_ERROR_H_
#define GAPTRAIN_SERVICES_BASE_OS_ERROR_H_

#include <string>

#include "services/base/status.h"

namespace gaptrain {

// "<path>: <what>: <strerror>". ENOENT and ENOTDIR are NOT_FOUND; ENOSPC
// and EDQUOT RESOURCE_EXHAUSTED; EACCES, EPERM and EROFS PERMISSION_DENIED;
// anything else UNAVAILABLE.
Status OsError(const std::string& path, const char* what, int err);

// mkdir -p: creates `dir` and its missing parents (mode 0755). OK when it
// already is a directory; FAILED_PRECONDITION when it exists as something
// else; OsError otherwise.
Status MakeDirs(const std::string& dir);

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_BASE_OS_ERROR_H_
