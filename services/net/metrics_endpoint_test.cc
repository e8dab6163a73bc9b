#include "services/net/metrics_endpoint.h"

#include <gtest/gtest.h>
#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <sstream>
#include <string>

#include "services/net/http_client.h"
#include "services/net/http_server.h"

namespace gaptrain {
namespace {

constexpr double kClientTimeout = 5.0;

// The value of the sample whose name and labels are exactly `series` (as
// written in the text format, e.g. `x_bucket{le="2"}`), or NaN when absent.
double SampleValue(const std::string& text, const std::string& series) {
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.empty() || line[0] == '#') continue;
    const size_t space = line.rfind(' ');
    if (space == std::string::npos) continue;
    if (line.compare(0, space, series) == 0 && space == series.size()) {
      return std::strtod(line.c_str() + space + 1, nullptr);
    }
  }
  return std::nan("");
}

class MetricsEndpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    registry_ = std::make_shared<prometheus::Registry>();
    Status s = HttpServer::Start("127.0.0.1", 0, &server_);
    ASSERT_TRUE(s.ok()) << s.ToString();
  }

  HttpClientResponse Get(const std::string& path) {
    HttpClientResponse r;
    Status s = HttpGet("127.0.0.1", server_->port(), path, kClientTimeout, &r);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return r;
  }

  std::shared_ptr<prometheus::Registry> registry_;
  std::unique_ptr<HttpServer> server_;
};

TEST_F(MetricsEndpointTest, ServesCounterAndHistogramInTextFormat) {
  auto& counter = prometheus::BuildCounter()
                      .Name("gaptrain_test_requests_total")
                      .Help("Requests seen by the test.")
                      .Register(*registry_)
                      .Add({{"method", "get"}});
  auto& histogram =
      prometheus::BuildHistogram()
          .Name("gaptrain_test_latency_seconds")
          .Help("Latency seen by the test.")
          .Register(*registry_)
          .Add({}, prometheus::Histogram::BucketBoundaries{1, 2, 5});
  auto& gauge = prometheus::BuildGauge()
                    .Name("gaptrain_test_workers")
                    .Help("Workers.")
                    .Register(*registry_)
                    .Add({});
  for (int i = 0; i < 3; ++i) counter.Increment();
  histogram.Observe(0.5);
  histogram.Observe(1.5);
  histogram.Observe(4.0);
  gauge.Set(7);
  ServeMetrics(server_.get(), registry_);

  HttpClientResponse r = Get("/metrics");
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.Header("Content-Type"), "text/plain; version=0.0.4");
  const std::string& text = r.body;
  EXPECT_NE(text.find("# TYPE gaptrain_test_requests_total counter"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("# TYPE gaptrain_test_latency_seconds histogram"),
            std::string::npos)
      << text;
  EXPECT_EQ(SampleValue(text, "gaptrain_test_requests_total{method=\"get\"}"),
            3)
      << text;
  EXPECT_EQ(SampleValue(text, "gaptrain_test_latency_seconds_count"), 3)
      << text;
  EXPECT_EQ(SampleValue(text, "gaptrain_test_latency_seconds_sum"), 6) << text;
  EXPECT_EQ(SampleValue(text, "gaptrain_test_latency_seconds_bucket{le=\"1\"}"),
            1)
      << text;
  EXPECT_EQ(SampleValue(text, "gaptrain_test_latency_seconds_bucket{le=\"2\"}"),
            2)
      << text;
  EXPECT_EQ(SampleValue(text, "gaptrain_test_latency_seconds_bucket{le=\"5\"}"),
            3)
      << text;
  EXPECT_EQ(
      SampleValue(text, "gaptrain_test_latency_seconds_bucket{le=\"+Inf\"}"), 3)
      << text;
  EXPECT_EQ(SampleValue(text, "gaptrain_test_workers"), 7) << text;
}

TEST_F(MetricsEndpointTest, CollectsAtRequestTime) {
  auto& counter = prometheus::BuildCounter()
                      .Name("gaptrain_test_events_total")
                      .Help("Events.")
                      .Register(*registry_)
                      .Add({});
  ServeMetrics(server_.get(), registry_);
  EXPECT_EQ(SampleValue(Get("/metrics").body, "gaptrain_test_events_total"), 0);
  counter.Increment(4);
  EXPECT_EQ(SampleValue(Get("/metrics").body, "gaptrain_test_events_total"), 4);
}

TEST_F(MetricsEndpointTest, BeforeCollectRunsAtEveryScrape) {
  auto& depth = prometheus::BuildGauge().Name("queue_depth").Help("h").Register(*registry_).Add({});
  int scrapes = 0;
  ServeMetrics(server_.get(), registry_, [&] { depth.Set(++scrapes * 10); });
  EXPECT_EQ(SampleValue(Get("/metrics").body, "queue_depth"), 10);
  EXPECT_EQ(SampleValue(Get("/metrics").body, "queue_depth"), 20);
}

TEST_F(MetricsEndpointTest, HealthFollowsTheCallback) {
  auto healthy = std::make_shared<std::atomic<bool>>(true);
  ServeHealth(server_.get(), [healthy] { return healthy->load(); });
  HttpClientResponse r = Get("/healthz");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "ok");
  healthy->store(false);
  r = Get("/healthz");
  EXPECT_EQ(r.status, 503);
  EXPECT_EQ(r.body, "unhealthy");
}

TEST_F(MetricsEndpointTest, NullHealthCallbackMeansHealthy) {
  ServeHealth(server_.get(), nullptr);
  HttpClientResponse r = Get("/healthz");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "ok");
}

TEST_F(MetricsEndpointTest, MetricsAndHealthShareOneServer) {
  ServeMetrics(server_.get(), registry_);
  ServeHealth(server_.get(), [] { return true; });
  std::unique_ptr<HttpConnection> c;
  ASSERT_TRUE(HttpConnection::Connect("127.0.0.1", server_->port(),
                                          kClientTimeout, &c)
                  .ok());
  HttpClientResponse r;
  ASSERT_TRUE(c->Get("/metrics", &r).ok());
  EXPECT_EQ(r.status, 200);
  ASSERT_TRUE(c->Get("/healthz", &r).ok());
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "ok");
}

}  // namespace
}  // namespace gaptrain
