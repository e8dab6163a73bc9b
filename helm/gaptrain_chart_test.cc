// helm/gaptrain, rendered and linted by Helm 3.11.2's own engine
// (helm-template, found as envtest finds its binaries: skipped where it is
// missing, failed when CI=true): the chart lints clean; the CRD and
// dashboards are deploy/'s files byte for byte; the default values pass the
// same ManifestChecks as deploy/ and render the same objects as
// `kubectl kustomize deploy/` (and the monitoring add-on when its toggles
// are on); values change what they should; NOTES.txt says what to run next.

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "deploy/manifest_checks.h"
#include "helm/helm_template.h"
#include "operator/envtest/envtest_assets.h"
#include "services/testing/missing_requirement.h"
#include "services/testing/test_files.h"

namespace gaptrain {
namespace {

using nlohmann::json;

const char kChart[] = "helm/gaptrain";

const json kMonitoringOn = {
    {"monitoring", {{"podMonitor", {{"enabled", true}}}, {"dashboards", {{"enabled", true}}}}}};

class GaptrainChartTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const Status found = HelmTemplate::Find(&helm_);
    if (!found.ok()) GAPTRAIN_SKIP_OR_FAIL_IN_CI(found.message());
  }

  RenderedChart Render(const json& overrides, const HelmRelease& release = HelmRelease()) {
    HelmValues values;
    values.overrides = overrides;
    RenderedChart rendered;
    const Status s = helm_.Template(kChart, release, values, &rendered);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return rendered;
  }

  // The chart's objects as `helm template gaptrain -n gaptrain-system`
  // gives them.
  std::vector<json> RenderChart(const json& overrides) {
    const std::string text = Render(overrides).manifests;
    std::vector<json> objects;
    const Status parsed = ParseManifests(text, &objects);
    EXPECT_TRUE(parsed.ok()) << parsed.ToString() << "\n" << text;
    return objects;
  }

  HelmTemplate helm_;
};

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

TEST(GaptrainChartFilesTest, CrdAndDashboardsAreDeploysFilesByteForByte) {
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

TEST_F(GaptrainChartTest, DefaultValuesPassDeploysChecks) {
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

TEST_F(GaptrainChartTest, MonitoringTogglesAddPodMonitorsAndDashboards) {
  const std::vector<json> objects = RenderChart(kMonitoringOn);
  EXPECT_EQ(ProblemLines(IdentityProblems(objects)), "");
  EXPECT_EQ(ProblemLines(PodMonitorProblems(objects, ScrapeConfig())), "");
  EXPECT_EQ(ProblemLines(DashboardConfigMapProblems(
                objects, {"deploy/monitoring/gaptrain-job.dashboard.json",
                          "deploy/monitoring/gaptrain-operator.dashboard.json"})),
            "");
}

TEST_F(GaptrainChartTest, DefaultsRenderWhatKustomizeRenders) {
  // setup.sh puts kubectl beside helm-template, so where this test runs at
  // all it has one.
  std::string kubectl = FindKubectl();
  if (kubectl.empty()) {
    const Status found = envtest::FindTool("kubectl", &kubectl);
    if (!found.ok()) {
      GAPTRAIN_SKIP_OR_FAIL_IN_CI("kubectl is not on PATH (nor $GAPTRAIN_KUBECTL_BINARY), nor: " +
                                  found.message());
    }
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

TEST_F(GaptrainChartTest, ValuesChangeWhatTheyShould) {
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

// The install command of helm/gaptrain/README.md, with --set as typed.
TEST_F(GaptrainChartTest, ReadmesSetFlagsWork) {
  HelmValues values;
  values.set = {"spot.preset=gke", "monitoring.podMonitor.enabled=true",
                "monitoring.dashboards.enabled=true"};
  RenderedChart rendered;
  const Status s = helm_.Template(kChart, HelmRelease(), values, &rendered);
  ASSERT_TRUE(s.ok()) << s.ToString();
  std::vector<json> objects;
  ASSERT_TRUE(ParseManifests(rendered.manifests, &objects).ok());
  EXPECT_EQ(ProblemLines(OperatorDeploymentProblems(objects)), "");
  const json args = OperatorContainer(objects)["args"];
  const auto at = std::find(args.begin(), args.end(), "--spot-preset");
  ASSERT_NE(at, args.end()) << args;
  EXPECT_EQ(*(at + 1), "gke");
  EXPECT_FALSE(FindObject(objects, "PodMonitor", "gaptrain-jobs").is_null());
  EXPECT_FALSE(FindObject(objects, "ConfigMap", "gaptrain-dashboards").is_null());
}

TEST_F(GaptrainChartTest, LintsWithoutErrorsOrWarnings) {
  for (const json& overrides : {json::object(), kMonitoringOn}) {
    HelmValues values;
    values.overrides = overrides;
    std::string report;
    const Status s = helm_.Lint(kChart, values, &report);
    EXPECT_TRUE(s.ok()) << s.ToString();
    // `helm lint --strict` fails on warnings too; so does this.
    EXPECT_EQ(report.find("[ERROR]"), std::string::npos) << overrides << ":\n" << report;
    EXPECT_EQ(report.find("[WARNING]"), std::string::npos) << overrides << ":\n" << report;
  }
}

TEST_F(GaptrainChartTest, NotesSayWhatToRunNext) {
  const std::string notes = Render(kMonitoringOn, HelmRelease{"gaptrain", "ml-ops"}).notes;
  ASSERT_FALSE(notes.empty()) << "helm-template printed no NOTES: section on stderr";
  for (const char* want : {"kubectl -n ml-ops get pods", "kubectl get tj -w",
                           "examples/k8s/datasets.yaml", "ghcr.io/gaptrain/gaptrain:0.1.0",
                           "PodMonitors", "ml-ops/gaptrain-dashboards"}) {
    EXPECT_NE(notes.find(want), std::string::npos) << want << " not in:\n" << notes;
  }
  // Without the toggles, NOTES.txt does not mention what is not installed.
  const std::string plain = Render(json::object(), HelmRelease{"gaptrain", "ml-ops"}).notes;
  EXPECT_NE(plain.find("kubectl -n ml-ops get pods"), std::string::npos) << plain;
  EXPECT_EQ(plain.find("PodMonitors"), std::string::npos) << plain;
  EXPECT_EQ(plain.find("gaptrain-dashboards"), std::string::npos) << plain;
}

}  // namespace
}  // namespace gaptrain
