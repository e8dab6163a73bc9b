// End to end: a real Prometheus scrapes our HttpServer's /metrics, and the
// values it ingested come back through its query API. Fails (never skips)
// when the prometheus binary is missing.

#include <gtest/gtest.h>
#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <signal.h>

#include <cerrno>
#include <cstdlib>
#include <memory>
#include <string>

#include "services/common/http_server.h"
#include "services/common/metrics_endpoint.h"
#include "services/testing/prometheus_test_server.h"

namespace gaptrain {
namespace {

constexpr double kScrapeInterval = 0.5;  // seconds
constexpr double kSeriesTimeout = 30.0;  // seconds; only hit on failure

TEST(PrometheusScrapeTest, PrometheusIngestsWhatMetricsExposes) {
  auto registry = std::make_shared<prometheus::Registry>();
  auto& staleness =
      prometheus::BuildHistogram()
          .Name("gaptrain_test_staleness")
          .Help("Staleness of applied gradients, in versions.")
          .Register(*registry)
          .Add({}, prometheus::Histogram::BucketBoundaries{1, 2, 4, 8});
  staleness.Observe(1);
  staleness.Observe(2);
  staleness.Observe(3);
  auto& updates = prometheus::BuildCounter()
                      .Name("gaptrain_test_updates_total")
                      .Help("Updates applied.")
                      .Register(*registry)
                      .Add({{"worker", "w0"}});
  updates.Increment(5);

  std::unique_ptr<HttpServer> http;
  Status s = HttpServer::Start("127.0.0.1", 0, &http);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ServeMetrics(http.get(), registry);
  ServeHealth(http.get(), [] { return true; });

  std::unique_ptr<PrometheusTestServer> prom;
  s = PrometheusTestServer::Start({"127.0.0.1:" + std::to_string(http->port())},
                                  kScrapeInterval, &prom);
  ASSERT_TRUE(s.ok()) << "cannot run Prometheus (binary "
                      << PrometheusTestServer::BinaryPath()
                      << "): " << s.ToString();

  double value = 0;
  s = prom->WaitForSeries("gaptrain_test_staleness_count", kSeriesTimeout,
                          &value);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(value, 3);

  s = prom->WaitForSeries("gaptrain_test_staleness_sum", kSeriesTimeout,
                          &value);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(value, 6);

  s = prom->WaitForSeries("gaptrain_test_staleness_bucket{le=\"2\"}",
                          kSeriesTimeout, &value);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(value, 2);

  s = prom->WaitForSeries(
      "gaptrain_test_updates_total{job=\"gaptrain_test\",worker=\"w0\"}",
      kSeriesTimeout, &value);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(value, 5);

  s = prom->WaitForSeries("up{job=\"gaptrain_test\"}", kSeriesTimeout, &value);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(value, 1);

  // A later change shows up after a later scrape: wait for the new value
  // with a PromQL filter (empty until it holds).
  updates.Increment(2);
  s = prom->WaitForSeries("gaptrain_test_updates_total{worker=\"w0\"} == 7",
                          kSeriesTimeout, &value);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(value, 7);

  // Errors: PromQL Prometheus rejects fails at once; a series that never
  // appears runs into the deadline.
  s = prom->WaitForSeries("gaptrain_test_staleness_count{", kSeriesTimeout,
                          &value);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << s.ToString();
  s = prom->WaitForSeries("gaptrain_test_never_exposed", 0.3, &value);
  EXPECT_EQ(s.code(), Status::Code::kDeadlineExceeded) << s.ToString();

  std::string json;
  s = prom->Query("sum(gaptrain_test_staleness_count)", &json);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_NE(json.find("\"status\":\"success\""), std::string::npos) << json;

  // The destructor stops and reaps Prometheus: no process outlives the test.
  const pid_t pid = prom->pid();
  ASSERT_GT(pid, 0);
  prom.reset();
  errno = 0;
  EXPECT_EQ(::kill(pid, 0), -1);
  EXPECT_EQ(errno, ESRCH);
}

// Guards the error path the test above relies on: with no binary, Start
// fails with a message that says what to install, instead of skipping.
TEST(PrometheusScrapeTest, MissingBinaryIsAClearError) {
  const char* old = std::getenv("GAPTRAIN_PROMETHEUS_BINARY");
  const std::string saved = old != nullptr ? old : "";
  ::setenv("GAPTRAIN_PROMETHEUS_BINARY", "/nonexistent/prometheus", 1);
  std::unique_ptr<PrometheusTestServer> prom;
  Status s =
      PrometheusTestServer::Start({"127.0.0.1:1"}, kScrapeInterval, &prom);
  if (old != nullptr) {
    ::setenv("GAPTRAIN_PROMETHEUS_BINARY", saved.c_str(), 1);
  } else {
    ::unsetenv("GAPTRAIN_PROMETHEUS_BINARY");
  }
  EXPECT_EQ(s.code(), Status::Code::kFailedPrecondition) << s.ToString();
  EXPECT_NE(s.message().find("/nonexistent/prometheus"), std::string::npos);
  EXPECT_NE(s.message().find("apt-get install"), std::string::npos);
  EXPECT_EQ(prom, nullptr);
}

}  // namespace
}  // namespace gaptrain
