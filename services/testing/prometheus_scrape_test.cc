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
#include <ctime>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "services/net/http_server.h"
#include "services/net/metrics_endpoint.h"
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

// The file_sd server with rules and relabelling, as the dashboard tests
// use it: target labels from the file pass through relabel_configs, a
// recording rule evaluates, and a range query returns its points.
TEST(PrometheusScrapeTest, FileTargetsWithRulesAndRelabelling) {
  auto registry = std::make_shared<prometheus::Registry>();
  prometheus::BuildGauge()
      .Name("gaptrain_test_live")
      .Help("Live workers.")
      .Register(*registry)
      .Add({})
      .Set(3);
  std::unique_ptr<HttpServer> http;
  Status s = HttpServer::Start("127.0.0.1", 0, &http);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ServeMetrics(http.get(), registry);

  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir = tmp != nullptr ? tmp : "/tmp";
  const std::string targets = dir + "/relabel-targets.json";
  std::ofstream(targets) << "[{\"targets\": [\"127.0.0.1:" << http->port()
                         << "\"], \"labels\": {\"__meta_test_pod\": \"w-0\"}}]\n";
  const std::string rules = dir + "/test.rules.yml";
  std::ofstream(rules) << "groups:\n"
                       << "  - name: test\n"
                       << "    rules:\n"
                       << "      - record: pod:gaptrain_test_live:doubled\n"
                       << "        expr: 2 * gaptrain_test_live\n";

  PrometheusTestServer::FileTargetsOptions options;
  options.scrape_interval_seconds = kScrapeInterval;
  options.rule_files = {rules};
  options.relabel_configs =
      "- source_labels: [__meta_test_pod]\n  target_label: pod\n";
  std::unique_ptr<PrometheusTestServer> prom;
  s = PrometheusTestServer::StartWithFileTargets(targets, options, &prom);
  ASSERT_TRUE(s.ok()) << s.ToString();

  double value = 0;
  s = prom->WaitForSeries("pod:gaptrain_test_live:doubled{pod=\"w-0\"}", kSeriesTimeout,
                          &value);
  ASSERT_TRUE(s.ok()) << s.ToString() << "\n" << prom->LogTail();
  EXPECT_EQ(value, 6);

  const double now = static_cast<double>(std::time(nullptr));
  std::string json;
  s = prom->QueryRange("gaptrain_test_live", now - 60, now + 1, 0.5, &json);
  ASSERT_TRUE(s.ok()) << s.ToString();
  const nlohmann::json range = nlohmann::json::parse(json);
  EXPECT_EQ(range["data"]["resultType"], "matrix") << json;
  ASSERT_EQ(range["data"]["result"].size(), 1u) << json;
  EXPECT_EQ(range["data"]["result"][0]["metric"]["pod"], "w-0") << json;
  EXPECT_FALSE(range["data"]["result"][0]["values"].empty()) << json;
  EXPECT_EQ(prom->QueryRange("gaptrain_test_live{", now - 60, now, 1, &json).code(),
            Status::Code::kInvalidArgument);

  s = prom->Api("label/pod/values", {{"match[]", "gaptrain_test_live"}}, &json);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(nlohmann::json::parse(json)["data"], nlohmann::json::array({"w-0"})) << json;
}

// A rule file Prometheus cannot load fails Start() with Prometheus's reason.
TEST(PrometheusScrapeTest, ABadRuleFileFailsStart) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir = tmp != nullptr ? tmp : "/tmp";
  const std::string rules = dir + "/bad.rules.yml";
  std::ofstream(rules) << "groups:\n  - name: bad\n    rules:\n"
                       << "      - record: bad\n        expr: sum(\n";
  PrometheusTestServer::FileTargetsOptions options;
  options.rule_files = {rules};
  std::unique_ptr<PrometheusTestServer> prom;
  Status s = PrometheusTestServer::StartWithFileTargets(dir + "/none.json", options, &prom);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("bad.rules.yml"), std::string::npos) << s.ToString();
  EXPECT_EQ(PrometheusTestServer::StartWithFileTargets("relative.json", options, &prom).code(),
            Status::Code::kInvalidArgument);
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
