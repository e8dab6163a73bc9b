#include "services/net/metrics_endpoint.h"

#include <prometheus/text_serializer.h>

#include <utility>

namespace gaptrain {

const char kPrometheusTextContentType[] = "text/plain; version=0.0.4";

void ServeMetrics(HttpServer* server,
                  std::shared_ptr<prometheus::Registry> registry,
                  std::function<void()> before_collect) {
  server->Handle(
      "/metrics", [registry = std::move(registry),
                   before_collect = std::move(before_collect)](const HttpRequest&) {
        if (before_collect) before_collect();
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
