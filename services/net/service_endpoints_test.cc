#include "services/net/service_endpoints.h"

#include <gtest/gtest.h>
#include <prometheus/counter.h>

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "services/net/http_client.h"
#include "services/net/ports_file.h"

namespace gaptrain {
namespace {

constexpr double kClientTimeout = 5.0;

std::string TempPath(const std::string& name) {
  return std::string(std::getenv("TEST_TMPDIR")) + "/" + name;
}

HttpClientResponse Get(const HttpServer& server, const std::string& path) {
  HttpClientResponse r;
  const Status s = HttpGet("127.0.0.1", server.port(), path, kClientTimeout, &r);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return r;
}

TEST(ServiceEndpointsTest, ServesMetricsHealthAndItsOwnHandlersThenWritesThePorts) {
  auto registry = std::make_shared<prometheus::Registry>();
  prometheus::BuildCounter().Name("probe_total").Help("a probe").Register(*registry).Add({}).Increment();
  std::atomic<bool> healthy{true};
  ServiceEndpointOptions options;
  options.address = "127.0.0.1";
  options.registry = registry;
  options.healthy = [&healthy] { return healthy.load(); };
  options.add_handlers = [](HttpServer* server) {
    server->Handle("/status", [](const HttpRequest&) {
      HttpResponse r;
      r.body = "{}";
      return r;
    });
  };
  options.ports_file = TempPath("ports");
  options.ports_before = {7070};
  std::unique_ptr<HttpServer> server;
  ASSERT_TRUE(StartServiceEndpoints(options, &server).ok());
  ASSERT_NE(server, nullptr);

  std::vector<uint16_t> ports;
  ASSERT_TRUE(ReadPortsFile(options.ports_file, 2, &ports).ok());
  EXPECT_EQ(ports, (std::vector<uint16_t>{7070, server->port()}));
  EXPECT_NE(Get(*server, "/metrics").body.find("probe_total 1"), std::string::npos);
  EXPECT_EQ(Get(*server, "/healthz").status, 200);
  healthy = false;
  EXPECT_EQ(Get(*server, "/healthz").status, 503);
  EXPECT_EQ(Get(*server, "/status").body, "{}");
}

TEST(ServiceEndpointsTest, APortsFileThatCannotBeWrittenIsAnErrorAndNothingServes) {
  ServiceEndpointOptions options;
  options.address = "127.0.0.1";
  options.registry = std::make_shared<prometheus::Registry>();
  options.ports_file = TempPath("no-such-dir/ports");
  std::unique_ptr<HttpServer> server;
  EXPECT_FALSE(StartServiceEndpoints(options, &server).ok());
  EXPECT_EQ(server, nullptr);
}

}  // namespace
}  // namespace gaptrain
