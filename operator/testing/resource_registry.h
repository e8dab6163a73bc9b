// ResourceRegistry: the resources the fake API server serves. It starts
// with the built-in kinds an operator uses (core/v1 pods, services, secrets,
// configmaps, persistentvolumeclaims, serviceaccounts; events.k8s.io/v1
// events; coordination.k8s.io/v1 leases; apiextensions.k8s.io/v1
// customresourcedefinitions) and learns custom resources from CRDs.
// Thread-safe; the types it hands out are immutable snapshots, so a CRD
// update never changes a type under a request that is using it.

#ifndef GAPTRAIN_OPERATOR_TESTING_RESOURCE_REGISTRY_H_
#define GAPTRAIN_OPERATOR_TESTING_RESOURCE_REGISTRY_H_

#include <nlohmann/json.hpp>

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "operator/testing/api_error.h"
#include "operator/testing/resource_type.h"

namespace gaptrain {
namespace kube_testing {

using ResourceTypePtr = std::shared_ptr<const ResourceType>;

class ResourceRegistry {
 public:
  ResourceRegistry();

  // The type served at /api[s]/GROUP/VERSION/RESOURCE; null when none.
  ResourceTypePtr Find(const std::string& group, const std::string& version,
                       const std::string& resource) const;
  // By store key ("pods", "trainingjobs.gaptrain.io") or, when unambiguous,
  // plural or short name ("trainingjobs", "tj"); the storage version for
  // custom resources. Null when none.
  ResourceTypePtr FindByName(const std::string& name) const;
  // Any type with this group and kind (for owner references); null when none.
  ResourceTypePtr FindByKind(const std::string& group, const std::string& kind) const;
  std::vector<ResourceTypePtr> All() const;

  // Serves the custom resources of a valid CRD (replacing what the CRD with
  // the same name served before). Fills *causes and serves nothing when the
  // CRD is invalid.
  void RegisterCrd(const nlohmann::json& crd, std::vector<StatusCause>* causes);
  void UnregisterCrd(const std::string& crd_name);

 private:
  mutable std::mutex mu_;
  std::vector<ResourceTypePtr> builtin_;
  std::map<std::string, std::vector<ResourceTypePtr>> custom_;  // by CRD name
};

}  // namespace kube_testing
}  // namespace gaptrain

#endif  // GAPTRAIN_OPERATOR_TESTING_RESOURCE_REGISTRY_H_
