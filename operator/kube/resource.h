// Resource: names one kind of Kubernetes object the way the REST API does
// (group, version, plural resource, optional subresource), and the table of
// every call the Client can make, as RBAC permissions.
//
// What callers may rely on:
//   - The constants below (kPods, ..., kTrainingJobs) are the resources the
//     operator uses; Subresource("status") or Subresource("scale") names a
//     subresource of one of them. Fields are views of string literals.
//   - Paths are built exactly as kube-apiserver serves them:
//     /api/v1/namespaces/NS/pods/NAME for the core group,
//     /apis/GROUP/VERSION/namespaces/NS/PLURAL/NAME/SUBRESOURCE otherwise;
//     cluster-scoped resources have no namespaces/NS segment, and neither
//     has a namespaced collection across every namespace (kAllNamespaces:
//     /api/v1/pods), which only list and watch use.
//   - ClientPermissions() is the single list of (group, resource[/sub],
//     verb) the Client can issue; the operator's ClusterRole is checked
//     against it. Permissions(resource, call) are the RBAC permissions one
//     call needs; the Client refuses calls the table does not allow (e.g.
//     list on a subresource) before sending anything.

#ifndef GAPTRAIN_OPERATOR_KUBE_RESOURCE_H_
#define GAPTRAIN_OPERATOR_KUBE_RESOURCE_H_

#include <string>
#include <string_view>
#include <vector>

namespace gaptrain {
namespace kube {

// The namespace argument that means every namespace, for list and watch of
// a namespaced resource (client-go's metav1.NamespaceAll). It is not a
// valid namespace name, so it cannot be mistaken for one.
inline constexpr char kAllNamespaces[] = "*";

struct Resource {
  std::string_view group;    // "" for the core group
  std::string_view version;  // "v1"
  std::string_view plural;   // "pods"
  std::string_view kind;     // "Pod"
  bool namespaced = true;
  std::string_view subresource;  // "", "status" or "scale"

  constexpr Resource Subresource(std::string_view sub) const {
    return Resource{group, version, plural, kind, namespaced, sub};
  }

  // "v1" or "gaptrain.io/v1alpha1".
  std::string ApiVersion() const;
  // The name RBAC uses: "pods" or "trainingjobs/status".
  std::string RbacName() const;
  // "/api/v1/namespaces/default/pods" (ns ignored when cluster-scoped;
  // "/api/v1/pods" for kAllNamespaces).
  std::string CollectionPath(const std::string& ns) const;
  // CollectionPath + "/NAME" (+ "/SUBRESOURCE").
  std::string ObjectPath(const std::string& ns, const std::string& name) const;
};

inline constexpr Resource kPods{"", "v1", "pods", "Pod", true, ""};
inline constexpr Resource kServices{"", "v1", "services", "Service", true, ""};
inline constexpr Resource kSecrets{"", "v1", "secrets", "Secret", true, ""};
inline constexpr Resource kConfigMaps{"", "v1", "configmaps", "ConfigMap", true, ""};
inline constexpr Resource kPersistentVolumeClaims{"",   "v1", "persistentvolumeclaims",
                                                  "PersistentVolumeClaim", true, ""};
inline constexpr Resource kNetworkPolicies{"networking.k8s.io", "v1", "networkpolicies",
                                           "NetworkPolicy", true, ""};
inline constexpr Resource kEvents{"events.k8s.io", "v1", "events", "Event", true, ""};
inline constexpr Resource kLeases{"coordination.k8s.io", "v1", "leases", "Lease", true, ""};
inline constexpr Resource kTrainingJobs{"gaptrain.io", "v1alpha1", "trainingjobs", "TrainingJob",
                                        true, ""};
// Kueue's (v1beta2, the version Kueue v0.17 stores): a TrainingJob
// queued with Kueue is admitted through a Workload (trainingjob/kueue_workload.h).
inline constexpr Resource kWorkloads{"kueue.x-k8s.io", "v1beta2", "workloads", "Workload", true,
                                     ""};
inline constexpr Resource kResourceFlavors{"kueue.x-k8s.io", "v1beta2", "resourceflavors",
                                           "ResourceFlavor", false, ""};
inline constexpr Resource kWorkloadPriorityClasses{"kueue.x-k8s.io", "v1beta2",
                                                   "workloadpriorityclasses",
                                                   "WorkloadPriorityClass", false, ""};
// The pods' PriorityClasses, which a Workload's priority comes from when
// the job names no WorkloadPriorityClass (as Kueue's own integrations).
inline constexpr Resource kPriorityClasses{"scheduling.k8s.io", "v1", "priorityclasses",
                                           "PriorityClass", false, ""};

// The resources above, in that order.
const std::vector<Resource>& KnownResources();

// What the Client does to the API server. Merge patch and server-side
// apply are both the RBAC verb "patch".
enum class Call { kGet, kList, kWatch, kCreate, kUpdate, kMergePatch, kApply, kDelete };

// "get", "list", "watch", "create", "update", "patch" or "delete".
const char* RbacVerb(Call call);
// How errors name the call: "get", ..., "patch" (merge), "apply", "delete".
const char* CallName(Call call);
// False for calls the Client never makes on a subresource (list, watch,
// create, delete); every call is allowed on a main resource.
bool AllowedOn(const Resource& resource, Call call);

struct RbacPermission {
  std::string group;     // "" for the core group
  std::string resource;  // "pods" or "trainingjobs/status"
  std::string verb;      // "get", ...

  bool operator<(const RbacPermission& o) const;
  bool operator==(const RbacPermission& o) const;
};

// The permissions `call` on `resource` needs: one, but two for a
// server-side apply of a whole object, which kube-apiserver authorizes as
// "patch" and, when the object does not exist yet, also as "create"
// (an apply to a subresource never creates anything).
std::vector<RbacPermission> Permissions(const Resource& resource, Call call);

// Every permission the Client can use: each known resource with each call,
// and its status and scale subresources (pods: status only) with the calls
// allowed there; sorted, without duplicates.
std::vector<RbacPermission> ClientPermissions();

}  // namespace kube
}  // namespace gaptrain

#endif  // GAPTRAIN_OPERATOR_KUBE_RESOURCE_H_
