// ServiceEndpoints: the HTTP side that each gaptrain service process
// (master, coordinator, worker) serves the same way, started in one call:
// an HttpServer with /metrics from the process's registry and /healthz,
// any handlers of the service's own, and then the ports file that tells
// whoever started the process (`gaptrain run`, tests) which ports it got.
//
// What the caller may rely on:
//   - Every handler (`add_handlers` included) is registered before the
//     ports file is written: a launcher that has read the file finds every
//     endpoint there.
//   - The ports file lists `ports_before` (the gRPC port), then the HTTP
//     port; none is written when `ports_file` is empty.
//   - On an error nothing keeps serving: *server is left empty.

#ifndef GAPTRAIN_SERVICES_NET_SERVICE_ENDPOINTS_H_
#define GAPTRAIN_SERVICES_NET_SERVICE_ENDPOINTS_H_

#include <prometheus/registry.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "services/base/status.h"
#include "services/net/http_server.h"

namespace gaptrain {

struct ServiceEndpointOptions {
  std::string address = "0.0.0.0";
  uint16_t port = 0;  // 0: any free port
  std::shared_ptr<prometheus::Registry> registry;
  std::function<bool()> healthy;  // /healthz; null: always healthy
  // The service's own handlers (e.g. the coordinator's /status).
  std::function<void(HttpServer*)> add_handlers;
  std::string ports_file;              // empty: none
  std::vector<uint16_t> ports_before;  // listed before the HTTP port
};

Status StartServiceEndpoints(const ServiceEndpointOptions& options,
                             std::unique_ptr<HttpServer>* server);

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_NET_SERVICE_ENDPOINTS_H_
