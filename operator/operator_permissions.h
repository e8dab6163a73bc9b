// OperatorPermissions: every Kubernetes API call gaptrain-operator makes,
// as RBAC permissions, declared once. The operator's ClusterRole (deploy/)
// and docs/operator.md are checked against this list, and the operator's
// tests check that a real run (informers, reconciles, events, leader
// election) sends nothing outside it.
//
// What callers may rely on:
//   - OperatorPermissions() is sorted, without duplicates, and each of its
//     permissions is either one the Client can use (kube::
//     ClientPermissions()) or one of OperatorAdmissionPermissions(), which
//     no call of the operator uses but an admission plugin checks on its
//     behalf (operator_permissions_test checks both).
//   - OperatorPolicyRules() is the same list as ClusterRole rules
//     ({apiGroups, resources, verbs}), one rule per API group and set of
//     verbs, in a stable order: what a ClusterRole binding to the
//     operator's ServiceAccount must grant.

#ifndef GAPTRAIN_OPERATOR_OPERATOR_PERMISSIONS_H_
#define GAPTRAIN_OPERATOR_OPERATOR_PERMISSIONS_H_

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "operator/kube/resource.h"

namespace gaptrain {

std::vector<kube::RbacPermission> OperatorPermissions();

// The permissions among OperatorPermissions() that the operator needs
// without making the call: admission plugins check them when it writes
// (`update` on trainingjobs/finalizers, for the children's
// blockOwnerDeletion under OwnerReferencesPermissionEnforcement). An audit
// log never shows them as requests.
std::vector<kube::RbacPermission> OperatorAdmissionPermissions();

// The non-resource paths the operator GETs: discovery of the API group
// whose presence means OpenShift (job_pod_ids.h). The built-in ClusterRole
// system:discovery grants them to every authenticated user, so no rule of
// the operator's own names them.
std::vector<std::string> OperatorDiscoveryPaths();

// `permissions` as rbac.authorization.k8s.io/v1 PolicyRules (a JSON array).
nlohmann::json PolicyRules(const std::vector<kube::RbacPermission>& permissions);

// PolicyRules(OperatorPermissions()).
nlohmann::json OperatorPolicyRules();

// The permission an API request needs, from what kube-apiserver's request
// log shows of it: group, resource, subresource and RBAC verb.
kube::RbacPermission RequestPermission(const std::string& group, const std::string& resource,
                                       const std::string& subresource, const std::string& verb);

}  // namespace gaptrain

#endif  // GAPTRAIN_OPERATOR_OPERATOR_PERMISSIONS_H_
