// The operator dashboard (deploy/monitoring/gaptrain-operator.dashboard.json)
// against a real gaptrain-operator: the operator reconciles a TrainingJob
// on the fake kube-apiserver, a real Prometheus scrapes its /metrics with
// the labels the cluster's relabelling gives it (namespace, pod; see
// //deploy/monitoring:prometheus_rules_test) and the operator rules
// loaded, and every query of every panel must return data, as
// tests/dashboard_e2e_test checks the job dashboard. No data is made up:
// every series comes from the operator.
//
// A panel that stays empty names the metric the operator must export (its
// series exist from the start, at 0, as the services' do).

#include <gtest/gtest.h>
#include <chrono>
#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "deploy/monitoring/grafana_dashboard.h"
#include "deploy/monitoring/panel_data.h"
#include "operator/testing/server_test_base.h"
#include "services/testing/prometheus_test_server.h"
#include "services/testing/test_files.h"
#include "services/testing/test_processes.h"

namespace gaptrain {
namespace {

constexpr char kOperatorBinary[] = "operator/gaptrain-operator";
constexpr char kApiServerBinary[] = "operator/testing/fake-kube-apiserver";
constexpr char kCrd[] = "deploy/crd/gaptrain.io_trainingjobs.yaml";
// The labels Prometheus gives the operator's pod on a cluster.
constexpr char kNamespace[] = "gaptrain-system";
constexpr char kPod[] = "gaptrain-operator-0";
constexpr double kScrapeSeconds = 1;

// The ports file lists the metrics port first ("METRICS HEALTH").
std::vector<std::string> OperatorArgs(const std::string& kubeconfig) {
  return {"--kubeconfig",   kubeconfig, "--metrics-address", "127.0.0.1", "--metrics-port",
          "0",              "--health-port", "0",              "--pod-name",  kPod,
          // No pod runs on the fake server, so the job stays Pending and
          // each poll reconciles it: reconciles while Prometheus scrapes.
          "--progress-poll-seconds", "1"};
}

// Now, in seconds since the epoch with a fraction: the last scrape may be
// within the current second.
double WallSeconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

TEST(OperatorDashboardE2eTest, EveryPanelHasDataForARunningOperator) {
  GrafanaDashboard dashboard;
  Status s = GrafanaDashboard::Parse(
      ReadWholeFile("deploy/monitoring/gaptrain-operator.dashboard.json"), &dashboard);
  ASSERT_TRUE(s.ok()) << s.ToString();
  const std::string dir = TestTempDir("operator-dashboard");

  // The cluster: the fake kube-apiserver with the TrainingJob CRD and a job.
  const std::string kubeconfig = dir + "/kubeconfig";
  ChildProcess api_server(kApiServerBinary,
                          {"--token", kube_testing::kTestToken, "--kubeconfig", kubeconfig,
                           "--crd", kCrd},
                          dir + "/apiserver.ports", dir + "/apiserver.log", "", 1);
  ASSERT_TRUE(api_server.started()) << ReadWholeFile(api_server.log_file());
  kube_testing::TestClient client(static_cast<uint16_t>(api_server.port(0)),
                                  kube_testing::kTestToken);
  ASSERT_EQ(client.Post(kube_testing::kJobs, kube_testing::TrainingJobBody("mnist")).status, 201);

  ChildProcess operator_process(kOperatorBinary, OperatorArgs(kubeconfig),
                                dir + "/operator.ports", dir + "/operator.log", "", 2);
  ASSERT_TRUE(operator_process.started()) << ReadWholeFile(operator_process.log_file());

  const std::string targets = dir + "/targets.json";
  std::ofstream(targets) << nlohmann::json::array(
                                {{{"targets", {operator_process.address(0)}},
                                  {"labels", {{"namespace", kNamespace}, {"pod", kPod}}}}})
                                .dump();
  PrometheusTestServer::FileTargetsOptions options;
  options.scrape_interval_seconds = kScrapeSeconds;
  options.rule_files = {AbsolutePath("deploy/monitoring/gaptrain-operator.rules.yml")};
  std::unique_ptr<PrometheusTestServer> prometheus;
  s = PrometheusTestServer::StartWithFileTargets(AbsolutePath(targets), options, &prometheus);
  ASSERT_TRUE(s.ok()) << s.ToString();
  const double scraped_from = WallSeconds();

  // It leads, created the job's children, and reconciled for a while.
  double value = 0;
  for (const char* awaited : {"gaptrain_operator_is_leader == 1",
                              "gaptrain_operator_jobs_created_total >= 1",
                              "sum(increase(gaptrain_operator_reconcile_duration_seconds_count[5s])) > 0",
                              // The rules have run over reconciles scraped.
                              "namespace:gaptrain_operator_reconcile_duration_seconds:p99_5m > 0",
                              "namespace:gaptrain_operator_reconcile_errors:ratio_rate10m >= 0",
                              "namespace:gaptrain_operator_preemptions:increase1h >= 0"}) {
    s = prometheus->WaitForSeries(awaited, 120, &value);
    ASSERT_TRUE(s.ok()) << awaited << ": " << s.ToString() << "\n"
                        << ReadWholeFile(operator_process.log_file());
  }

  PanelRange range;
  // The last step is now, so it sees the rules' one evaluation so far.
  range.end = WallSeconds();
  range.start = range.end - std::ceil(range.end - scraped_from);
  range.step_seconds = 1;
  range.scrape_interval_seconds = kScrapeSeconds;
  std::vector<std::string> namespaces;
  s = VariableValues(prometheus.get(), dashboard, "namespace", {}, range, &namespaces);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(namespaces, std::vector<std::string>{kNamespace});
  const std::vector<TargetData> data =
      FetchPanelData(prometheus.get(), dashboard, {{"namespace", kNamespace}}, range);
  const std::vector<std::string> empty = EmptyTargets(data);
  EXPECT_TRUE(empty.empty()) << empty.size() << " of " << data.size()
                             << " queries return no data:\n  "
                             << ::testing::PrintToString(empty);
}

}  // namespace
}  // namespace gaptrain
