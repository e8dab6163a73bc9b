// `kubectl kustomize deploy/` (the default install) and
// `kubectl kustomize deploy/monitoring/` (the add-on) render, and what they
// render passes ManifestChecks: identity, exactly the operator's
// permissions and the users' aggregated roles, a Deployment whose args
// gaptrain-operator accepts (the image named once), and the labels and
// ports deploy/monitoring/prometheus-scrape.yml expects; docs/install.md's
// own kustomization renders what the page says. The checks are also shown
// to catch a broken manifest.

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "deploy/manifest_checks.h"
#include "operator/operator_options.h"
#include "services/testing/missing_requirement.h"
#include "services/testing/test_files.h"

namespace gaptrain {
namespace {

using nlohmann::json;

// The heredocs `cat > FILE <<'EOF'` (and `cat >> FILE`) of a shell block
// in `doc`, by file, appended in order.
std::map<std::string, std::string> HeredocFiles(const std::string& doc) {
  std::map<std::string, std::string> files;
  for (size_t at = doc.find("cat >"); at != std::string::npos; at = doc.find("cat >", at + 1)) {
    const size_t line_end = doc.find('\n', at);
    std::string command = doc.substr(at, line_end - at);
    const bool append = command.rfind("cat >>", 0) == 0;
    const size_t name_start = command.find_first_not_of(" ", append ? 6 : 5);
    const size_t name_end = command.find(' ', name_start);
    if (command.find("<<'EOF'") == std::string::npos) continue;
    const std::string name = command.substr(name_start, name_end - name_start);
    const size_t body_end = doc.find("\nEOF\n", line_end);
    if (body_end == std::string::npos) continue;
    std::string body = doc.substr(line_end + 1, body_end - line_end);
    if (!append) files[name].clear();
    files[name] += body;
  }
  return files;
}

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

  // Renders docs/install.md's kustomization `dir` (my-gaptrain,
  // my-monitoring, my-private-registry) as a reader has it: the page's
  // heredoc files (every directory's: one may build on another), REGISTRY
  // replaced, next to a copy of deploy/.
  std::vector<json> RenderGuideKustomization(const std::map<std::string, std::string>& files,
                                             const std::string& dir) {
    const std::string tree = TestDir("install-guide-" + dir);
    std::error_code error;
    std::filesystem::create_directories(tree + "/" + dir, error);
    EXPECT_FALSE(error) << error.message();
    for (const auto& [name, text] : files) {
      std::filesystem::create_directories(
          std::filesystem::path(tree + "/" + name).parent_path(), error);
      EXPECT_FALSE(error) << error.message();
      std::string content = text;
      for (size_t at = content.find("REGISTRY"); at != std::string::npos;
           at = content.find("REGISTRY", at)) {
        content.replace(at, 8, "registry.example.com");
      }
      WriteRaw(tree + "/" + name, content);
    }
    // The runfiles' links followed: a copy of the files.
    std::filesystem::copy("deploy", tree + "/deploy", std::filesystem::copy_options::recursive,
                          error);
    EXPECT_FALSE(error) << error.message();
    // The root only includes the reader's kustomization (KustomizeBuild
    // builds a copy of the tree it is given).
    WriteRaw(tree + "/kustomization.yaml", "resources:\n- " + dir + "\n");
    return Render(tree);
  }

  // docs/install.md's kustomization `dir`, rendered as above; empty (a
  // failure) when the page writes none.
  std::vector<json> RenderInstallGuide(const std::string& dir) {
    const std::string doc = ReadRaw("docs/install.md");
    EXPECT_FALSE(doc.empty()) << "docs/install.md is not in the runfiles";
    const std::map<std::string, std::string> files = HeredocFiles(doc);
    if (files.count(dir + "/kustomization.yaml") != 1) {
      ADD_FAILURE() << "docs/install.md writes no " << dir << "/kustomization.yaml";
      return {};
    }
    return RenderGuideKustomization(files, dir);
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
  EXPECT_EQ(ProblemLines(InstallProblems(objects, ScrapeConfig())), "");

  // What `kubectl apply -k deploy/` creates, and nothing of the add-on
  // (whose kinds a cluster without the Prometheus Operator lacks).
  std::vector<std::string> kinds;
  for (const json& o : objects) {
    kinds.push_back(o["kind"].get<std::string>() + "/" + o["metadata"]["name"].get<std::string>());
  }
  std::sort(kinds.begin(), kinds.end());
  EXPECT_EQ(kinds, (std::vector<std::string>{
                       "ClusterRole/gaptrain-edit", "ClusterRole/gaptrain-operator",
                       "ClusterRole/gaptrain-view", "ClusterRoleBinding/gaptrain-operator",
                       "CustomResourceDefinition/trainingjobs.gaptrain.io",
                       "Deployment/gaptrain-operator", "Namespace/gaptrain-system",
                       "ServiceAccount/gaptrain-operator"}));
  for (const json& o : objects) {
    if (o["metadata"].contains("namespace")) {
      EXPECT_EQ(o["metadata"]["namespace"], "gaptrain-system") << o["metadata"]["name"];
    }
  }

  // The image, named once, in the container the operator reads it from.
  const json container = FindObject(objects, "Deployment", "gaptrain-operator")["spec"]["template"]
                                   ["spec"]["containers"][0];
  EXPECT_EQ(container["name"], "operator");
  EXPECT_EQ(container["image"], "ghcr.io/gaptrain/gaptrain:0.1.0");

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
  // The ConfigMap, two PodMonitors and two PrometheusRules (their groups:
  // //deploy/monitoring:prometheus_rules_test).
  EXPECT_EQ(monitoring.size(), 5u);
  for (const char* name : {"gaptrain-job", "gaptrain-operator"}) {
    const json rule = FindObject(monitoring, "PrometheusRule", name);
    EXPECT_EQ(rule["apiVersion"], "monitoring.coreos.com/v1") << name;
    EXPECT_EQ(rule["metadata"]["namespace"], "gaptrain-system") << name;
  }

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

// docs/install.md's own kustomization (step 4), as written there, rendered
// by kustomize next to deploy/: the spot preset set by flag name, the
// image renamed once by `images:`, and the result still an install the
// checks pass. No args/N positions anywhere in the page.
TEST_F(DeployManifestsTest, TheInstallGuidesKustomizationSetsFlagsByNameAndTheImageOnce) {
  const std::string doc = ReadRaw("docs/install.md");
  ASSERT_FALSE(doc.empty()) << "docs/install.md is not in the runfiles";
  EXPECT_EQ(doc.find("/args/"), std::string::npos) << "a patch by position";
  std::map<std::string, std::string> files = HeredocFiles(doc);
  ASSERT_EQ(files.count("my-gaptrain/kustomization.yaml"), 1u) << doc;
  ASSERT_EQ(files.count("my-gaptrain/operator-args.yaml"), 1u) << doc;
  EXPECT_NE(files["my-gaptrain/kustomization.yaml"].find("images:"), std::string::npos);

  const std::vector<json> objects = RenderGuideKustomization(files, "my-gaptrain");
  ASSERT_FALSE(objects.empty());
  EXPECT_EQ(ProblemLines(RbacProblems(objects)), "");
  EXPECT_EQ(ProblemLines(OperatorDeploymentProblems(objects)), "");
  const json deployment = FindObject(objects, "Deployment", "gaptrain-operator");
  const json& container = deployment["spec"]["template"]["spec"]["containers"][0];
  EXPECT_EQ(container["image"], "registry.example.com/gaptrain:0.1.0");
  EXPECT_EQ(container["args"], json({"--spot-preset=gke", "--leader-elect=true",
                                     "--metrics-port=8080", "--health-port=8081"}));
  // Everything else of the container is deploy/'s.
  const std::vector<json> plain = Render("deploy");
  json expected = FindObject(plain, "Deployment", "gaptrain-operator");
  ASSERT_TRUE(expected.is_object());
  expected["spec"]["template"]["spec"]["containers"][0]["image"] = container["image"];
  expected["spec"]["template"]["spec"]["containers"][0]["args"] = container["args"];
  EXPECT_EQ(deployment, expected);
  // The args deploy/ ships are the ones the page writes out, but the preset.
  json args = FindObject(plain, "Deployment", "gaptrain-operator")["spec"]["template"]["spec"]
                        ["containers"][0]["args"];
  for (json& a : args) {
    if (a == "--spot-preset=none") a = "--spot-preset=gke";
  }
  EXPECT_EQ(args, container["args"]) << "docs/install.md's patch lost or added a flag of deploy/";
}

// docs/install.md's private registry (step 4): my-gaptrain/ with the pull
// Secret named once in the operator's pod and once, by flag, for the job
// pods; everything else as my-gaptrain/ renders it.
TEST_F(DeployManifestsTest, TheInstallGuidesPrivateRegistryReachesTheJobPods) {
  const std::vector<json> objects = RenderInstallGuide("my-private-registry");
  ASSERT_FALSE(objects.empty());
  EXPECT_EQ(ProblemLines(OperatorDeploymentProblems(objects)), "");
  const json deployment = FindObject(objects, "Deployment", "gaptrain-operator");
  const json& pod = deployment["spec"]["template"]["spec"];
  EXPECT_EQ(pod["imagePullSecrets"], json::parse(R"j([{"name": "regcred"}])j"));
  std::vector<std::string> args;
  for (const json& a : pod["containers"][0]["args"]) args.push_back(a.get<std::string>());
  OperatorOptions options;
  ASSERT_TRUE(ParseOperatorFlags(args, {}, &options).ok());
  EXPECT_EQ(options.job.image_pull_secrets, std::vector<std::string>{"regcred"});
  EXPECT_EQ(options.job.spot.name, "gke");

  json expected =
      FindObject(RenderInstallGuide("my-gaptrain"), "Deployment", "gaptrain-operator");
  ASSERT_TRUE(expected.is_object());
  json& expected_pod = expected["spec"]["template"]["spec"];
  expected_pod["imagePullSecrets"] = pod["imagePullSecrets"];
  expected_pod["containers"][0]["args"].push_back("--image-pull-secrets=regcred");
  EXPECT_EQ(deployment, expected);
}

// docs/install.md's my-monitoring/ kustomization: deploy/monitoring with the
// label a stock kube-prometheus-stack selects PodMonitors and
// PrometheusRules by (release: <its release name>), on every object's own
// metadata, the PodMonitors' pod selectors untouched (they still select
// what prometheus-scrape.yml does).
TEST_F(DeployManifestsTest, TheInstallGuidesMonitoringKustomizationAddsTheReleaseLabel) {
  const std::vector<json> labelled = RenderInstallGuide("my-monitoring");
  ASSERT_FALSE(labelled.empty());
  const std::vector<json> plain = Render("deploy/monitoring");
  ASSERT_EQ(labelled.size(), plain.size());
  ASSERT_FALSE(plain.empty());
  for (const json& o : labelled) {
    SCOPED_TRACE(o["kind"].get<std::string>() + "/" + o["metadata"]["name"].get<std::string>());
    EXPECT_EQ(o["metadata"]["labels"]["release"], "monitoring");
    json unlabelled = o;
    unlabelled["metadata"]["labels"].erase("release");
    EXPECT_EQ(unlabelled, FindObject(plain, o["kind"], o["metadata"]["name"]))
        << "only the label is added";
  }
  std::vector<json> objects = Render("deploy");
  objects.insert(objects.end(), labelled.begin(), labelled.end());
  EXPECT_EQ(ProblemLines(PodMonitorProblems(objects, ScrapeConfig())), "");
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
  auto operator_role = [](const json& o) {
    return o["kind"] == "ClusterRole" && o["metadata"]["name"] == "gaptrain-operator";
  };
  EXPECT_NE(ProblemLines(RbacProblems(with([&](json& o) {
              if (operator_role(o)) o["rules"][0]["verbs"].push_back("update");
            }))),
            "");
  EXPECT_NE(ProblemLines(RbacProblems(with([&](json& o) {
              if (operator_role(o)) o["rules"].erase(0);
            }))),
            "");
  // The users' roles: a verb more for view, view aggregated into edit too,
  // the admin label missing, one role gone.
  auto role = [](const char* name) {
    return [name](const json& o) {
      return o["kind"] == "ClusterRole" && o["metadata"]["name"] == name;
    };
  };
  EXPECT_NE(ProblemLines(AggregatedRoleProblems(with([&](json& o) {
              if (role("gaptrain-view")(o)) o["rules"][0]["verbs"].push_back("create");
            }))),
            "");
  EXPECT_NE(ProblemLines(AggregatedRoleProblems(with([&](json& o) {
              if (role("gaptrain-view")(o)) {
                o["metadata"]["labels"]["rbac.authorization.k8s.io/aggregate-to-edit"] = "true";
              }
            }))),
            "");
  EXPECT_NE(ProblemLines(AggregatedRoleProblems(with([&](json& o) {
              if (role("gaptrain-edit")(o)) {
                o["metadata"]["labels"].erase("rbac.authorization.k8s.io/aggregate-to-admin");
              }
            }))),
            "");
  std::vector<json> without_view = good;
  without_view.erase(
      std::remove_if(without_view.begin(), without_view.end(), role("gaptrain-view")),
      without_view.end());
  EXPECT_NE(ProblemLines(AggregatedRoleProblems(without_view)), "");
  // A role beyond these grants more than the operator's permissions.
  std::vector<json> extra = good;
  extra.push_back(FindObject(good, "ClusterRole", "gaptrain-view"));
  extra.back()["metadata"]["name"] = "gaptrain-extra";
  EXPECT_NE(ProblemLines(RbacProblems(extra)), "");
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
  // The label job NetworkPolicies admit the operator's pods by.
  EXPECT_NE(ProblemLines(OperatorDeploymentProblems(with([](json& o) {
              if (o["kind"] == "Deployment") {
                o["spec"]["template"]["metadata"]["labels"].erase("app.kubernetes.io/part-of");
              }
            }))),
            "");
  // Secrets read again: a verb the operator does not use.
  EXPECT_NE(ProblemLines(RbacProblems(with([&](json& o) {
              if (!operator_role(o)) return;
              for (json& rule : o["rules"]) {
                if (rule["resources"] == json::array({"secrets"})) rule["verbs"].push_back("list");
              }
            }))),
            "");
  // Root, and an object without a name.
  EXPECT_NE(ProblemLines(OperatorDeploymentProblems(with([&](json& o) {
              if (o["kind"] == "Deployment") {
                o["spec"]["template"]["spec"]["securityContext"]["runAsNonRoot"] = false;
              }
            }))),
            "");
  // A fixed uid (OpenShift's restricted-v2 refuses it), in the pod or the
  // container.
  EXPECT_NE(ProblemLines(OperatorDeploymentProblems(with([&](json& o) {
              if (o["kind"] == "Deployment") {
                o["spec"]["template"]["spec"]["securityContext"]["runAsUser"] = 65532;
              }
            }))),
            "");
  EXPECT_NE(ProblemLines(OperatorDeploymentProblems(with([&](json& o) {
              if (o["kind"] == "Deployment") container(o)["securityContext"]["runAsGroup"] = 65532;
            }))),
            "");
  // The image named twice again, or a container the operator would not
  // find its image in.
  EXPECT_NE(ProblemLines(OperatorDeploymentProblems(with([&](json& o) {
              if (o["kind"] == "Deployment") {
                container(o)["args"].push_back("--image=ghcr.io/gaptrain/gaptrain:0.1.0");
              }
            }))),
            "");
  EXPECT_NE(ProblemLines(OperatorDeploymentProblems(with([&](json& o) {
              if (o["kind"] == "Deployment") container(o)["name"] = "manager";
            }))),
            "");
  EXPECT_NE(ProblemLines(IdentityProblems(with([](json& o) {
              if (o["kind"] == "ServiceAccount") o["metadata"].erase("name");
            }))),
            "");
}

}  // namespace
}  // namespace gaptrain
