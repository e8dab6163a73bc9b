// `kubectl kustomize deploy/` (the default install) and
// `kubectl kustomize deploy/monitoring/` (the add-on) render, and what they
// render passes ManifestChecks: identity, exactly the operator's
// permissions, a Deployment whose args gaptrain-operator accepts, and the
// labels and ports deploy/monitoring/prometheus-scrape.yml expects. The
// checks are also shown to catch a broken manifest.

#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "deploy/manifest_checks.h"
#include "services/testing/missing_requirement.h"

namespace gaptrain {
namespace {

using nlohmann::json;

class DeployManifestsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    kubectl_ = FindKubectl();
    if (kubectl_.empty()) {
      GAPTRAIN_SKIP_OR_FAIL_IN_CI(
          "kubectl is not on PATH (nor $GAPTRAIN_KUBECTL_BINARY): cannot render deploy/ with "
          "kustomize; install kubectl to run this test");
    }
  }

  std::vector<json> Render(const std::string& dir) {
    std::string text;
    const Status built = KustomizeBuild(kubectl_, dir, &text);
    EXPECT_TRUE(built.ok()) << built.ToString();
    std::vector<json> objects;
    const Status parsed = built.ok() ? ParseManifests(text, &objects) : built;
    EXPECT_TRUE(parsed.ok()) << parsed.ToString();
    if (!parsed.ok()) objects.clear();
    return objects;
  }

  json ScrapeConfig() {
    json config;
    const Status s = ReadYamlFile("deploy/monitoring/prometheus-scrape.yml", &config);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return config;
  }

  std::string kubectl_;
};

TEST_F(DeployManifestsTest, TheDefaultInstallRendersWhatTheOperatorNeeds) {
  const std::vector<json> objects = Render("deploy");
  ASSERT_FALSE(objects.empty());
  EXPECT_EQ(ProblemLines(IdentityProblems(objects)), "");
  EXPECT_EQ(ProblemLines(RbacProblems(objects)), "");
  EXPECT_EQ(ProblemLines(OperatorDeploymentProblems(objects)), "");
  EXPECT_EQ(ProblemLines(ScrapeProblems(objects, ScrapeConfig())), "");

  // What `kubectl apply -k deploy/` creates, and nothing of the add-on
  // (whose kinds a cluster without the Prometheus Operator lacks).
  std::vector<std::string> kinds;
  for (const json& o : objects) {
    kinds.push_back(o["kind"].get<std::string>() + "/" + o["metadata"]["name"].get<std::string>());
  }
  std::sort(kinds.begin(), kinds.end());
  EXPECT_EQ(kinds, (std::vector<std::string>{
                       "ClusterRole/gaptrain-operator", "ClusterRoleBinding/gaptrain-operator",
                       "CustomResourceDefinition/trainingjobs.gaptrain.io",
                       "Deployment/gaptrain-operator", "Namespace/gaptrain-system",
                       "ServiceAccount/gaptrain-operator"}));
  for (const json& o : objects) {
    if (o["metadata"].contains("namespace")) {
      EXPECT_EQ(o["metadata"]["namespace"], "gaptrain-system") << o["metadata"]["name"];
    }
  }

  // docs/install.md patches the spot preset as args/1 and the image as
  // args/0.
  const json args = FindObject(objects, "Deployment", "gaptrain-operator")["spec"]["template"]["spec"]
                                ["containers"][0]["args"];
  EXPECT_EQ(args[0], "--image=ghcr.io/gaptrain/gaptrain:0.1.0");
  EXPECT_EQ(args[1], "--spot-preset=none");

  // The CRD is the generated file, unchanged.
  json crd;
  ASSERT_TRUE(ReadYamlFile("deploy/crd/gaptrain.io_trainingjobs.yaml", &crd).ok());
  EXPECT_EQ(FindObject(objects, "CustomResourceDefinition", "trainingjobs.gaptrain.io"), crd);
}

TEST_F(DeployManifestsTest, TheMonitoringAddOnMatchesTheScrapeConfiguration) {
  std::vector<json> objects = Render("deploy");
  const std::vector<json> monitoring = Render("deploy/monitoring");
  ASSERT_FALSE(objects.empty());
  ASSERT_FALSE(monitoring.empty());
  EXPECT_EQ(ProblemLines(IdentityProblems(monitoring)), "");
  objects.insert(objects.end(), monitoring.begin(), monitoring.end());
  EXPECT_EQ(ProblemLines(PodMonitorProblems(objects, ScrapeConfig())), "");
  EXPECT_EQ(ProblemLines(DashboardConfigMapProblems(
                monitoring, {"deploy/monitoring/gaptrain-job.dashboard.json",
                             "deploy/monitoring/gaptrain-operator.dashboard.json"})),
            "");
  EXPECT_EQ(monitoring.size(), 3u);  // the ConfigMap and two PodMonitors

  // And they catch a PodMonitor that drifts from the scrape configuration.
  auto with = [&](const char* name, auto change) {
    std::vector<json> changed = objects;
    for (json& o : changed) {
      if (o["kind"] == "PodMonitor" && o["metadata"]["name"] == name) change(o);
    }
    return PodMonitorProblems(changed, ScrapeConfig());
  };
  EXPECT_NE(ProblemLines(with("gaptrain-jobs", [](json& o) {
              o["spec"]["podMetricsEndpoints"][0]["port"] = "http";
            })),
            "");
  EXPECT_NE(ProblemLines(with("gaptrain-jobs", [](json& o) { o["spec"]["podTargetLabels"].erase(1); })),
            "");
  EXPECT_NE(ProblemLines(with("gaptrain-jobs", [](json& o) { o["spec"].erase("namespaceSelector"); })),
            "");
  EXPECT_NE(ProblemLines(with("gaptrain-operator", [](json& o) {
              o["spec"]["selector"]["matchLabels"]["app.kubernetes.io/name"] = "operator";
            })),
            "");
  EXPECT_NE(ProblemLines(DashboardConfigMapProblems(
                monitoring, {"deploy/monitoring/gaptrain-job.dashboard.json"})),
            "");
}

// The checks fail on the mistakes they exist for.
TEST_F(DeployManifestsTest, TheChecksCatchABrokenInstall) {
  const std::vector<json> good = Render("deploy");
  ASSERT_FALSE(good.empty());
  auto with = [&](auto change) {
    std::vector<json> objects = good;
    for (json& o : objects) change(o);
    return objects;
  };
  // A verb more than the operator uses; a rule less.
  EXPECT_NE(ProblemLines(RbacProblems(with([](json& o) {
              if (o["kind"] == "ClusterRole") o["rules"][0]["verbs"].push_back("get");
            }))),
            "");
  EXPECT_NE(ProblemLines(RbacProblems(with([](json& o) {
              if (o["kind"] == "ClusterRole") o["rules"].erase(0);
            }))),
            "");
  // A flag the operator does not know; the metrics port renamed; a metrics
  // port that is not the one the operator listens on.
  auto container = [](json& o) -> json& { return o["spec"]["template"]["spec"]["containers"][0]; };
  EXPECT_NE(ProblemLines(OperatorDeploymentProblems(with([&](json& o) {
              if (o["kind"] == "Deployment") container(o)["args"].push_back("--leader-elect-x=true");
            }))),
            "");
  const std::vector<json> renamed = with([&](json& o) {
    if (o["kind"] == "Deployment") container(o)["ports"][0]["name"] = "http-metrics";
  });
  EXPECT_NE(ProblemLines(OperatorDeploymentProblems(renamed)), "");
  EXPECT_NE(ProblemLines(ScrapeProblems(renamed, ScrapeConfig())), "");
  EXPECT_NE(ProblemLines(OperatorDeploymentProblems(with([&](json& o) {
              if (o["kind"] == "Deployment") container(o)["ports"][0]["containerPort"] = 9000;
            }))),
            "");
  // The label the monitoring selects the operator by.
  EXPECT_NE(ProblemLines(ScrapeProblems(with([](json& o) {
                                   if (o["kind"] == "Deployment") {
                                     o["spec"]["template"]["metadata"]["labels"]
                                      ["app.kubernetes.io/name"] = "operator";
                                   }
                                 }),
                                 ScrapeConfig())),
            "");
  // Root, and an object without a name.
  EXPECT_NE(ProblemLines(OperatorDeploymentProblems(with([&](json& o) {
              if (o["kind"] == "Deployment") {
                o["spec"]["template"]["spec"]["securityContext"]["runAsNonRoot"] = false;
              }
            }))),
            "");
  EXPECT_NE(ProblemLines(IdentityProblems(with([](json& o) {
              if (o["kind"] == "ServiceAccount") o["metadata"].erase("name");
            }))),
            "");
}

}  // namespace
}  // namespace gaptrain
