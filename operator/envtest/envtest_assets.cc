#include "operator/envtest/envtest_assets.h"

#include <pwd.h>
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

constexpr char kHowToBuild[] =
    "export KUBEBUILDER_ASSETS=\"$(scripts/test-cluster.sh)\" builds them (about 10 minutes "
    "once; docs/operator.md)";

// Runs `scripts/test-cluster.sh --installed` once; its last line of output
// is the directory. The script finds its cache under the user's home, which
// a Bazel test's environment may lack: HOME is passed from the password
// database then.
Status RunInstalledCheck(std::string* dir) {
  std::string workspace;
  Status found = FindWorkspaceDir(&workspace);
  if (!found.ok()) {
    return Status::NotFound("KUBEBUILDER_ASSETS is not set, and scripts/test-cluster.sh cannot "
                            "be found: " + found.message());
  }
  const std::string script = workspace + "/scripts/test-cluster.sh";
  if (::access(script.c_str(), X_OK) != 0) {
    return Status::NotFound("KUBEBUILDER_ASSETS is not set, and " + script + " is not there");
  }
  std::string home;
  if (const char* env = ::getenv("HOME"); env != nullptr && *env != '\0') {
    home = env;
  } else if (const passwd* user = ::getpwuid(::getuid()); user != nullptr) {
    home = user->pw_dir;
  }
  const std::string command = "HOME='" + home + "' '" + script + "' --installed 2>&1";
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return Status::Internal("cannot run " + script);
  std::string output;
  char buf[4096];
  size_t n;
  while ((n = ::fread(buf, 1, sizeof(buf), pipe)) > 0) output.append(buf, n);
  const int status = ::pclose(pipe);
  while (!output.empty() && output.back() == '\n') output.pop_back();
  if (status != 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return Status::NotFound("KUBEBUILDER_ASSETS is not set, and " + script +
                            " --installed says: " + output + "; " + kHowToBuild);
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
      status = new Status(RunInstalledCheck(found));
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
    return Status::NotFound(tool + " is not in the envtest assets directory " + dir + " (" +
                            kHowToBuild + "; setup-envtest gives only kube-apiserver, etcd and "
                            "kubectl)");
  }
  return Status::OK();
}

}  // namespace envtest
}  // namespace gaptrain
