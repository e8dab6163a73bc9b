// The operator dashboard (deploy/monitoring/gaptrain-operator.dashboard.json)
// against a real gaptrain-operator: the operator reconciles a TrainingJob
// on the fake kube-apiserver, a real Prometheus scrapes its /metrics with
// the labels the cluster's relabelling gives it (namespace, pod; see
// //deploy/monitoring:prometheus_rules_test) and the operator rules
// loaded, and every query of every panel must return data, as
// tests/dashboard_e2e_test checks the job dashboard. No data is made up:
// every series comes from the operator.
//
// DISABLED until the operator binary lands (issue 18 was written before
// it). To enable it:
//   1. add the binary to this target's data in tests/BUILD and set
//      kOperatorBinary to its runfiles path;
//   2. check OperatorArgs() against its flags: it needs the kubeconfig,
//      an HTTP port for /metrics and a ports file that lists that port
//      first (services/common/ports_file.h);
//   3. remove the DISABLED_ prefix.
// A panel that stays empty then names the metric the operator must export
// (its series should exist from the start, at 0, as the services' do: the
// reconcile errors by reason, for one).

#include <gtest/gtest.h>
#include <chrono>
#include <ctime>
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

std::vector<std::string> OperatorArgs(const std::string& kubeconfig) {
  return {"--kubeconfig", kubeconfig, "--http-address", "127.0.0.1", "--http-port", "0"};
}

TEST(OperatorDashboardE2eTest, DISABLED_EveryPanelHasDataForARunningOperator) {
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
                                dir + "/operator.ports", dir + "/operator.log", "", 1);
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
  const double scraped_from = static_cast<double>(std::time(nullptr));

  // It leads, created the job's children, and reconciled for a while.
  double value = 0;
  for (const char* awaited : {"gaptrain_operator_is_leader == 1",
                              "gaptrain_operator_jobs_created_total >= 1",
                              "sum(gaptrain_operator_reconcile_duration_seconds_count) >= 3"}) {
    s = prometheus->WaitForSeries(awaited, 120, &value);
    ASSERT_TRUE(s.ok()) << awaited << ": " << s.ToString() << "\n"
                        << ReadWholeFile(operator_process.log_file());
  }

  PanelRange range;
  range.start = scraped_from;
  range.end = static_cast<double>(std::time(nullptr));
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
