// ResourceService: the verbs of the Kubernetes API on one resource, as
// kube-apiserver v1.26 answers them: get, list (selectors, pagination, the
// Table form for custom resources), watch, create (generateName, defaults,
// validation, 409 AlreadyExists), update (optimistic concurrency on
// metadata.resourceVersion, 409 Conflict), patch (JSON merge patch, JSON
// patch, server-side apply with field managers and conflicts), delete
// (preconditions, grace periods, propagation) and deletecollection, and the
// subresources status, scale (custom resources), eviction and binding
// (pods).
//
// Writes to the main resource ignore .status when the kind has a status
// subresource; writes to /status change only .status. A write that changes
// nothing is not stored (same resourceVersion, no event). Requests arrive
// already routed and authenticated (see ApiHandler).

#ifndef GAPTRAIN_OPERATOR_TESTING_RESOURCE_SERVICE_H_
#define GAPTRAIN_OPERATOR_TESTING_RESOURCE_SERVICE_H_

#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "operator/testing/api_error.h"
#include "operator/testing/api_request.h"
#include "operator/testing/object_store.h"
#include "operator/testing/resource_registry.h"

namespace gaptrain {
namespace kube_testing {

// A request for a resource, parsed from its path and query.
struct ResourceRequest {
  std::string verb;  // get list watch create update patch delete deletecollection
  ResourceTypePtr type;
  std::string ns;  // "" for cluster-scoped requests
  std::string name;
  std::string subresource;  // "", status, scale, eviction, binding
  std::map<std::string, std::string> query;
  const ApiRequest* http = nullptr;  // headers and body
};

class ResourceService {
 public:
  struct Options {
    std::chrono::milliseconds bookmark_interval{60000};
    std::chrono::milliseconds default_watch_timeout{30 * 60 * 1000};
  };

  ResourceService(ResourceRegistry* registry, ObjectStore* store, const Options& options);

  ApiResponse Serve(const ResourceRequest& request);

 private:
  ApiResponse Get(const ResourceRequest& r);
  ApiResponse List(const ResourceRequest& r);
  ApiResponse Watch(const ResourceRequest& r);
  ApiResponse Create(const ResourceRequest& r);
  ApiResponse Update(const ResourceRequest& r);
  ApiResponse Patch(const ResourceRequest& r);
  ApiResponse Apply(const ResourceRequest& r);
  ApiResponse Delete(const ResourceRequest& r);
  ApiResponse DeleteCollection(const ResourceRequest& r);
  ApiResponse GetScale(const ResourceRequest& r);
  ApiResponse WriteScale(const ResourceRequest& r);
  ApiResponse Evict(const ResourceRequest& r);
  ApiResponse Bind(const ResourceRequest& r);

  // The response to a successful write (registering a CRD's resources).
  ApiResponse Written(const ResourceType& type, const ObjectStore::WriteResult& result,
                      const std::vector<std::string>& warnings);
  // Completes an update computed from `current`: keeps the server-owned
  // metadata, records managed fields for `manager`, turns a change-free
  // result into a no-op (*next = current) and validates.
  ApiError FinishUpdate(const ResourceType& type, const nlohmann::json& current,
                        const std::string& manager, const std::string& subresource,
                        nlohmann::json* next);
  // Parses the selectors and paging parameters of list/watch/deletecollection.
  ApiError ParseListOptions(const ResourceRequest& r, ObjectStore::ListOptions* out);
  std::string AllocateClusterIp();

  ResourceRegistry* const registry_;
  ObjectStore* const store_;
  const Options options_;
  std::atomic<uint32_t> next_cluster_ip_{10};
};

}  // namespace kube_testing
}  // namespace gaptrain

#endif  // GAPTRAIN_OPERATOR_TESTING_RESOURCE_SERVICE_H_
