// Where tests find the real Kubernetes control plane's binaries, as
// controller-runtime's envtest does: the directory $KUBEBUILDER_ASSETS
// names (kube-apiserver, etcd, kubectl; here also kube-controller-manager,
// kube-scheduler, helm, kueue-manager and minimum/), else the directory
// that <workspace>/scripts/test-cluster.sh has built them into, which
// `scripts/test-cluster.sh --installed` prints without building anything
// (it is run once per process). A test using the fallback declares
// data = ["//:README.md"] so the workspace can be found
// (services/testing/testdata_dir.h).
//
// What callers may rely on: the errors say which binary is missing, where
// it was looked for, and how to get it; tests report them with
// GAPTRAIN_SKIP_OR_FAIL_IN_CI (services/testing/missing_requirement.h).
// Thread-safe.

#ifndef GAPTRAIN_OPERATOR_ENVTEST_ENVTEST_ASSETS_H_
#define GAPTRAIN_OPERATOR_ENVTEST_ENVTEST_ASSETS_H_

#include <string>

#include "services/base/status.h"

namespace gaptrain {
namespace envtest {

// The assets directory (absolute, no trailing slash).
Status FindAssets(std::string* dir);

// `tool` ("kube-apiserver", "etcd", "helm", "minimum/kube-apiserver", ...)
// in that directory, when it is an executable file there.
Status FindTool(const std::string& tool, std::string* path);

}  // namespace envtest
}  // namespace gaptrain

#endif  // GAPTRAIN_OPERATOR_ENVTEST_ENVTEST_ASSETS_H_
