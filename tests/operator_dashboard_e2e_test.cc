// The operator dashboard (deploy/monitoring/gaptrain-operator.dashboard.json)
// against a real gaptrain-operator: the operator reconciles a TrainingJob
// on a real kube-apiserver (operator/envtest), as its ServiceAccount with
// the shipped ClusterRole, a real Prometheus scrapes its /metrics with
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
#include "operator/envtest/control_plane.h"
#include "tests/cluster/running_operator.h"
#include "tests/cluster/test_install.h"
#include "services/testing/missing_requirement.h"
#include "services/testing/prometheus_test_server.h"
#include "services/testing/test_files.h"
#include "services/testing/test_processes.h"

namespace gaptrain {
namespace {

// The labels Prometheus gives the operator's pod on a cluster.
constexpr char kNamespace[] = "gaptrain-system";
constexpr char kPod[] = "gaptrain-operator-0";
constexpr double kScrapeSeconds = 1;

// No pod runs here (no node), so the job stays Pending and each poll
// reconciles it: reconciles while Prometheus scrapes.
const std::vector<std::string> kOperatorArgs = {"--progress-poll-seconds", "1"};

// Now, in seconds since the epoch with a fraction: the last scrape may be
// within the current second.
double WallSeconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

TEST(OperatorDashboardE2eTest, EveryPanelHasDataForARunningOperator) {
  GrafanaDashboard dashboard;
  Status s = GrafanaDashboard::Parse(
      ReadRaw("deploy/monitoring/gaptrain-operator.dashboard.json"), &dashboard);
  ASSERT_TRUE(s.ok()) << s.ToString();
  const std::string dir = TestTempDir("operator-dashboard");

  // The cluster: gaptrain's CRD and RBAC, and a job.
  envtest::ControlPlane::Options cluster_options;
  cluster_options.work_dir = dir + "/cluster";
  cluster_options.crd_files = {kTrainingJobCrdFile};
  std::unique_ptr<envtest::ControlPlane> cluster;
  s = envtest::ControlPlane::Start(cluster_options, &cluster);
  if (s.code() == Status::Code::kNotFound) GAPTRAIN_SKIP_OR_FAIL_IN_CI(s.message());
  ASSERT_TRUE(s.ok()) << s.ToString();
  s = InstallOperatorRbac(cluster.get(), RbacSource::kDeploy);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_TRUE(cluster->CreateNamespace("default").ok());

  std::string kubeconfig;
  s = OperatorKubeconfig(cluster.get(), &kubeconfig);
  ASSERT_TRUE(s.ok()) << s.ToString();
  std::unique_ptr<RunningOperator> op;
  s = RunningOperator::Start(dir, kPod, kubeconfig, kOperatorArgs, &op);
  ASSERT_TRUE(s.ok()) << s.ToString();

  const std::string targets = dir + "/targets.json";
  std::ofstream(targets) << nlohmann::json::array(
                                {{{"targets", {"127.0.0.1:" + std::to_string(op->metrics_port())}},
                                  {"labels", {{"namespace", kNamespace}, {"pod", kPod}}}}})
                                .dump();
  PrometheusTestServer::FileTargetsOptions options;
  options.scrape_interval_seconds = kScrapeSeconds;
  options.rule_files = {AbsolutePath("deploy/monitoring/gaptrain-operator.rules.yml")};
  std::unique_ptr<PrometheusTestServer> prometheus;
  s = PrometheusTestServer::StartWithFileTargets(AbsolutePath(targets), options, &prometheus);
  ASSERT_TRUE(s.ok()) << s.ToString();
  const double scraped_from = WallSeconds();

  // It leads, and is scraped, before the job exists: a Pending job whose
  // pods never start is reconciled only while it is planned (no polling),
  // so those reconciles must fall where Prometheus sees them increase.
  double value = 0;
  s = prometheus->WaitForSeries("gaptrain_operator_is_leader == 1", 120, &value);
  ASSERT_TRUE(s.ok()) << s.ToString() << "\n" << op->Log();
  s = cluster->admin()->Create(
      kube::kTrainingJobs, "default",
      {{"apiVersion", "gaptrain.io/v1alpha1"},
       {"kind", "TrainingJob"},
       {"metadata", {{"name", "mnist"}}},
       {"spec",
        {{"model", {{"builtin", "lenet5"}}},
         {"data", {{"format", "mnist-idx"}, {"path", "/data/mnist"}}},
         {"training", {{"epochs", 1}}},
         {"workers", {{"replicas", 2}}}}}},
      nullptr);
  ASSERT_TRUE(s.ok()) << s.ToString();

  // It created the job's children, and its reconciles are counted.
  for (const char* awaited : {"gaptrain_operator_jobs_created_total >= 1",
                              "sum(increase(gaptrain_operator_reconcile_duration_seconds_count[1m])) > 0",
                              // The rules have run over reconciles scraped.
                              "namespace:gaptrain_operator_reconcile_duration_seconds:p99_5m > 0",
                              "namespace:gaptrain_operator_reconcile_errors:ratio_rate10m >= 0",
                              "namespace:gaptrain_operator_preemptions:increase1h >= 0"}) {
    s = prometheus->WaitForSeries(awaited, 120, &value);
    ASSERT_TRUE(s.ok()) << awaited << ": " << s.ToString() << "\n" << op->Log();
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
