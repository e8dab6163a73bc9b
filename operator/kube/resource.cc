#include "operator/kube/resource.h"

#include <algorithm>
#include <tuple>
#include <utility>

namespace gaptrain {
namespace kube {

std::string Resource::ApiVersion() const {
  if (group.empty()) return std::string(version);
  return std::string(group) + "/" + std::string(version);
}

std::string Resource::RbacName() const {
  std::string name(plural);
  if (!subresource.empty()) name += "/" + std::string(subresource);
  return name;
}

std::string Resource::CollectionPath(const std::string& ns) const {
  std::string path = group.empty() ? "/api/" + std::string(version)
                                   : "/apis/" + std::string(group) + "/" + std::string(version);
  if (namespaced && ns != kAllNamespaces) path += "/namespaces/" + ns;
  return path + "/" + std::string(plural);
}

std::string Resource::ObjectPath(const std::string& ns, const std::string& name) const {
  std::string path = CollectionPath(ns) + "/" + name;
  if (!subresource.empty()) path += "/" + std::string(subresource);
  return path;
}

const std::vector<Resource>& KnownResources() {
  static const std::vector<Resource> resources = {
      kPods, kServices, kSecrets, kConfigMaps, kPersistentVolumeClaims,
      kNetworkPolicies, kEvents, kLeases, kTrainingJobs, kWorkloads, kResourceFlavors,
      kWorkloadPriorityClasses, kPriorityClasses};
  return resources;
}

namespace {

constexpr Call kAllCalls[] = {Call::kGet,    Call::kList,       Call::kWatch, Call::kCreate,
                              Call::kUpdate, Call::kMergePatch, Call::kApply, Call::kDelete};

}  // namespace

const char* RbacVerb(Call call) {
  switch (call) {
    case Call::kGet: return "get";
    case Call::kList: return "list";
    case Call::kWatch: return "watch";
    case Call::kCreate: return "create";
    case Call::kUpdate: return "update";
    case Call::kMergePatch: return "patch";
    case Call::kApply: return "patch";
    case Call::kDelete: return "delete";
  }
  return "?";
}

const char* CallName(Call call) {
  return call == Call::kApply ? "apply" : RbacVerb(call);
}

bool AllowedOn(const Resource& resource, Call call) {
  if (resource.subresource.empty()) return true;
  return call == Call::kGet || call == Call::kUpdate || call == Call::kMergePatch ||
         call == Call::kApply;
}

bool RbacPermission::operator<(const RbacPermission& o) const {
  return std::tie(group, resource, verb) < std::tie(o.group, o.resource, o.verb);
}

bool RbacPermission::operator==(const RbacPermission& o) const {
  return group == o.group && resource == o.resource && verb == o.verb;
}

std::vector<RbacPermission> Permissions(const Resource& resource, Call call) {
  std::vector<RbacPermission> out = {
      RbacPermission{std::string(resource.group), resource.RbacName(), RbacVerb(call)}};
  if (call == Call::kApply && resource.subresource.empty()) {
    out.push_back(RbacPermission{std::string(resource.group), resource.RbacName(), "create"});
  }
  return out;
}

std::vector<RbacPermission> ClientPermissions() {
  std::vector<Resource> targets = KnownResources();
  targets.push_back(kPods.Subresource("status"));
  targets.push_back(kTrainingJobs.Subresource("status"));
  targets.push_back(kTrainingJobs.Subresource("scale"));
  targets.push_back(kWorkloads.Subresource("status"));
  std::vector<RbacPermission> out;
  for (const Resource& r : targets) {
    for (Call call : kAllCalls) {
      if (!AllowedOn(r, call)) continue;
      for (RbacPermission& p : Permissions(r, call)) out.push_back(std::move(p));
    }
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace kube
}  // namespace gaptrain
