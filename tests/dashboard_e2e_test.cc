// The job dashboard (deploy/monitoring/gaptrain-job.dashboard.json) against
// a real job: `gaptrain run` trains the MLP with 2 trainers on the real
// MNIST while --chaos kills a trainer (a SIGTERM first, a preemption), and
// a real Prometheus scrapes every service through the launcher's file_sd
// targets with the recording and alerting rules of
// deploy/monitoring/gaptrain-job.rules.yml loaded. While the job runs,
// every query of every panel is run as Grafana runs it (the dashboard's
// template variables resolved from Prometheus, $__rate_interval and the
// other macros expanded) and must return data: a panel added later whose
// queries find nothing fails this test. Every rule must evaluate without
// an error.
//
// After the job, the dashboard is drawn with gnuplot over the whole run
// into the test's undeclared outputs
// (bazel-testlogs/tests/dashboard_e2e_test/test.outputs/outputs.zip):
// docs/monitoring.md shows that picture.

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "deploy/monitoring/dashboard_png.h"
#include "deploy/monitoring/grafana_dashboard.h"
#include "deploy/monitoring/panel_data.h"
#include "services/testing/prometheus_test_server.h"
#include "services/testing/test_files.h"
#include "services/testing/testdata_dir.h"
#include "tests/gaptrain_run_fixture.h"

namespace gaptrain {
namespace {

constexpr double kScrapeSeconds = 1;
constexpr double kStepSeconds = 1;

// Waits for `promql` to return a sample; the failure says what was awaited.
void AwaitSeries(PrometheusTestServer* prometheus, const std::string& what,
                 const std::string& promql, const std::string& launcher_log) {
  double value = 0;
  Status s = prometheus->WaitForSeries(promql, 240, &value);
  ASSERT_TRUE(s.ok()) << what << ": " << s.ToString() << "\n--- gaptrain run:\n"
                      << ReadRaw(launcher_log);
}

TEST(DashboardE2eTest, EveryPanelOfTheJobDashboardHasDataForARunningJobThatLostATrainer) {
  std::string data_dir;
  Status found = FindSharedDataDir(&data_dir);
  ASSERT_TRUE(found.ok()) << found.ToString();
  GrafanaDashboard dashboard;
  Status s = GrafanaDashboard::Parse(
      ReadRaw("deploy/monitoring/gaptrain-job.dashboard.json"), &dashboard);
  ASSERT_TRUE(s.ok()) << s.ToString();

  const std::string dir = TestTempDir("dashboard");
  E2eJob job;
  job.name = "dashboard-e2e";
  job.model = "mlp";
  job.replicas = 2;
  job.min_replicas = 1;
  job.epochs = 10;  // 20-50 s of training on 2 cores
  job.checkpoint_seconds = 5;
  job.lease_seconds = 4;
  job.eval_every = 200;
  job.target = "{metric: loss, atMost: 0.0001}";  // drawn, never reached
  const std::string run_dir = dir + "/run";
  const std::string log = dir + "/gaptrain.out";
  std::unique_ptr<Process> launcher =
      StartGaptrain({"run", "-f", WriteJobFile(dir, job), "--run-dir", run_dir, "--chaos",
                     // By progress: the kills (a SIGTERM first) land inside
                     // the job however fast it trains; in seconds they once
                     // fell after its end.
                     "every=40%,restart=1s,seed=1"},
                    log);
  ASSERT_NE(launcher, nullptr);
  ASSERT_TRUE(WaitForEndpoints(run_dir, std::chrono::seconds(180)).is_object())
      << ReadRaw(log);

  PrometheusTestServer::FileTargetsOptions options;
  options.scrape_interval_seconds = kScrapeSeconds;
  options.rule_files = {AbsolutePath("deploy/monitoring/gaptrain-job.rules.yml")};
  std::unique_ptr<PrometheusTestServer> prometheus;
  s = PrometheusTestServer::StartWithFileTargets(run_dir + "/prometheus-targets.json", options,
                                                 &prometheus);
  ASSERT_TRUE(s.ok()) << s.ToString();
  const double scraped_from = static_cast<double>(std::time(nullptr));

  // The job has lived through what the panels show: a trainer preempted
  // (chaos's first kill is a SIGTERM) and back, an evaluation, and a
  // checkpoint.
  const std::string job_labels = "namespace=\"local\", gaptrain_io_job_name=\"dashboard-e2e\"";
  const std::string job_selector = "{" + job_labels + "}";
  ASSERT_NO_FATAL_FAILURE(AwaitSeries(prometheus.get(), "a trainer preempted",
                                      "gaptrain_coordinator_leaves_total{" + job_labels +
                                          ", reason=\"preempted\"} >= 1",
                                      log));
  ASSERT_NO_FATAL_FAILURE(AwaitSeries(prometheus.get(), "both trainers live again",
                                      "gaptrain_coordinator_live_trainers" + job_selector + " == 2",
                                      log));
  ASSERT_NO_FATAL_FAILURE(AwaitSeries(prometheus.get(), "an evaluation",
                                      "gaptrain_worker_eval_accuracy" + job_selector + " > 0", log));
  ASSERT_NO_FATAL_FAILURE(AwaitSeries(
      prometheus.get(), "a checkpoint written while scraped",
      "increase(gaptrain_master_checkpoints_total" + job_selector + "[10m]) > 0", log));

  // The template variables as Grafana fills them: the local job is there.
  PanelRange range;
  range.start = scraped_from;
  range.end = static_cast<double>(std::time(nullptr));
  range.step_seconds = kStepSeconds;
  range.scrape_interval_seconds = kScrapeSeconds;
  std::vector<std::string> namespaces, jobs;
  s = VariableValues(prometheus.get(), dashboard, "namespace", {}, range, &namespaces);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(namespaces, std::vector<std::string>{"local"});
  s = VariableValues(prometheus.get(), dashboard, "job", {{"namespace", "local"}}, range, &jobs);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(jobs, std::vector<std::string>{"dashboard-e2e"});

  // Every panel fills while the job runs: polled scrape by scrape, since
  // a young series has no rate yet (what Grafana shows, too).
  const std::map<std::string, std::string> variables = {{"namespace", "local"},
                                                         {"job", "dashboard-e2e"}};
  std::vector<TargetData> running;
  std::vector<std::string> empty;
  for (;;) {
    range.end = static_cast<double>(std::time(nullptr));
    running = FetchPanelData(prometheus.get(), dashboard, variables, range);
    empty = EmptyTargets(running);
    if (empty.empty() || !launcher->Running()) break;
    std::this_thread::sleep_for(std::chrono::duration<double>(kScrapeSeconds));
  }
  EXPECT_TRUE(empty.empty()) << empty.size() << " of " << running.size()
                             << " queries found no data in the " << range.end - range.start
                             << " s the job ran while scraped:\n  "
                             << ::testing::PrintToString(empty);
  EXPECT_GE(running.size(), 30u);

  // Every recording and alerting rule evaluates on real series.
  std::string rules;
  s = prometheus->Api("rules", {}, &rules);
  ASSERT_TRUE(s.ok()) << s.ToString();
  const nlohmann::json groups = nlohmann::json::parse(rules)["data"]["groups"];
  size_t rule_count = 0;
  for (const nlohmann::json& group : groups) {
    for (const nlohmann::json& rule : group["rules"]) {
      ++rule_count;
      EXPECT_NE(rule.value("health", ""), "err")
          << rule.value("name", "") << ": " << rule.value("lastError", "");
    }
  }
  EXPECT_GE(rule_count, 14u) << rules;

  ASSERT_TRUE(launcher->WaitExit(std::chrono::minutes(10))) << ReadRaw(log);
  EXPECT_TRUE(WIFEXITED(launcher->wait_status()) && WEXITSTATUS(launcher->wait_status()) == 0)
      << DescribeWaitStatus(launcher->wait_status()) << "\n"
      << ReadRaw(log);

  // The picture for docs/monitoring.md: the whole run.
  range.end = static_cast<double>(std::time(nullptr));
  const std::vector<TargetData> whole = FetchPanelData(prometheus.get(), dashboard, variables,
                                                       range);
  const char* outputs = std::getenv("TEST_UNDECLARED_OUTPUTS_DIR");
  const std::string png = std::string(outputs != nullptr ? outputs : dir.c_str()) +
                          "/gaptrain-job-dashboard.png";
  DashboardPicture picture;
  picture.title = "gaptrain / Training job: dashboard-e2e (local), " +
                  std::to_string(job.replicas) + " trainers, chaos every 12 s";
  s = RenderDashboardPng(dashboard, whole, range.start, picture, png);
  ASSERT_TRUE(s.ok()) << s.ToString();
  struct stat st;
  ASSERT_EQ(stat(png.c_str(), &st), 0) << png;
  std::printf("dashboard picture: %s (%lld bytes)\n", png.c_str(),
              static_cast<long long>(st.st_size));
}

}  // namespace
}  // namespace gaptrain
