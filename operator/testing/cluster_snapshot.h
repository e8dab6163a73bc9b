// ClusterSnapshot: the objects the test node (LocalNode) acts on, copied
// from its informers' caches: pods, services, secrets, config maps and
// persistent volume claims. The node takes a fresh snapshot after every
// change its informers hear of, so each decision it makes works on one
// copy that does not change under it, as a kubelet's caches serve it.

#ifndef GAPTRAIN_OPERATOR_TESTING_CLUSTER_SNAPSHOT_H_
#define GAPTRAIN_OPERATOR_TESTING_CLUSTER_SNAPSHOT_H_

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "services/base/status.h"

namespace gaptrain {
namespace kube_testing {

// The keys of a Secret (`data`, base64) or ConfigMap (`data`, and
// `binaryData` in base64), decoded. INVALID_ARGUMENT names a value that is
// not a string or not base64.
Status DecodeConfigData(const nlohmann::json& object, bool is_secret,
                        std::map<std::string, std::string>* data);

class ClusterSnapshot {
 public:
  // The resources a snapshot holds (plural names, as Find() and All() take).
  static const std::vector<std::string>& Resources();

  ClusterSnapshot() = default;
  // `version` counts the changes seen when it was taken: a snapshot with a
  // higher one is newer.
  explicit ClusterSnapshot(uint64_t version) : version_(version) {}

  uint64_t version() const { return version_; }

  // Null when absent. `resource` is one of Resources().
  const nlohmann::json* Find(const std::string& resource, const std::string& ns,
                             const std::string& name) const;
  // Every object of `resource`, in namespace/name order.
  std::vector<const nlohmann::json*> All(const std::string& resource) const;

  // Adds or replaces an object.
  void Put(const std::string& resource, nlohmann::json object);

 private:
  uint64_t version_ = 0;
  // resource -> "ns/name" -> object
  std::map<std::string, std::map<std::string, nlohmann::json>> objects_;
};

}  // namespace kube_testing
}  // namespace gaptrain

#endif  // GAPTRAIN_OPERATOR_TESTING_CLUSTER_SNAPSHOT_H_
