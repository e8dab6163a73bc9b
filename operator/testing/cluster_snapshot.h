// ClusterSnapshot: the objects the test node (LocalNode) acts on, copied
// from the FakeApiServer's store at one resourceVersion: pods, services,
// secrets, config maps and persistent volume claims. The node reads a fresh
// snapshot after every write to the store, so each decision it makes sees
// one consistent state, as a kubelet's informer caches do.

#ifndef GAPTRAIN_OPERATOR_TESTING_CLUSTER_SNAPSHOT_H_
#define GAPTRAIN_OPERATOR_TESTING_CLUSTER_SNAPSHOT_H_

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "operator/testing/object_store.h"
#include "services/common/status.h"

namespace gaptrain {
namespace kube_testing {

// The keys of a Secret (`data`, base64) or ConfigMap (`data`, and
// `binaryData` in base64), decoded. INVALID_ARGUMENT names a value that is
// not a string or not base64.
Status DecodeConfigData(const nlohmann::json& object, bool is_secret,
                        std::map<std::string, std::string>* data);

class ClusterSnapshot {
 public:
  // The resources a snapshot holds, as StoreView keys.
  static const std::vector<std::string>& Resources();

  ClusterSnapshot() = default;
  // Copies the objects of Resources() from `view`.
  explicit ClusterSnapshot(const StoreView& view);

  uint64_t resource_version() const { return resource_version_; }

  // Null when absent. `resource` is one of Resources().
  const nlohmann::json* Find(const std::string& resource, const std::string& ns,
                             const std::string& name) const;
  // Every object of `resource`, in namespace/name order.
  std::vector<const nlohmann::json*> All(const std::string& resource) const;

  // Adds or replaces an object (tests build snapshots by hand).
  void Put(const std::string& resource, nlohmann::json object);

 private:
  uint64_t resource_version_ = 0;
  // resource -> "ns/name" -> object
  std::map<std::string, std::map<std::string, nlohmann::json>> objects_;
};

}  // namespace kube_testing
}  // namespace gaptrain

#endif  // GAPTRAIN_OPERATOR_TESTING_CLUSTER_SNAPSHOT_H_
