// gaptrain installed on a test control plane (operator/envtest) as a user
// installs it, so that operator tests run with exactly the shipped
// permissions: the CRD (deploy/crd, given to the ControlPlane's
// Options::crd_files), the namespace gaptrain-system, and the operator's
// ServiceAccount, ClusterRole and binding, either from deploy/
// (`kubectl apply -k deploy/rbac`) or from the Helm chart as the real
// `helm template` renders it.
// Tests only; declare //operator:test_install_data as data.
//
// What callers may rely on:
//   - Each call is what kubectl does; errors hold kubectl's or Helm's
//     output. NOT_FOUND means a tool is missing (envtest_assets.h).
//   - OperatorKubeconfig() authenticates as the ServiceAccount
//     gaptrain-system/gaptrain-operator (kOperatorUser), with
//     gaptrain-system as its namespace: the operator then has the
//     permissions installed, no more (the API server enforces RBAC).

#ifndef GAPTRAIN_TESTS_CLUSTER_TEST_INSTALL_H_
#define GAPTRAIN_TESTS_CLUSTER_TEST_INSTALL_H_

#include <string>
#include <vector>

#include "operator/envtest/control_plane.h"
#include "services/base/status.h"

namespace gaptrain {

inline constexpr char kOperatorNamespace[] = "gaptrain-system";
inline constexpr char kOperatorUser[] = "system:serviceaccount:gaptrain-system:gaptrain-operator";

// deploy/crd's CRD, for ControlPlane::Options::crd_files.
inline constexpr char kTrainingJobCrdFile[] = "deploy/crd/gaptrain.io_trainingjobs.yaml";

enum class RbacSource {
  kDeploy,  // deploy/operator/namespace.yaml, then `kubectl apply -k deploy/rbac`
  kChart,   // the chart's ServiceAccount, ClusterRole and ClusterRoleBinding,
            // rendered by `helm template` (release gaptrain, namespace gaptrain-system)
};

// Installs the operator's identity and permissions from `source`, replacing
// whatever RBAC an earlier call installed.
Status InstallOperatorRbac(envtest::ControlPlane* cluster, RbacSource source);

// A kubeconfig (YAML text) holding a fresh token of the operator's
// ServiceAccount.
Status OperatorKubeconfig(envtest::ControlPlane* cluster, std::string* kubeconfig);

// The requests the operator's ServiceAccount made, from the audit log
// (ControlPlane::Options::audit).
Status OperatorRequests(const envtest::ControlPlane& cluster,
                        std::vector<envtest::AuditRecord>* records);

}  // namespace gaptrain

#endif  // GAPTRAIN_TESTS_CLUSTER_TEST_INSTALL_H_
