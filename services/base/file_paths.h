// Small path helpers the services and the CLI share.

#ifndef GAPTRAIN_SERVICES_BASE_FILE_PATHS_H_
#define GAPTRAIN_SERVICES_BASE_FILE_PATHS_H_

#include <string>

namespace gaptrain {

// The directory part of `path`, as dirname(1) for paths without a trailing
// slash: "a/b" -> "a", "/b" -> "/", "b" -> ".".
std::string DirName(const std::string& path);

// True when `path` names a directory (following symlinks).
bool IsDirectory(const std::string& path);

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_BASE_FILE_PATHS_H_
