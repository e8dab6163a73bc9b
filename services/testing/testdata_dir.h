// SharedDataDir: where tests find the real datasets (the directory holding
// mnist/ and fashion-mnist/, see ../shared/data/SOURCES.md).
//
// The environment variable GAPTRAIN_DATA_DIR wins when set (pass it to Bazel
// tests with --test_env=GAPTRAIN_DATA_DIR=...). Otherwise the workspace root
// is found by resolving the runfiles symlink of the workspace's README.md,
// so a test using this must declare data = ["//:README.md"]; the datasets
// are then <workspace>/../shared/data. Works inside Bazel's sandbox, whose
// runfiles symlinks still lead back to the source tree.
//
// Tests must fail, not skip, when the data is missing: check the Status of
// FindSharedDataDir and print it.

#ifndef GAPTRAIN_SERVICES_TESTING_TESTDATA_DIR_H_
#define GAPTRAIN_SERVICES_TESTING_TESTDATA_DIR_H_

#include <string>

#include "services/base/status.h"

namespace gaptrain {

// Sets *dir to the shared data directory (an absolute path without a
// trailing slash). The error says what was tried.
Status FindSharedDataDir(std::string* dir);

// Sets *dir to the workspace root (the source tree holding README.md), found
// by resolving the runfiles symlink of //:README.md (declare it as data) or
// ./README.md.
Status FindWorkspaceDir(std::string* dir);

// FindSharedDataDir's directory, or "" when it cannot be found.
std::string SharedDataDir();

// ../shared/k8s, the data directory's sibling: requests and responses
// recorded from a real Kubernetes API server (../shared/k8s/README.md), and
// a CRD it accepted. "" when the data directory cannot be found.
std::string SharedK8sDir();

// Sets *dir to ../shared/k8s/recorded. The error says what is missing.
Status FindRecordedK8sDir(std::string* dir);

// FindRecordedK8sDir's NAME.json, or "" when the directory cannot be found.
std::string RecordedK8sExchange(const std::string& name);

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_TESTING_TESTDATA_DIR_H_
