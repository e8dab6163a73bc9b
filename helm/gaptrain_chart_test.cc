// helm/gaptrain, rendered by ChartRenderer (no Helm binary here; see the
// chart's README.md): the CRD and dashboards are deploy/'s files byte for
// byte; the default values pass the same ManifestChecks as deploy/ and
// render the same objects as `kubectl kustomize deploy/` (and the
// monitoring add-on when its toggles are on); values change what they
// should; NOTES.txt says what to run next.

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "deploy/manifest_checks.h"
#include "helm/chart_renderer.h"
#include "services/testing/test_files.h"

namespace gaptrain {
namespace {

using nlohmann::json;

const char kChart[] = "helm/gaptrain";

const json kMonitoringOn = {
    {"monitoring", {{"podMonitor", {{"enabled", true}}}, {"dashboards", {{"enabled", true}}}}}};

// The chart's objects as `helm template -n gaptrain-system` would give them.
std::vector<json> RenderChart(const json& overrides) {
  ChartRenderer chart;
  Status s = ChartRenderer::Load(kChart, overrides, ChartRelease{"gaptrain", "gaptrain-system"}, &chart);
  EXPECT_TRUE(s.ok()) << s.ToString();
  std::map<std::string, std::string> rendered;
  if (s.ok()) s = chart.RenderAll(&rendered);
  EXPECT_TRUE(s.ok()) << s.ToString();
  std::vector<json> objects;
  for (const auto& [name, text] : rendered) {
    const Status parsed = ParseManifests(text, &objects);
    EXPECT_TRUE(parsed.ok()) << name << ": " << parsed.ToString() << "\n" << text;
  }
  return objects;
}

json OperatorContainer(const std::vector<json>& objects) {
  const json deployment = FindObject(objects, "Deployment", "gaptrain-operator");
  return deployment.is_null() ? json(nullptr) : deployment["spec"]["template"]["spec"]["containers"][0];
}

// "--flag value" as "--flag=value" (gaptrain-operator reads both alike;
// every flag of it takes a value), so args compare by meaning.
void JoinFlagValues(json* object) {
  if ((*object)["kind"] != "Deployment") return;
  for (json& container : (*object)["spec"]["template"]["spec"]["containers"]) {
    json joined = json::array();
    const json& args = container["args"];
    for (size_t i = 0; i < args.size(); ++i) {
      const std::string arg = args[i].get<std::string>();
      if (arg.rfind("--", 0) == 0 && arg.find('=') == std::string::npos && i + 1 < args.size()) {
        joined.push_back(arg + "=" + args[++i].get<std::string>());
      } else {
        joined.push_back(arg);
      }
    }
    container["args"] = joined;
  }
}

std::string KindAndName(const json& o) {
  return o["kind"].get<std::string>() + "/" + o["metadata"]["name"].get<std::string>();
}

json ScrapeConfig() {
  json config;
  const Status s = ReadYamlFile("deploy/monitoring/prometheus-scrape.yml", &config);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return config;
}

TEST(GaptrainChartTest, CrdAndDashboardsAreDeploysFilesByteForByte) {
  for (const auto& [chart_file, deploy_file] : std::vector<std::pair<std::string, std::string>>{
           {"crds/gaptrain.io_trainingjobs.yaml", "deploy/crd/gaptrain.io_trainingjobs.yaml"},
           {"dashboards/gaptrain-job.dashboard.json", "deploy/monitoring/gaptrain-job.dashboard.json"},
           {"dashboards/gaptrain-operator.dashboard.json",
            "deploy/monitoring/gaptrain-operator.dashboard.json"}}) {
    const std::string want = ReadRaw(deploy_file);
    ASSERT_FALSE(want.empty()) << deploy_file;
    EXPECT_TRUE(ReadRaw(std::string(kChart) + "/" + chart_file) == want)
        << "helm/gaptrain/" << chart_file << " differs from " << deploy_file << ": cp "
        << deploy_file << " helm/gaptrain/" << chart_file;
  }
}

TEST(GaptrainChartTest, DefaultValuesPassDeploysChecks) {
  const std::vector<json> objects = RenderChart(json::object());
  ASSERT_FALSE(objects.empty());
  EXPECT_EQ(ProblemLines(IdentityProblems(objects)), "");
  EXPECT_EQ(ProblemLines(RbacProblems(objects)), "");
  EXPECT_EQ(ProblemLines(OperatorDeploymentProblems(objects)), "");
  EXPECT_EQ(ProblemLines(ScrapeProblems(objects, ScrapeConfig())), "");
  std::set<std::string> kinds;
  for (const json& o : objects) kinds.insert(KindAndName(o));
  EXPECT_EQ(kinds, (std::set<std::string>{"ClusterRole/gaptrain-operator",
                                          "ClusterRoleBinding/gaptrain-operator",
                                          "Deployment/gaptrain-operator",
                                          "ServiceAccount/gaptrain-operator"}));
}

TEST(GaptrainChartTest, MonitoringTogglesAddPodMonitorsAndDashboards) {
  const std::vector<json> objects = RenderChart(kMonitoringOn);
  EXPECT_EQ(ProblemLines(IdentityProblems(objects)), "");
  EXPECT_EQ(ProblemLines(PodMonitorProblems(objects, ScrapeConfig())), "");
  EXPECT_EQ(ProblemLines(DashboardConfigMapProblems(
                objects, {"deploy/monitoring/gaptrain-job.dashboard.json",
                          "deploy/monitoring/gaptrain-operator.dashboard.json"})),
            "");
}

TEST(GaptrainChartTest, DefaultsRenderWhatKustomizeRenders) {
  const std::string kubectl = FindKubectl();
  if (kubectl.empty()) {
    GTEST_SKIP() << "kubectl is not on PATH (nor $GAPTRAIN_KUBECTL_BINARY): cannot render "
                    "deploy/ to compare; the chart's own checks ran in the other tests";
  }
  std::vector<json> deploy;
  for (const char* dir : {"deploy", "deploy/monitoring"}) {
    std::string text;
    const Status s = KustomizeBuild(kubectl, dir, &text);
    ASSERT_TRUE(s.ok()) << s.ToString();
    ASSERT_TRUE(ParseManifests(text, &deploy).ok());
  }
  std::map<std::string, json> from_deploy, from_chart;
  for (json o : deploy) {
    // Helm installs CRDs from crds/ (compared byte for byte above) and
    // creates the release's namespace itself (--create-namespace).
    if (o["kind"] == "CustomResourceDefinition" || o["kind"] == "Namespace") continue;
    JoinFlagValues(&o);
    from_deploy[KindAndName(o)] = o;
  }
  for (json o : RenderChart(kMonitoringOn)) {
    JoinFlagValues(&o);
    from_chart[KindAndName(o)] = o;
  }
  ASSERT_EQ(from_deploy.size(), 7u);
  for (const auto& [name, object] : from_deploy) {
    ASSERT_TRUE(from_chart.count(name)) << "the chart does not render " << name;
    EXPECT_EQ(from_chart[name], object) << name << ": the chart renders\n"
                                        << from_chart[name].dump(2) << "\ndeploy/ has\n"
                                        << object.dump(2);
  }
  EXPECT_EQ(from_chart.size(), from_deploy.size());
}

TEST(GaptrainChartTest, ValuesChangeWhatTheyShould) {
  const json spot_json = R"({"tolerations": [{"key": "pool", "operator": "Equal", "value": "spot", "effect": "NoSchedule"}], "spotNodeSelector": [{"key": "pool", "operator": "In", "values": ["spot"]}]})"_json;
  for (const std::string& preset : {std::string("gke"), std::string("eks"), spot_json.dump()}) {
    const std::vector<json> objects = RenderChart({{"spot", {{"preset", preset}}},
                                                   {"image", {{"tag", "0.2.0"}}},
                                                   {"replicas", 3},
                                                   {"watchNamespace", "team-a"},
                                                   {"nodeSelector", {{"pool", "system"}}}});
    EXPECT_EQ(ProblemLines(OperatorDeploymentProblems(objects)), "") << preset;
    const json container = OperatorContainer(objects);
    EXPECT_EQ(container["image"], "ghcr.io/gaptrain/gaptrain:0.2.0");
    const json args = container["args"];
    EXPECT_NE(std::find(args.begin(), args.end(), "--namespace=team-a"), args.end()) << args;
    const auto at = std::find(args.begin(), args.end(), "--spot-preset");
    ASSERT_NE(at, args.end());
    EXPECT_EQ(*(at + 1), preset);
    const json deployment = FindObject(objects, "Deployment", "gaptrain-operator");
    EXPECT_EQ(deployment["spec"]["replicas"], 3);
    EXPECT_EQ(deployment["spec"]["template"]["spec"]["nodeSelector"], json({{"pool", "system"}}));
  }
  // What the operator refuses, the checks refuse: its parser reads the args.
  EXPECT_NE(ProblemLines(OperatorDeploymentProblems(RenderChart({{"spot", {{"preset", "gcp"}}}}))), "");
  EXPECT_NE(ProblemLines(OperatorDeploymentProblems(
                RenderChart({{"spot", {{"preset", R"({"tolerations": 5})"}}}}))),
            "");
  // Without scrape annotations plain Prometheus would not find it.
  EXPECT_NE(ProblemLines(ScrapeProblems(RenderChart({{"monitoring", {{"scrapeAnnotations", false}}}}),
                                 ScrapeConfig())),
            "");
}

TEST(GaptrainChartTest, NotesSayWhatToRunNext) {
  ChartRenderer chart;
  ASSERT_TRUE(ChartRenderer::Load(kChart, kMonitoringOn, ChartRelease{"gaptrain", "ml-ops"}, &chart).ok());
  std::string notes;
  const Status s = chart.Render("NOTES.txt", &notes);
  ASSERT_TRUE(s.ok()) << s.ToString();
  for (const char* want : {"kubectl -n ml-ops get pods", "kubectl get tj -w",
                           "examples/k8s/datasets.yaml", "ghcr.io/gaptrain/gaptrain:0.1.0",
                           "PodMonitors", "ml-ops/gaptrain-dashboards"}) {
    EXPECT_NE(notes.find(want), std::string::npos) << want << " not in:\n" << notes;
  }
}

}  // namespace
}  // namespace gaptrain
