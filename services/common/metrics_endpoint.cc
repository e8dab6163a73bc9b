#include "services/common/metrics_endpoint.h"

#include <prometheus/text_serializer.h>

#include <utility>

namespace gaptrain {

const char kPrometheusTextContentType[] = "text/plain; version=0.0.4";

void ServeMetrics(HttpServer* server,
                  std::shared_ptr<prometheus::Registry> registry) {
  server->Handle(
      "/metrics", [registry = std::move(registry)](const HttpRequest&) {
        HttpResponse r;
        r.content_type = kPrometheusTextContentType;
        r.body = prometheus::TextSerializer().Serialize(registry->Collect());
        return r;
      });
}

void ServeHealth(HttpServer* server, std::function<bool()> healthy) {
  server->Handle("/healthz",
                 [healthy = std::move(healthy)](const HttpRequest&) {
                   HttpResponse r;
                   if (!healthy || healthy()) {
                     r.body = "ok";
                   } else {
                     r.status = 503;
                     r.body = "unhealthy";
                   }
                   return r;
                 });
}

}  // namespace gaptrain
