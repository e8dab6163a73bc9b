// API discovery documents as kube-apiserver v1.26 serves them, built from
// the resource registry: /api (APIVersions), /apis (APIGroupList),
// /apis/GROUP (APIGroup), /api/v1 and /apis/GROUP/VERSION
// (APIResourceList, with subresources, verbs, short names, categories and
// storageVersionHash as recorded in discovery-group-version.json), and
// /version.

#ifndef GAPTRAIN_OPERATOR_TESTING_DISCOVERY_H_
#define GAPTRAIN_OPERATOR_TESTING_DISCOVERY_H_

#include <nlohmann/json.hpp>

#include <string>

#include "operator/testing/resource_registry.h"

namespace gaptrain {
namespace kube_testing {

// `server_address` is "127.0.0.1:PORT".
nlohmann::ordered_json ApiVersionsDocument(const std::string& server_address);
nlohmann::ordered_json ApiGroupListDocument(const ResourceRegistry& registry);
// False when no served resource has the group (then 404).
bool ApiGroupDocument(const ResourceRegistry& registry, const std::string& group,
                      nlohmann::ordered_json* out);
bool ApiResourceListDocument(const ResourceRegistry& registry, const std::string& group,
                             const std::string& version, nlohmann::ordered_json* out);
nlohmann::ordered_json VersionDocument();

// base64 of the first 8 bytes of sha256("group/version/kind").
std::string StorageVersionHash(const std::string& group, const std::string& version,
                               const std::string& kind);

}  // namespace kube_testing
}  // namespace gaptrain

#endif  // GAPTRAIN_OPERATOR_TESTING_DISCOVERY_H_
