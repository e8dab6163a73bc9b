// The API resources tests use besides the operator's own (kube/resource.h):
// what a cluster's administrator or kubelet writes, never the operator.

#ifndef GAPTRAIN_OPERATOR_ENVTEST_API_RESOURCES_H_
#define GAPTRAIN_OPERATOR_ENVTEST_API_RESOURCES_H_

#include "operator/kube/resource.h"

namespace gaptrain {
namespace envtest {

inline constexpr kube::Resource kNamespaces{"", "v1", "namespaces", "Namespace", false, ""};
inline constexpr kube::Resource kNodes{"", "v1", "nodes", "Node", false, ""};
inline constexpr kube::Resource kServiceAccounts{"",   "v1", "serviceaccounts",
                                                 "ServiceAccount", true, ""};
inline constexpr kube::Resource kResourceQuotas{"",   "v1", "resourcequotas",
                                                "ResourceQuota", true, ""};
inline constexpr kube::Resource kPersistentVolumes{"",   "v1", "persistentvolumes",
                                                   "PersistentVolume", false, ""};
inline constexpr kube::Resource kRoles{"rbac.authorization.k8s.io", "v1", "roles", "Role", true,
                                       ""};
inline constexpr kube::Resource kRoleBindings{"rbac.authorization.k8s.io", "v1", "rolebindings",
                                              "RoleBinding", true, ""};
inline constexpr kube::Resource kClusterRoles{"rbac.authorization.k8s.io", "v1", "clusterroles",
                                              "ClusterRole", false, ""};
inline constexpr kube::Resource kClusterRoleBindings{"rbac.authorization.k8s.io", "v1",
                                                     "clusterrolebindings", "ClusterRoleBinding",
                                                     false, ""};
inline constexpr kube::Resource kCustomResourceDefinitions{
    "apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", false,
    ""};

}  // namespace envtest
}  // namespace gaptrain

#endif  // GAPTRAIN_OPERATOR_ENVTEST_API_RESOURCES_H_
