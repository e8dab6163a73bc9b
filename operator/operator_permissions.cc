#include "operator/operator_permissions.h"

#include <algorithm>
#include <map>
#include <set>
#include <utility>

#include "operator/job_pod_ids.h"

namespace gaptrain {
namespace {

using kube::Call;
using kube::Permissions;
using kube::Resource;

struct Uses {
  Resource resource;
  std::vector<Call> calls;
};

// Who makes each call:
//   informers      list, watch: TrainingJobs and the children (selected by
//                  the gaptrain.io/job-name label), Secrets excepted: RBAC
//                  cannot narrow list or watch to labelled Secrets, so the
//                  operator never reads one (trainingjob/reconcile.h)
//   ExecutePlan    trainingjobs: patch (the pod ledger), delete (TTL);
//                  trainingjobs/status: patch; trainingjobs/scale: patch
//                  (Gap-aware autoscaling, as `kubectl scale` writes it);
//                  pods: apply, delete;
//                  services, configmaps, PVCs, networkpolicies: apply;
//                  secrets: create (the job's token, with its pods);
//                  workloads: apply; workloads/status: patch (--kueue);
//                  events: create
//   LeaderElector  leases: get, create, update
//   OperatorProcess pods: get, once at start-up: its own pod, whose
//                  container's image job pods get when --image is not set
//                  (job_image.h)
// Server-side apply is the RBAC verb "patch", and also "create" because an
// apply that creates the object is authorized as both (kube::Permissions).
const std::vector<Uses>& OperatorCalls() {
  static const std::vector<Uses> uses = {
      {kube::kTrainingJobs, {Call::kList, Call::kWatch, Call::kMergePatch, Call::kDelete}},
      {kube::kTrainingJobs.Subresource("status"), {Call::kMergePatch}},
      {kube::kTrainingJobs.Subresource("scale"), {Call::kMergePatch}},
      {kube::kPods, {Call::kGet, Call::kList, Call::kWatch, Call::kApply, Call::kDelete}},
      {kube::kServices, {Call::kList, Call::kWatch, Call::kApply}},
      {kube::kSecrets, {Call::kCreate}},
      {kube::kConfigMaps, {Call::kList, Call::kWatch, Call::kApply}},
      {kube::kPersistentVolumeClaims, {Call::kList, Call::kWatch, Call::kApply}},
      // Each job's NetworkPolicy (--network-policy, on by default).
      {kube::kNetworkPolicies, {Call::kList, Call::kWatch, Call::kApply}},
      // Kueue admission (--kueue): each job's Workload, its status (the
      // quota given back after an eviction, Finished), the flavors
      // admissions name and the priority classes jobs name. Harmless where Kueue is not installed.
      {kube::kWorkloads, {Call::kList, Call::kWatch, Call::kApply}},
      {kube::kWorkloads.Subresource("status"), {Call::kMergePatch}},
      {kube::kResourceFlavors, {Call::kList, Call::kWatch}},
      {kube::kWorkloadPriorityClasses, {Call::kList, Call::kWatch}},
      {kube::kPriorityClasses, {Call::kList, Call::kWatch}},
      {kube::kEvents, {Call::kCreate}},
      {kube::kLeases, {Call::kGet, Call::kCreate, Call::kUpdate}},
  };
  return uses;
}

}  // namespace

std::vector<std::string> OperatorDiscoveryPaths() {
  return {std::string("/apis/") + kOpenShiftSecurityGroup};
}

std::vector<kube::RbacPermission> OperatorAdmissionPermissions() {
  // Every child's ownerReference to its TrainingJob sets blockOwnerDeletion
  // (desired_children.cc: a foreground deletion of the job waits for its
  // children). The OwnerReferencesPermissionEnforcement admission plugin
  // (on by default in OpenShift) lets only a user who may update the
  // owner's finalizers set it: without this permission every child's
  // create is refused with 403 "cannot set blockOwnerDeletion if an
  // ownerReference refers to a resource you can't set finalizers on".
  // The operator never calls trainingjobs/finalizers itself.
  return {{"gaptrain.io", "trainingjobs/finalizers", "update"}};
}

std::vector<kube::RbacPermission> OperatorPermissions() {
  std::vector<kube::RbacPermission> out = OperatorAdmissionPermissions();
  for (const Uses& u : OperatorCalls()) {
    for (Call call : u.calls) {
      for (kube::RbacPermission& p : Permissions(u.resource, call)) out.push_back(std::move(p));
    }
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

nlohmann::json PolicyRules(const std::vector<kube::RbacPermission>& permissions) {
  // group -> resource -> verbs, then resources with the same verbs share a rule.
  std::map<std::string, std::map<std::string, std::set<std::string>>> by_group;
  for (const kube::RbacPermission& p : permissions) by_group[p.group][p.resource].insert(p.verb);
  nlohmann::json rules = nlohmann::json::array();
  for (const auto& [group, resources] : by_group) {
    std::map<std::set<std::string>, std::vector<std::string>> by_verbs;
    for (const auto& [resource, verbs] : resources) by_verbs[verbs].push_back(resource);
    for (const auto& [verbs, names] : by_verbs) {
      rules.push_back({{"apiGroups", {group}},
                       {"resources", names},
                       {"verbs", std::vector<std::string>(verbs.begin(), verbs.end())}});
    }
  }
  return rules;
}

nlohmann::json OperatorPolicyRules() { return PolicyRules(OperatorPermissions()); }

kube::RbacPermission RequestPermission(const std::string& group, const std::string& resource,
                                       const std::string& subresource, const std::string& verb) {
  return kube::RbacPermission{group, subresource.empty() ? resource : resource + "/" + subresource,
                              verb};
}

}  // namespace gaptrain
