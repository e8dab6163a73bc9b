#include "cli/run/service_binaries.h"

#include <unistd.h>

#include <cstdlib>
#include <sstream>
#include <vector>

#include "services/base/file_paths.h"

namespace gaptrain {
namespace {

bool IsExecutable(const std::string& path) { return access(path.c_str(), X_OK) == 0; }

std::string ThisExecutable() {
  char buffer[4096];
  const ssize_t n = readlink("/proc/self/exe", buffer, sizeof buffer - 1);
  return n > 0 ? std::string(buffer, n) : "";
}

}  // namespace

Status FindServiceBinary(const std::string& package, const std::string& name, std::string* path) {
  std::vector<std::string> candidates;
  if (const char* dir = std::getenv("GAPTRAIN_BIN_DIR"); dir != nullptr && *dir != '\0') {
    candidates.push_back(std::string(dir) + "/" + name);
  }
  const std::string in_runfiles = "/gaptrain/" + package + "/" + name;
  if (const char* dir = std::getenv("RUNFILES_DIR"); dir != nullptr && *dir != '\0') {
    candidates.push_back(dir + in_runfiles);
  }
  const std::string self = ThisExecutable();
  if (!self.empty()) {
    candidates.push_back(self + ".runfiles" + in_runfiles);
    candidates.push_back(DirName(self) + "/" + name);
  }
  if (const char* env_path = std::getenv("PATH"); env_path != nullptr) {
    std::stringstream dirs(env_path);
    std::string dir;
    while (std::getline(dirs, dir, ':')) {
      if (!dir.empty()) candidates.push_back(dir + "/" + name);
    }
  }
  for (const std::string& candidate : candidates) {
    if (IsExecutable(candidate)) {
      *path = candidate;
      return Status::OK();
    }
  }
  std::string looked = "$GAPTRAIN_BIN_DIR, Bazel runfiles, next to " +
                       (self.empty() ? std::string("gaptrain") : self) + ", $PATH";
  return Status::NotFound(name + ": not found (looked in " + looked +
                          "); build it with 'bazel build -c opt //cli:gaptrain'");
}

Status FindServiceBinaries(ServiceBinaries* binaries) {
  GAPTRAIN_RETURN_IF_ERROR(
      FindServiceBinary("services/master", "gaptrain-master", &binaries->master));
  GAPTRAIN_RETURN_IF_ERROR(FindServiceBinary("services/coordinator", "gaptrain-coordinator",
                                             &binaries->coordinator));
  return FindServiceBinary("services/worker", "gaptrain-worker", &binaries->worker);
}

}  // namespace gaptrain
