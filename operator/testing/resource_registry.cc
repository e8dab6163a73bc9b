#include "operator/testing/resource_registry.h"

#include <utility>

#include "operator/testing/crd_definition.h"
#include "operator/testing/json_fields.h"

namespace gaptrain {
namespace kube_testing {

namespace {

ResourceTypePtr Builtin(const std::string& group, const std::string& resource,
                        const std::string& singular, const std::string& kind, KindRules rules,
                        bool status_subresource, bool return_deleted_object,
                        std::vector<std::string> short_names) {
  auto t = std::make_shared<ResourceType>();
  t->group = group;
  t->version = "v1";
  t->resource = resource;
  t->singular = singular;
  t->kind = kind;
  t->list_kind = kind + "List";
  t->rules = rules;
  t->status_subresource = status_subresource;
  t->return_deleted_object = return_deleted_object;
  t->short_names = std::move(short_names);
  if (group.empty() && resource != "secrets" && resource != "configmaps" &&
      resource != "serviceaccounts" && resource != "persistentvolumeclaims") {
    t->categories = {"all"};
  }
  return t;
}

}  // namespace

ResourceRegistry::ResourceRegistry() {
  // Which kinds DELETE answers with the object follows the real registry
  // (pods, services, claims and service accounts set ReturnDeletedObject).
  builtin_ = {
      Builtin("", "pods", "pod", "Pod", KindRules::kPod, true, true, {"po"}),
      Builtin("", "services", "service", "Service", KindRules::kService, true, true, {"svc"}),
      Builtin("", "secrets", "secret", "Secret", KindRules::kSecret, false, false, {}),
      Builtin("", "configmaps", "configmap", "ConfigMap", KindRules::kGeneric, false, false, {"cm"}),
      Builtin("", "persistentvolumeclaims", "persistentvolumeclaim", "PersistentVolumeClaim",
              KindRules::kPersistentVolumeClaim, true, true, {"pvc"}),
      Builtin("", "serviceaccounts", "serviceaccount", "ServiceAccount", KindRules::kGeneric, false,
              true, {"sa"}),
      Builtin("events.k8s.io", "events", "event", "Event", KindRules::kEvent, false, false, {"ev"}),
      Builtin("coordination.k8s.io", "leases", "lease", "Lease", KindRules::kLease, false, false, {}),
      std::make_shared<ResourceType>(CustomResourceDefinitionType()),
  };
}

ResourceTypePtr ResourceRegistry::Find(const std::string& group, const std::string& version,
                                       const std::string& resource) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const ResourceTypePtr& t : builtin_) {
    if (t->group == group && t->version == version && t->resource == resource) return t;
  }
  for (const auto& [name, types] : custom_) {
    for (const ResourceTypePtr& t : types) {
      if (t->group == group && t->version == version && t->resource == resource) return t;
    }
  }
  return nullptr;
}

ResourceTypePtr ResourceRegistry::FindByName(const std::string& name) const {
  std::vector<ResourceTypePtr> all = All();
  for (const ResourceTypePtr& t : all) {
    if (t->key() == name) return t;
  }
  ResourceTypePtr match;
  int matches = 0;
  for (const ResourceTypePtr& t : all) {
    bool hit = t->resource == name || t->singular == name;
    for (const std::string& s : t->short_names) hit = hit || s == name;
    if (hit && (match == nullptr || match->key() != t->key())) {
      match = t;
      ++matches;
    }
  }
  return matches == 1 ? match : nullptr;
}

ResourceTypePtr ResourceRegistry::FindByKind(const std::string& group,
                                             const std::string& kind) const {
  for (const ResourceTypePtr& t : All()) {
    if (t->group == group && t->kind == kind) return t;
  }
  return nullptr;
}

std::vector<ResourceTypePtr> ResourceRegistry::All() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<ResourceTypePtr> all = builtin_;
  for (const auto& [name, types] : custom_) all.insert(all.end(), types.begin(), types.end());
  return all;
}

void ResourceRegistry::RegisterCrd(const nlohmann::json& crd, std::vector<StatusCause>* causes) {
  std::vector<ResourceType> served;
  ParseCrd(crd, &served, causes);
  if (!causes->empty()) return;
  std::vector<ResourceTypePtr> types;
  for (ResourceType& t : served) types.push_back(std::make_shared<ResourceType>(std::move(t)));
  const std::string crd_name = StringField(crd, {"metadata", "name"});
  std::lock_guard<std::mutex> lock(mu_);
  if (types.empty()) {
    custom_.erase(crd_name);
  } else {
    custom_[crd_name] = std::move(types);
  }
}

void ResourceRegistry::UnregisterCrd(const std::string& crd_name) {
  std::lock_guard<std::mutex> lock(mu_);
  custom_.erase(crd_name);
}

}  // namespace kube_testing
}  // namespace gaptrain
