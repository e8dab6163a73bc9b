#include "services/net/service_endpoints.h"

#include "services/net/metrics_endpoint.h"
#include "services/net/ports_file.h"

namespace gaptrain {

Status StartServiceEndpoints(const ServiceEndpointOptions& options,
                             std::unique_ptr<HttpServer>* server) {
  std::unique_ptr<HttpServer> http;
  GAPTRAIN_RETURN_IF_ERROR(HttpServer::Start(options.address, options.port, &http));
  ServeMetrics(http.get(), options.registry);
  ServeHealth(http.get(), options.healthy);
  if (options.add_handlers) options.add_handlers(http.get());
  if (!options.ports_file.empty()) {
    std::vector<uint16_t> ports = options.ports_before;
    ports.push_back(http->port());
    GAPTRAIN_RETURN_IF_ERROR(WritePortsFile(options.ports_file, ports));
  }
  *server = std::move(http);
  return Status::OK();
}

}  // namespace gaptrain
