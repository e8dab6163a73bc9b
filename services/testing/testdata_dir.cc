#include "services/testing/testdata_dir.h"

#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <vector>

#include "services/base/file_paths.h"

namespace gaptrain {
namespace {

// realpath(3), or "" when `path` does not resolve.
std::string RealPath(const std::string& path) {
  char buf[PATH_MAX];
  if (::realpath(path.c_str(), buf) == nullptr) return "";
  return buf;
}

std::string Env(const char* name) {
  const char* v = ::getenv(name);
  return v != nullptr ? std::string(v) : std::string();
}

}  // namespace

Status FindSharedDataDir(std::string* dir) {
  dir->clear();
  const std::string from_env = Env("GAPTRAIN_DATA_DIR");
  if (!from_env.empty()) {
    std::string real = RealPath(from_env);
    if (real.empty() || !IsDirectory(real)) {
      return Status::NotFound("GAPTRAIN_DATA_DIR=" + from_env + " is not a directory");
    }
    *dir = real;
    return Status::OK();
  }

  std::string workspace, tried;
  Status found = FindWorkspaceDir(&workspace);
  if (found.ok()) {
    const std::string data = DirName(workspace) + "/shared/data";
    std::string real = RealPath(data);
    if (!real.empty() && IsDirectory(real)) {
      *dir = real;
      return Status::OK();
    }
    tried = "the workspace is " + workspace + ", but " + data + " is not a directory";
  } else {
    tried = found.message();
  }
  return Status::NotFound(
      "shared data directory not found: set GAPTRAIN_DATA_DIR to the directory holding "
      "mnist/ and fashion-mnist/, or declare data = [\"//:README.md\"] so that "
      "<workspace>/../shared/data can be found: " + tried);
}

Status FindWorkspaceDir(std::string* dir) {
  dir->clear();
  // The runfile README.md is a symlink (possibly through the sandbox's own
  // links) to <workspace>/README.md.
  std::vector<std::string> candidates;
  const std::string srcdir = Env("TEST_SRCDIR");
  const std::string workspace = Env("TEST_WORKSPACE");
  if (!srcdir.empty()) {
    candidates.push_back(srcdir + "/" + (workspace.empty() ? "gaptrain" : workspace) +
                         "/README.md");
  }
  char cwd[PATH_MAX];
  if (::getcwd(cwd, sizeof(cwd)) != nullptr) candidates.push_back(std::string(cwd) + "/README.md");

  std::string tried;
  for (const std::string& candidate : candidates) {
    const std::string readme = RealPath(candidate);
    if (readme.empty()) {
      tried += "\n  " + candidate + " (does not resolve)";
      continue;
    }
    *dir = DirName(readme);
    return Status::OK();
  }
  if (candidates.empty()) tried = "\n  (neither TEST_SRCDIR nor the current directory is known)";
  return Status::NotFound(
      "the workspace (source tree) was not found: declare data = [\"//:README.md\"]. Tried:" +
      tried);
}

std::string SharedDataDir() {
  std::string dir;
  if (!FindSharedDataDir(&dir).ok()) return "";
  return dir;
}

std::string SharedK8sDir() {
  const std::string data = SharedDataDir();
  return data.empty() ? "" : DirName(data) + "/k8s";
}

Status FindRecordedK8sDir(std::string* dir) {
  std::string data;
  Status s = FindSharedDataDir(&data);
  if (!s.ok()) return s;
  const std::string recorded = DirName(data) + "/k8s/recorded";
  if (!IsDirectory(recorded)) {
    return Status::NotFound("the kube-apiserver recordings are missing: " + recorded +
                            " is not a directory (see ../shared/k8s/README.md)");
  }
  *dir = recorded;
  return Status::OK();
}

std::string RecordedK8sExchange(const std::string& name) {
  std::string dir;
  if (!FindRecordedK8sDir(&dir).ok()) return "";
  return dir + "/" + name + ".json";
}

}  // namespace gaptrain
