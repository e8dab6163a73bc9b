// Operational endpoints on an HttpServer: /metrics for Prometheus and
// /healthz for probes. One HttpServer per process serves both (we do not
// use prometheus-cpp's civetweb Exposer).
//
// What callers may rely on:
//   - GET /metrics answers 200 with the registry's current metrics in the
//     Prometheus text format, content type "text/plain; version=0.0.4",
//     collected at request time (no caching); `before_collect`, when set,
//     runs first, so gauges that mirror state elsewhere (a queue's depth)
//     are read when scraped.
//   - GET /healthz answers 200 "ok" when `healthy()` returns true, 503
//     "unhealthy" otherwise. A null `healthy` means always healthy.
//   - The callbacks run on the server's thread; they may be registered
//     before or after the server starts. The registry and `healthy` stay
//     alive as long as the server holds them.

#ifndef GAPTRAIN_SERVICES_NET_METRICS_ENDPOINT_H_
#define GAPTRAIN_SERVICES_NET_METRICS_ENDPOINT_H_

#include <prometheus/registry.h>

#include <functional>
#include <memory>

#include "services/net/http_server.h"

namespace gaptrain {

// The content type of the Prometheus text exposition format.
extern const char kPrometheusTextContentType[];

void ServeMetrics(HttpServer* server,
                  std::shared_ptr<prometheus::Registry> registry,
                  std::function<void()> before_collect = nullptr);

void ServeHealth(HttpServer* server, std::function<bool()> healthy);

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_NET_METRICS_ENDPOINT_H_
