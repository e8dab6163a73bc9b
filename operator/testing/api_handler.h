// ApiHandler: the fake API server's request handling, independent of the
// transport. It authenticates (bearer token: a wrong token gets 401, none
// 403 for system:anonymous, as recorded), routes paths to discovery
// documents or to a resource's verbs (ResourceService), injects the faults
// a test asked for, and keeps a request log that tests can count.
//
// Paths served: /api, /apis, /apis/GROUP, /api/v1, /apis/GROUP/VERSION,
// /version, /healthz, /readyz, /livez, and
// /api/v1/[namespaces/NS/]RESOURCE[/NAME[/SUBRESOURCE]],
// /apis/GROUP/VERSION/[namespaces/NS/]RESOURCE[/NAME[/SUBRESOURCE]].
// Thread-safe.

#ifndef GAPTRAIN_OPERATOR_TESTING_API_HANDLER_H_
#define GAPTRAIN_OPERATOR_TESTING_API_HANDLER_H_

#include <chrono>
#include <cstddef>
#include <deque>
#include <mutex>
#include <string>
#include <vector>

#include "operator/testing/api_request.h"
#include "operator/testing/object_store.h"
#include "operator/testing/resource_registry.h"
#include "operator/testing/resource_service.h"

namespace gaptrain {
namespace kube_testing {

// One served request, as the log keeps it.
struct RequestRecord {
  std::string method;       // "GET"
  std::string path;         // "/api/v1/namespaces/default/pods"
  std::string query;        // "labelSelector=a%3Db", undecoded
  std::string verb;         // get list watch create update patch delete deletecollection;
                            // "" for discovery and other non-resource paths
  std::string group;        // "" for the core group
  std::string resource;     // "pods"
  std::string subresource;  // "status"
  std::string namespace_name;
  std::string name;
  int code = 0;             // the response status (200 for a watch that started)
};

// Makes the next `count` requests that match fail with `code`.
struct Fault {
  std::string method;  // "" for any
  // Matches the request path (without query): exactly, or as a prefix when
  // it ends with '*' ("/api/v1/namespaces/default/pods*").
  std::string path;
  int count = 1;
  int code = 500;
  std::string message = "injected fault";
};

class ApiHandler {
 public:
  struct Options {
    std::string bearer_token;  // "" accepts every request
    ResourceService::Options resources;
  };

  ApiHandler(ResourceRegistry* registry, ObjectStore* store, const Options& options);

  // The address /api reports ("127.0.0.1:PORT").
  void set_server_address(const std::string& address);

  ApiResponse Handle(const ApiRequest& request);

  // The resource verbs without authentication, faults or logging (for
  // FakeApiServer's C++ hooks).
  ResourceService* resources() { return &resources_; }

  void InjectFault(const Fault& fault);
  void ClearFaults();

  std::vector<RequestRecord> RequestLog() const;
  void ClearRequestLog();
  // Requests with this verb ("" any) on this resource ("" any; "pods",
  // "trainingjobs") and subresource ("*" any).
  size_t CountRequests(const std::string& verb, const std::string& resource,
                       const std::string& subresource = "*") const;

 private:
  struct Route;
  ApiResponse Serve(const ApiRequest& request, const std::string& path, const std::string& query,
                    RequestRecord* record);
  bool TakeFault(const std::string& method, const std::string& path, Fault* fault);
  void Record(RequestRecord record);

  ResourceRegistry* const registry_;
  const Options options_;
  ResourceService resources_;

  mutable std::mutex mu_;
  std::string server_address_ = "127.0.0.1";
  std::vector<Fault> faults_;
  std::deque<RequestRecord> log_;
};

}  // namespace kube_testing
}  // namespace gaptrain

#endif  // GAPTRAIN_OPERATOR_TESTING_API_HANDLER_H_
