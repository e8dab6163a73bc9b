#include "operator/envtest/envtest_assets.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <mutex>

#include "services/base/file_paths.h"
#include "services/testing/testdata_dir.h"

namespace gaptrain {
namespace envtest {
namespace {

constexpr char kFallbackDir[] = "/tmp/gaptrain-envtest/v1.26.5";

// Runs setup.sh once; its last line of output is the directory.
Status RunSetupScript(std::string* dir) {
  std::string data;
  Status found = FindSharedDataDir(&data);
  if (!found.ok()) {
    return Status::NotFound(
        "KUBEBUILDER_ASSETS is not set, and ../shared/envtest/setup.sh cannot be found: " +
        found.message());
  }
  const std::string script = DirName(data) + "/envtest/setup.sh";
  if (::access(script.c_str(), X_OK) != 0) {
    return Status::NotFound("KUBEBUILDER_ASSETS is not set, and " + script +
                            " is not there to make it");
  }
  const std::string command =
      "ENVTEST_DIR='" + std::string(kFallbackDir) + "' '" + script + "' 2>&1";
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return Status::Internal("cannot run " + script);
  std::string output;
  char buf[4096];
  size_t n;
  while ((n = ::fread(buf, 1, sizeof(buf), pipe)) > 0) output.append(buf, n);
  const int status = ::pclose(pipe);
  while (!output.empty() && output.back() == '\n') output.pop_back();
  if (status != 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return Status::NotFound("KUBEBUILDER_ASSETS is not set, and " + script + " failed: " + output);
  }
  const size_t last_line = output.rfind('\n');
  *dir = last_line == std::string::npos ? output : output.substr(last_line + 1);
  return Status::OK();
}

}  // namespace

Status FindAssets(std::string* dir) {
  static std::once_flag once;
  static Status* status;
  static std::string* found;
  std::call_once(once, [] {
    found = new std::string;
    const char* env = ::getenv("KUBEBUILDER_ASSETS");
    if (env != nullptr && *env != '\0') {
      *found = env;
      status = new Status(IsDirectory(*found)
                              ? Status::OK()
                              : Status::NotFound("KUBEBUILDER_ASSETS=" + *found +
                                                 " is not a directory"));
    } else {
      status = new Status(RunSetupScript(found));
    }
    while (found->size() > 1 && found->back() == '/') found->pop_back();
  });
  *dir = *found;
  return *status;
}

Status FindTool(const std::string& tool, std::string* path) {
  std::string dir;
  Status s = FindAssets(&dir);
  if (!s.ok()) return s;
  *path = dir + "/" + tool;
  if (::access(path->c_str(), X_OK) != 0) {
    return Status::NotFound(
        tool + " is not in the envtest assets directory " + dir +
        " (export KUBEBUILDER_ASSETS=\"$(../shared/envtest/setup.sh)\"; etcd is Debian's "
        "etcd-server; on other machines `setup-envtest use 1.26.x -p path` gives "
        "kube-apiserver, etcd and kubectl)");
  }
  return Status::OK();
}

}  // namespace envtest
}  // namespace gaptrain
