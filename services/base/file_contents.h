// ReadFile: the whole of a file, as bytes. Every part of gaptrain that
// reads a whole file (a job file, a token, a PEM, a state file, a log)
// reads it with this.

#ifndef GAPTRAIN_SERVICES_BASE_FILE_CONTENTS_H_
#define GAPTRAIN_SERVICES_BASE_FILE_CONTENTS_H_

#include <string>

#include "services/base/status.h"

namespace gaptrain {

// Replaces *contents with the bytes of `path`, read to its end (so files
// whose size the kernel does not know, as in /proc, are read whole too).
// Errors name the file and the OS error, coded as OsError does
// (services/base/os_error.h): "<path>: cannot read: <reason>", a missing
// file NOT_FOUND, EACCES PERMISSION_DENIED, a directory UNAVAILABLE; on
// error *contents is empty.
Status ReadFile(const std::string& path, std::string* contents);

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_BASE_FILE_CONTENTS_H_
