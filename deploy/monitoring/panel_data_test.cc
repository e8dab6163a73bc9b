#include "deploy/monitoring/panel_data.h"

#include <gtest/gtest.h>
#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <ctime>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "services/net/http_server.h"
#include "services/net/metrics_endpoint.h"

namespace gaptrain {
namespace {

using nlohmann::json;

constexpr double kScrapeSeconds = 0.5;

// One panel per case below, each with one query.
GrafanaDashboard Dashboard() {
  const json ds = {{"type", "prometheus"}, {"uid", "${datasource}"}};
  const std::string job = "namespace=\"$namespace\", gaptrain_io_job_name=\"$job\"";
  const std::vector<std::pair<std::string, std::string>> panels = {
      {"Live", "gaptrain_test_live{" + job + "}"},
      {"Rate", "rate(gaptrain_test_total{" + job + "}[$__rate_interval])"},
      {"Missing", "gaptrain_test_absent{" + job + "}"},
      {"NaN", "gaptrain_test_nan{" + job + "}"},
      {"Refused", "sum(gaptrain_test_live{" + job + "}"},
  };
  json list = json::array();
  for (size_t i = 0; i < panels.size(); ++i) {
    list.push_back({{"id", i + 1},
                    {"type", "timeseries"},
                    {"title", panels[i].first},
                    {"description", "Healthy: data."},
                    {"datasource", ds},
                    {"gridPos", {{"x", 0}, {"y", 8 * i}, {"w", 24}, {"h", 8}}},
                    {"targets", {{{"refId", "A"}, {"expr", panels[i].second}, {"legendFormat", "{{pod}}"}}}}});
  }
  const json d = {
      {"uid", "panel-data-test"},
      {"title", "Panel data"},
      {"schemaVersion", 42},
      {"refresh", ""},
      {"time", {{"from", "now-5m"}, {"to", "now"}}},
      {"templating",
       {{"list",
         {{{"name", "datasource"}, {"type", "datasource"}, {"query", "prometheus"}},
          {{"name", "namespace"}, {"type", "query"}, {"datasource", ds},
           {"query", {{"query", "label_values(gaptrain_test_live, namespace)"}}}},
          {{"name", "job"}, {"type", "query"}, {"datasource", ds},
           {"query", "label_values(gaptrain_test_live{namespace=\"$namespace\"}, gaptrain_io_job_name)"}}}}}},
      {"panels", list}};
  GrafanaDashboard dashboard;
  Status s = GrafanaDashboard::Parse(d.dump(), &dashboard);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return dashboard;
}

TEST(PanelDataTest, EveryQueryRunsAndEmptyOnesAreNamed) {
  auto registry = std::make_shared<prometheus::Registry>();
  prometheus::BuildGauge().Name("gaptrain_test_live").Help("h").Register(*registry).Add({}).Set(3);
  prometheus::BuildGauge().Name("gaptrain_test_nan").Help("h").Register(*registry).Add({}).Set(NAN);
  prometheus::Counter& total =
      prometheus::BuildCounter().Name("gaptrain_test_total").Help("h").Register(*registry).Add({});
  std::unique_ptr<HttpServer> http;
  Status s = HttpServer::Start("127.0.0.1", 0, &http);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ServeMetrics(http.get(), registry);
  std::atomic<bool> stop{false};
  std::thread counting([&] {
    while (!stop) {
      total.Increment();
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  });

  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string targets = std::string(tmp != nullptr ? tmp : "/tmp") + "/targets.json";
  std::ofstream(targets) << json::array({{{"targets", {"127.0.0.1:" + std::to_string(http->port())}},
                                          {"labels", {{"namespace", "local"},
                                                      {"pod", "master"},
                                                      {"gaptrain_io_job_name", "mnist"}}}}})
                                .dump();
  std::unique_ptr<PrometheusTestServer> prometheus;
  s = PrometheusTestServer::StartWithFileTargets(targets, kScrapeSeconds, &prometheus);
  ASSERT_TRUE(s.ok()) << s.ToString();
  const double start = static_cast<double>(std::time(nullptr));
  double rate = 0;
  s = prometheus->WaitForSeries("rate(gaptrain_test_total[2s]) > 0", 30, &rate);
  ASSERT_TRUE(s.ok()) << s.ToString();

  const GrafanaDashboard dashboard = Dashboard();
  PanelRange range;
  range.start = start - 5;
  range.end = static_cast<double>(std::time(nullptr)) + 1;
  range.step_seconds = 1;
  range.scrape_interval_seconds = kScrapeSeconds;

  std::vector<std::string> namespaces, jobs;
  s = VariableValues(prometheus.get(), dashboard, "namespace", {}, range, &namespaces);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(namespaces, std::vector<std::string>{"local"});
  s = VariableValues(prometheus.get(), dashboard, "job", {{"namespace", "local"}}, range, &jobs);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(jobs, std::vector<std::string>{"mnist"});
  s = VariableValues(prometheus.get(), dashboard, "job", {{"namespace", "elsewhere"}}, range, &jobs);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(jobs.empty());
  EXPECT_EQ(VariableValues(prometheus.get(), dashboard, "datasource", {}, range, &jobs).code(),
            Status::Code::kNotFound);

  const std::vector<TargetData> data = FetchPanelData(
      prometheus.get(), dashboard, {{"namespace", "local"}, {"job", "mnist"}}, range);
  stop = true;
  counting.join();
  ASSERT_EQ(data.size(), 5u);
  EXPECT_EQ(data[0].promql,
            "gaptrain_test_live{namespace=\"local\", gaptrain_io_job_name=\"mnist\"}");
  // $__rate_interval: max(1 s + 0.5 s, 4 x 0.5 s).
  EXPECT_NE(data[1].promql.find("[2s]"), std::string::npos) << data[1].promql;
  ASSERT_EQ(data[0].series.size(), 1u);
  EXPECT_EQ(data[0].series[0].legend, "master");
  EXPECT_TRUE(data[0].series[0].HasFiniteValue());
  EXPECT_EQ(data[0].series[0].points.back().second, 3);

  const std::vector<std::string> empty = EmptyTargets(data);
  ASSERT_EQ(empty.size(), 3u) << ::testing::PrintToString(empty);
  EXPECT_NE(empty[0].find("panel 3 \"Missing\" query A"), std::string::npos) << empty[0];
  EXPECT_NE(empty[0].find("no series"), std::string::npos) << empty[0];
  EXPECT_NE(empty[1].find("panel 4 \"NaN\""), std::string::npos) << empty[1];
  EXPECT_NE(empty[1].find("none with a finite value"), std::string::npos) << empty[1];
  EXPECT_NE(empty[2].find("panel 5 \"Refused\""), std::string::npos) << empty[2];
  EXPECT_NE(empty[2].find("INVALID_ARGUMENT"), std::string::npos) << empty[2];
}

}  // namespace
}  // namespace gaptrain
