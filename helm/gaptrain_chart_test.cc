// helm/gaptrain, rendered and linted by the real `helm` (found as envtest
// finds its binaries: skipped where it is missing, failed when CI=true),
// its notes from `helm install --dry-run` against a real API server: the
// chart lints without a finding; its
// schema refuses wrong values; the CRD, dashboards and rule files are
// deploy/'s files byte for byte; the default values pass the same
// ManifestChecks as deploy/ and render the same objects as
// `kubectl kustomize deploy/` (and deploy/monitoring with monitoring on);
// names follow the release and the overrides; values change what they
// should; NOTES.txt says what to run next without repository paths.

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "deploy/manifest_checks.h"
#include "helm/helm.h"
#include "operator/crd/schema_check.h"
#include "operator/envtest/envtest_assets.h"
#include "operator/envtest/shared_control_plane.h"
#include "operator/operator_options.h"
#include "services/api/training_job.h"
#include "services/testing/missing_requirement.h"
#include "services/testing/status_assertions.h"
#include "services/testing/test_files.h"
#include "services/testing/test_processes.h"

namespace gaptrain {
namespace {

using nlohmann::json;

const char kChart[] = "helm/gaptrain";
const char kOperator[] = "gaptrain-operator";
// The rule files' runbook base (values.yaml's runbookBaseUrl).
const char kDefaultRunbookBase[] =
    "https://github.com/gaptrain/gaptrain/blob/v0.1.0/docs/monitoring.md";

const json kMonitoringOn = {{"monitoring",
                             {{"podMonitor", {{"enabled", true}}},
                              {"prometheusRule", {{"enabled", true}}},
                              {"dashboards", {{"enabled", true}}}}}};

// Every optional feature on, each with a value.
const json kEverythingOn = R"({
  "image": {"digest": "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"},
  "imagePullSecrets": [{"name": "regcred"}],
  "jobImage": "registry.example.com/gaptrain:jobs",
  "jobImagePullSecrets": [{"name": "jobs-registry"}],
  "watchNamespace": "team-a",
  "networkPolicy": {"prometheusNamespace": "kube-prometheus"},
  "extraArgs": ["--workers=4"],
  "extraEnv": [{"name": "TZ", "value": "UTC"}],
  "serviceAccount": {"annotations": {"eks.amazonaws.com/role-arn": "arn:aws:iam::111122223333:role/gaptrain"}},
  "podDisruptionBudget": {"minAvailable": 1},
  "podAnnotations": {"example.com/team": "ml"},
  "podLabels": {"example.com/cost-center": "research"},
  "priorityClassName": "system-cluster-critical",
  "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
      {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["system"]}]}]}}},
  "nodeSelector": {"kubernetes.io/os": "linux"},
  "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "system", "effect": "NoSchedule"}],
  "monitoring": {
    "podMonitor": {"enabled": true, "labels": {"release": "kube-prometheus-stack"}, "interval": "30s",
                   "scrapeTimeout": "10s",
                   "relabelings": [{"targetLabel": "cluster", "replacement": "east"}],
                   "metricRelabelings": [{"sourceLabels": ["__name__"], "regex": "go_.*", "action": "drop"}]},
    "prometheusRule": {"enabled": true, "labels": {"release": "kube-prometheus-stack"},
                       "runbookBaseUrl": "https://runbooks.example.com/gaptrain"},
    "dashboards": {"enabled": true}}
})"_json;

// The labels Helm's conventions add and deploy/ does not carry.
const std::set<std::string> kChartOnlyLabels = {
    "helm.sh/chart", "app.kubernetes.io/instance", "app.kubernetes.io/managed-by",
    "app.kubernetes.io/version", "app.kubernetes.io/component"};

class GaptrainChartTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const Status found = Helm::Find(&helm_);
    if (!found.ok()) GAPTRAIN_SKIP_OR_FAIL_IN_CI(found.message());
  }

  std::string Render(const json& overrides, const HelmRelease& release = HelmRelease()) {
    HelmValues values;
    values.overrides = overrides;
    std::string manifests;
    const Status s = helm_.Template(kChart, release, values, &manifests);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return manifests;
  }

  // The chart's objects as `helm template RELEASE -n NAMESPACE` gives them
  // (`helm template gaptrain -n gaptrain-system` by default).
  std::vector<json> RenderChart(const json& overrides,
                                const HelmRelease& release = HelmRelease()) {
    const std::string text = Render(overrides, release);
    std::vector<json> objects;
    const Status parsed = ParseManifests(text, &objects);
    EXPECT_TRUE(parsed.ok()) << parsed.ToString() << "\n" << text;
    return objects;
  }

  // What helm says when it refuses the values; "" when it renders.
  std::string Refusal(const json& overrides) {
    HelmValues values;
    values.overrides = overrides;
    std::string manifests;
    return helm_.Template(kChart, HelmRelease(), values, &manifests).message();
  }

  Helm helm_;
};

json OperatorDeployment(const std::vector<json>& objects, const std::string& name = kOperator) {
  return FindObject(objects, "Deployment", name);
}

json PodSpec(const std::vector<json>& objects, const std::string& name = kOperator) {
  return OperatorDeployment(objects, name)["spec"]["template"]["spec"];
}

json OperatorContainer(const std::vector<json>& objects, const std::string& name = kOperator) {
  const json deployment = OperatorDeployment(objects, name);
  return deployment.is_null() ? json(nullptr) : deployment["spec"]["template"]["spec"]["containers"][0];
}

// The operator's options from its container's args, as it parses them.
OperatorOptions ParsedArgs(const json& container) {
  std::vector<std::string> args;
  for (const json& a : container["args"]) args.push_back(a.get<std::string>());
  OperatorOptions options;
  const Status s = ParseOperatorFlags(args, {{"POD_NAME", "gaptrain-operator-0"}}, &options);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return options;
}

// What the args mean to gaptrain-operator: two arg lists compare equal
// when it runs alike under both ("--flag value" or "--flag=value", a flag
// given at its default or left out).
json ArgsMeaning(const json& args) {
  std::vector<std::string> list;
  for (const json& a : args) list.push_back(a.get<std::string>());
  OperatorOptions o;
  const Status s = ParseOperatorFlags(list, {{"POD_NAME", "gaptrain-operator-0"}}, &o);
  if (!s.ok()) return {{"refused", s.ToString()}, {"args", args}};
  return {{"kubeconfig", o.kubeconfig},
          {"context", o.context},
          {"namespace", o.watch_namespace},
          {"image", o.image_given ? o.job.image : ""},
          {"imagePullSecrets", o.job.image_pull_secrets},
          {"spot", {o.job.spot.name, o.job.spot.tolerations, o.job.spot.spot_node_selector}},
          {"progressPollSeconds", o.job.progress_poll_interval.count()},
          {"workers", o.workers},
          {"leaderElect", o.leader_elect},
          {"leaderElectionNamespace", o.leader_election_namespace},
          {"leaseName", o.lease_name},
          {"leaseDurationMs", o.lease_duration.count()},
          {"renewDeadlineMs", o.renew_deadline.count()},
          {"retryPeriodMs", o.retry_period.count()},
          {"metricsAddress", o.metrics_address},
          {"metricsPort", o.metrics_port},
          {"healthPort", o.health_port},
          {"portsFile", o.ports_file},
          {"podName", o.pod_name},
          {"networkPolicy", o.job.network_policy.enabled},
          {"networkPolicyPrometheusNamespace", o.job.network_policy.prometheus_namespace}};
}

// deploy/'s and the chart's objects made comparable: the chart-only
// labels dropped (from labels and selectors alike), args as their meaning.
void Normalize(json* node) {
  if (node->is_object()) {
    for (auto& [key, value] : node->items()) {
      if ((key == "labels" || key == "matchLabels") && value.is_object()) {
        for (const std::string& label : kChartOnlyLabels) value.erase(label);
      }
      if (key == "containers" && value.is_array()) {
        for (json& c : value) {
          if (c.contains("args")) c["args"] = ArgsMeaning(c["args"]);
        }
      }
      Normalize(&value);
    }
  } else if (node->is_array()) {
    for (json& item : *node) Normalize(&item);
  }
}

std::string KindAndName(const json& o) {
  return o["kind"].get<std::string>() + "/" + o["metadata"]["name"].get<std::string>();
}

std::set<std::string> KindsAndNames(const std::vector<json>& objects) {
  std::set<std::string> names;
  for (const json& o : objects) names.insert(KindAndName(o));
  return names;
}

json ScrapeConfig() {
  json config;
  const Status s = ReadYamlFile("deploy/monitoring/prometheus-scrape.yml", &config);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return config;
}

bool Contains(const json& list, const json& item) {
  return std::find(list.begin(), list.end(), item) != list.end();
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

TEST(GaptrainChartFilesTest, CrdDashboardsAndRulesAreDeploysFilesByteForByte) {
  for (const auto& [chart_file, deploy_file] : std::vector<std::pair<std::string, std::string>>{
           {"crds/gaptrain.io_trainingjobs.yaml", "deploy/crd/gaptrain.io_trainingjobs.yaml"},
           {"dashboards/gaptrain-job.dashboard.json", "deploy/monitoring/gaptrain-job.dashboard.json"},
           {"dashboards/gaptrain-operator.dashboard.json",
            "deploy/monitoring/gaptrain-operator.dashboard.json"},
           {"rules/gaptrain-job.rules.yml", "deploy/monitoring/gaptrain-job.rules.yml"},
           {"rules/gaptrain-operator.rules.yml", "deploy/monitoring/gaptrain-operator.rules.yml"}}) {
    const std::string want = ReadRaw(deploy_file);
    ASSERT_FALSE(want.empty()) << deploy_file;
    EXPECT_TRUE(ReadRaw(std::string(kChart) + "/" + chart_file) == want)
        << "helm/gaptrain/" << chart_file << " differs from " << deploy_file << ": cp "
        << deploy_file << " helm/gaptrain/" << chart_file;
  }
}

// Chart.yaml's icon (which `helm lint` asks for) is a file of this
// repository at the release's tag.
TEST(GaptrainChartFilesTest, IconIsARepositoryFile) {
  json chart;
  ASSERT_TRUE(ReadYamlFile(std::string(kChart) + "/Chart.yaml", &chart).ok());
  const std::string icon = chart.value("icon", "");
  const std::string base = "https://raw.githubusercontent.com/gaptrain/gaptrain/v" +
                           chart["appVersion"].get<std::string>() + "/";
  ASSERT_EQ(icon.rfind(base, 0), 0u) << icon << " is not under " << base;
  const std::string path = icon.substr(base.size());
  EXPECT_TRUE(PathExists(path)) << path;
  EXPECT_NE(ReadRaw(path).find("<svg"), std::string::npos) << path;
}

TEST_F(GaptrainChartTest, DefaultValuesPassDeploysChecks) {
  const std::vector<json> objects = RenderChart(json::object());
  ASSERT_FALSE(objects.empty());
  EXPECT_EQ(ProblemLines(InstallProblems(objects, ScrapeConfig())), "");
  EXPECT_EQ(KindsAndNames(objects),
            (std::set<std::string>{"ClusterRole/gaptrain-operator", "ClusterRole/gaptrain-edit",
                                   "ClusterRole/gaptrain-view",
                                   "ClusterRoleBinding/gaptrain-operator",
                                   "Deployment/gaptrain-operator",
                                   "PodDisruptionBudget/gaptrain-operator",
                                   "ServiceAccount/gaptrain-operator"}));
  // Helm's standard labels on every object.
  for (const json& o : objects) {
    const json labels = o["metadata"]["labels"];
    for (const char* label : {"helm.sh/chart", "app.kubernetes.io/instance",
                              "app.kubernetes.io/managed-by", "app.kubernetes.io/version"}) {
      EXPECT_TRUE(labels.contains(label)) << KindAndName(o) << " lacks " << label;
    }
    EXPECT_EQ(labels["app.kubernetes.io/part-of"], "gaptrain") << KindAndName(o);
    EXPECT_EQ(labels["app.kubernetes.io/instance"], "gaptrain") << KindAndName(o);
  }
}

TEST_F(GaptrainChartTest, MonitoringTogglesAddPodMonitorsRulesAndDashboards) {
  const std::vector<json> objects = RenderChart(kMonitoringOn);
  EXPECT_EQ(ProblemLines(IdentityProblems(objects)), "");
  EXPECT_EQ(ProblemLines(PodMonitorProblems(objects, ScrapeConfig())), "");
  EXPECT_EQ(ProblemLines(DashboardConfigMapProblems(
                objects, {"deploy/monitoring/gaptrain-job.dashboard.json",
                          "deploy/monitoring/gaptrain-operator.dashboard.json"})),
            "");
  EXPECT_FALSE(FindObject(objects, "PrometheusRule", "gaptrain-job").is_null());
  EXPECT_FALSE(FindObject(objects, "PrometheusRule", "gaptrain-operator").is_null());
}

TEST_F(GaptrainChartTest, DefaultsRenderWhatKustomizeRenders) {
  // scripts/test-cluster.sh puts kubectl beside helm, so where this test
  // runs at all it has one.
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
    Normalize(&o);
    from_deploy[KindAndName(o)] = o;
  }
  for (json o : RenderChart(kMonitoringOn)) {
    Normalize(&o);
    from_chart[KindAndName(o)] = o;
  }
  // With its PodMonitors on, the chart also lets Prometheus' namespace
  // ("monitoring", docs/install.md's) into job pods' /metrics. deploy/'s
  // add-on is other objects and cannot change deploy/'s operator:
  // docs/install.md adds that flag with a kustomization of the user's own.
  json& deploy_args =
      from_deploy["Deployment/gaptrain-operator"]["spec"]["template"]["spec"]["containers"][0]
                 ["args"];
  EXPECT_EQ(deploy_args["networkPolicyPrometheusNamespace"], "");
  deploy_args["networkPolicyPrometheusNamespace"] = "monitoring";
  for (const char* name : {"Deployment/gaptrain-operator", "ClusterRole/gaptrain-edit",
                           "PodMonitor/gaptrain-jobs", "ConfigMap/gaptrain-dashboards"}) {
    ASSERT_TRUE(from_deploy.count(name)) << "kubectl kustomize rendered no " << name;
  }
  for (const auto& [name, object] : from_deploy) {
    ASSERT_TRUE(from_chart.count(name)) << "the chart does not render " << name;
    EXPECT_EQ(from_chart[name], object) << name << ": the chart renders\n"
                                        << from_chart[name].dump(2) << "\ndeploy/ has\n"
                                        << object.dump(2);
  }
  // The chart adds only a disruption budget, which its two replicas want
  // and deploy/ leaves to the user.
  std::set<std::string> chart_only;
  for (const auto& [name, object] : from_chart) {
    if (!from_deploy.count(name)) chart_only.insert(name);
  }
  EXPECT_EQ(chart_only, std::set<std::string>{"PodDisruptionBudget/gaptrain-operator"});
}

// Each PrometheusRule holds its rule file's groups (the ones promtool
// tests), with every alert's runbook under runbookBaseUrl.
TEST_F(GaptrainChartTest, PrometheusRulesAreTheRuleFilesUnderTheRunbookBase) {
  for (const std::string& base : {std::string(kDefaultRunbookBase),
                                 std::string("https://runbooks.example.com/gaptrain.html")}) {
    SCOPED_TRACE(base);
    json values = {{"enabled", true}};
    // The default from values.yaml; the other given.
    if (base != kDefaultRunbookBase) values["runbookBaseUrl"] = base;
    const std::vector<json> objects = RenderChart({{"monitoring", {{"prometheusRule", values}}}});
    for (const std::string what : {"job", "operator"}) {
      const json rule = FindObject(objects, "PrometheusRule", "gaptrain-" + what);
      ASSERT_TRUE(rule.is_object()) << what;
      EXPECT_EQ(rule["apiVersion"], "monitoring.coreos.com/v1");
      json file;
      ASSERT_TRUE(ReadYamlFile("helm/gaptrain/rules/gaptrain-" + what + ".rules.yml", &file).ok());
      json groups = rule["spec"]["groups"];
      int alerts = 0;
      for (json& group : groups) {
        for (json& r : group["rules"]) {
          if (!r.contains("alert")) continue;
          ++alerts;
          std::string& url = r["annotations"]["runbook_url"].get_ref<std::string&>();
          EXPECT_EQ(url, base + "#" + Lower(r["alert"].get<std::string>()));
          // Back to the file's URL, to compare the rest.
          if (url.rfind(base, 0) == 0) url = kDefaultRunbookBase + url.substr(base.size());
        }
      }
      EXPECT_GT(alerts, 0) << what;
      EXPECT_EQ(groups, file["groups"]) << what;
      if (base != kDefaultRunbookBase) {
        EXPECT_EQ(rule.dump().find(kDefaultRunbookBase), std::string::npos) << rule.dump(2);
      }
    }
  }
}

// deploy/monitoring/prometheus_rules.yaml (for kustomize users, generated
// from the same rule files) holds the same PrometheusRules.
TEST_F(GaptrainChartTest, PrometheusRulesAreDeploysPrometheusRules) {
  const std::string file = "deploy/monitoring/prometheus_rules.yaml";
  ASSERT_TRUE(PathExists(file)) << file << " is not among the test's runfiles";
  std::vector<json> deploy;
  ASSERT_TRUE(ParseManifests(ReadRaw(file), &deploy).ok());
  std::vector<json> chart;
  for (json o : RenderChart({{"monitoring", {{"prometheusRule", {{"enabled", true}}}}}})) {
    if (o["kind"] != "PrometheusRule") continue;
    Normalize(&o);
    chart.push_back(o);
  }
  EXPECT_EQ(KindsAndNames(chart), KindsAndNames(deploy));
  for (const json& want : deploy) {
    EXPECT_EQ(FindObject(chart, "PrometheusRule", want["metadata"]["name"]), want)
        << KindAndName(want);
  }
}

TEST_F(GaptrainChartTest, SchemaRefusesWrongValues) {
  const std::vector<std::pair<json, std::vector<std::string>>> cases = {
      {{{"replicas", "two"}, {"replica", 3}},
       {"at '/replicas': got string, want integer",
        "at '': additional properties 'replica' not allowed"}},
      {{{"serviceAccount", {{"create", false}}}},
       {"at '/serviceAccount/name': minLength: got 0, want 1"}},
      {{{"securityContext", {{"runAsNonroot", true}}}},
       {"at '/securityContext': additional properties 'runAsNonroot' not allowed"}},
      {{{"monitoring", {{"podMonitor", {{"enable", true}}}}}},
       {"at '/monitoring/podMonitor': additional properties 'enable' not allowed"}},
      {{{"image", {{"digest", "latest"}}}}, {"at '/image/digest'"}},
      {{{"workers", 0}}, {"at '/workers': minimum: got 0, want 1"}},
      {{{"jobPodIds", "openshift"}}, {"at '/jobPodIds': value must be one of 'auto', 'image', 'cluster'"}},
      {{{"networkPolicy", {{"enabled", "yes"}}}}, {"at '/networkPolicy/enabled'"}},
      {{{"networkPolicy", {{"prometheusNamespace", "Monitoring"}}}},
       {"at '/networkPolicy/prometheusNamespace'"}},
      // What --image-pull-secrets would refuse: a name that is no Secret's.
      {json::parse(R"j({"jobImagePullSecrets": [{"name": "Reg_Cred"}]})j"),
       {"at '/jobImagePullSecrets/0/name': 'Reg_Cred' does not match pattern"}},
      {json::parse(R"j({"imagePullSecrets": [{"name": "regcred", "namespace": "x"}]})j"),
       {"at '/imagePullSecrets/0': additional properties 'namespace' not allowed"}},
  };
  for (const auto& [overrides, named] : cases) {
    const std::string refusal = Refusal(overrides);
    for (const std::string& want : named) {
      EXPECT_NE(refusal.find(want), std::string::npos)
          << overrides << ": want \"" << want << "\" in:\n" << refusal;
    }
  }
  // helm lint checks the schema too.
  HelmValues values;
  values.overrides = {{"replicas", "two"}};
  std::string report;
  EXPECT_FALSE(helm_.Lint(kChart, values, &report).ok()) << report;
  // What gaptrain-operator would refuse at start, the chart refuses.
  EXPECT_NE(Refusal({{"leaderElection", {{"enabled", false}}}})
                .find("leaderElection.enabled must be true with more than one replica"),
            std::string::npos);
  EXPECT_NE(Refusal({{"leaderElection", {{"renewDeadlineSeconds", 15}}}})
                .find("renewDeadlineSeconds must be less than leaseDurationSeconds"),
            std::string::npos);
}

// Release "gaptrain" gives deploy/'s names; another release or an override
// renames every object, the Lease and the references between them.
TEST_F(GaptrainChartTest, NamesFollowTheReleaseAndTheOverrides) {
  struct Case {
    std::string release;
    json overrides;
    std::string operator_name, prefix, name_label;
  };
  // As long as Helm allows (53), containing "gaptrain": the prefix is the
  // release's name cut to 52.
  const std::string long_release = "gaptrain-" + std::string(44, 'x');
  const std::vector<Case> cases = {
      {"gaptrain", json::object(), "gaptrain-operator", "gaptrain", "gaptrain-operator"},
      {"gaptrain-prod", json::object(), "gaptrain-prod-operator", "gaptrain-prod",
       "gaptrain-operator"},
      {"ml", json::object(), "ml-gaptrain-operator", "ml-gaptrain", "gaptrain-operator"},
      {"ml", {{"nameOverride", "trainer"}}, "ml-trainer-operator", "ml-trainer",
       "trainer-operator"},
      {"ml", {{"fullnameOverride", "acme"}}, "acme", "acme", "gaptrain-operator"},
      {long_release, json::object(), long_release.substr(0, 52) + "-operator",
       long_release.substr(0, 52), "gaptrain-operator"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.release + " " + c.overrides.dump());
    json overrides = kMonitoringOn;
    overrides.merge_patch(c.overrides);
    const std::vector<json> objects = RenderChart(overrides, HelmRelease{c.release, "ml-ops"});
    const std::string& op = c.operator_name;
    EXPECT_EQ(KindsAndNames(objects),
              (std::set<std::string>{
                  "ClusterRole/" + op, "ClusterRole/" + c.prefix + "-edit",
                  "ClusterRole/" + c.prefix + "-view", "ClusterRoleBinding/" + op,
                  "ConfigMap/" + c.prefix + "-dashboards", "Deployment/" + op,
                  "PodDisruptionBudget/" + op, "PodMonitor/" + c.prefix + "-jobs",
                  "PodMonitor/" + op, "PrometheusRule/" + c.prefix + "-job",
                  "PrometheusRule/" + c.prefix + "-operator", "ServiceAccount/" + op}));
    for (const json& o : objects) {
      EXPECT_LE(o["metadata"]["name"].get<std::string>().size(), 63u) << KindAndName(o);
    }
    const json binding = FindObject(objects, "ClusterRoleBinding", op);
    EXPECT_EQ(binding["roleRef"]["name"], op);
    EXPECT_EQ(binding["subjects"],
              json::array({{{"kind", "ServiceAccount"}, {"name", op}, {"namespace", "ml-ops"}}}));
    EXPECT_EQ(PodSpec(objects, op)["serviceAccountName"], op);
    EXPECT_EQ(ParsedArgs(OperatorContainer(objects, op)).lease_name, op);
    // The operator's pods, and what selects them.
    const json deployment = OperatorDeployment(objects, op);
    const json selector = {{"app.kubernetes.io/name", c.name_label},
                           {"app.kubernetes.io/instance", c.release}};
    EXPECT_EQ(deployment["spec"]["selector"]["matchLabels"], selector);
    const json pod_labels = deployment["spec"]["template"]["metadata"]["labels"];
    for (const auto& [key, value] : selector.items()) EXPECT_EQ(pod_labels[key], value) << key;
    EXPECT_EQ(FindObject(objects, "PodDisruptionBudget", op)["spec"]["selector"]["matchLabels"],
              selector);
    EXPECT_EQ(FindObject(objects, "PodMonitor", op)["spec"]["selector"]["matchLabels"], selector);
  }
}

TEST_F(GaptrainChartTest, ServiceAccountValues) {
  // An existing account: none is created; the pods run as it, the
  // ClusterRole is bound to it.
  std::vector<json> objects =
      RenderChart({{"serviceAccount", {{"create", false}, {"name", "ml-operator"}}}});
  EXPECT_EQ(KindsAndNames(objects).count("ServiceAccount/gaptrain-operator"), 0u);
  EXPECT_EQ(PodSpec(objects)["serviceAccountName"], "ml-operator");
  EXPECT_EQ(FindObject(objects, "ClusterRoleBinding", kOperator)["subjects"][0]["name"],
            "ml-operator");
  // Created under another name, with a cloud identity's annotation.
  const json annotations = {{"iam.gke.io/gcp-service-account", "gaptrain@p.iam.gserviceaccount.com"}};
  objects = RenderChart({{"serviceAccount", {{"name", "trainer-sa"}, {"annotations", annotations}}}});
  EXPECT_EQ(ProblemLines(RbacProblems(objects)), "");
  EXPECT_EQ(FindObject(objects, "ServiceAccount", "trainer-sa")["metadata"]["annotations"],
            annotations);
  EXPECT_EQ(PodSpec(objects)["serviceAccountName"], "trainer-sa");
}

TEST_F(GaptrainChartTest, SpotPresetsImageAndNamespace) {
  const json spot_json = R"({"tolerations": [{"key": "pool", "operator": "Equal", "value": "spot", "effect": "NoSchedule"}], "spotNodeSelector": [{"key": "pool", "operator": "In", "values": ["spot"]}]})"_json;
  for (const std::string& preset : {std::string("gke"), std::string("eks"), spot_json.dump()}) {
    const std::vector<json> objects = RenderChart({{"spot", {{"preset", preset}}},
                                                   {"image", {{"tag", "0.2.0"}}},
                                                   {"replicas", 3},
                                                   {"watchNamespace", "team-a"}});
    EXPECT_EQ(ProblemLines(OperatorDeploymentProblems(objects)), "") << preset;
    const json container = OperatorContainer(objects);
    EXPECT_EQ(container["image"], "ghcr.io/gaptrain/gaptrain:0.2.0");
    const json args = container["args"];
    EXPECT_TRUE(Contains(args, "--namespace=team-a")) << args;
    const auto at = std::find(args.begin(), args.end(), "--spot-preset");
    ASSERT_NE(at, args.end());
    EXPECT_EQ(*(at + 1), preset);
    EXPECT_EQ(OperatorDeployment(objects)["spec"]["replicas"], 3);
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

// The image is named once: the container's, which job pods get unless
// jobImage passes --image; a digest pins it.
TEST_F(GaptrainChartTest, ImageDigestAndJobImage) {
  const std::string digest = "sha256:" + std::string(64, 'a');
  std::vector<json> objects = RenderChart({{"image", {{"tag", "0.2.0"}, {"digest", digest}}}});
  EXPECT_EQ(OperatorContainer(objects)["image"], "ghcr.io/gaptrain/gaptrain@" + digest);
  EXPECT_FALSE(ParsedArgs(OperatorContainer(objects)).image_given);
  EXPECT_EQ(ProblemLines(OperatorDeploymentProblems(objects)), "");

  objects = RenderChart({{"jobImage", "registry.example.com/gaptrain:jobs"}});
  const OperatorOptions options = ParsedArgs(OperatorContainer(objects));
  EXPECT_TRUE(options.image_given);
  EXPECT_EQ(options.job.image, "registry.example.com/gaptrain:jobs");
  EXPECT_EQ(OperatorContainer(objects)["image"], "ghcr.io/gaptrain/gaptrain:0.1.0");
}

// Job pods pull with the operator's pull secrets (the same image, unless
// jobImage) and jobImagePullSecrets, each once (--image-pull-secrets); the
// operator's pod keeps only its own.
TEST_F(GaptrainChartTest, ImagePullSecretsReachTheJobPods) {
  std::vector<json> objects = RenderChart(json::object());
  EXPECT_TRUE(ParsedArgs(OperatorContainer(objects)).job.image_pull_secrets.empty());
  EXPECT_FALSE(PodSpec(objects).contains("imagePullSecrets"));

  objects = RenderChart(json::parse(R"j({"imagePullSecrets": [{"name": "regcred"}],
      "jobImagePullSecrets": [{"name": "jobs.example.com"}, {"name": "regcred"}]})j"));
  EXPECT_EQ(ProblemLines(OperatorDeploymentProblems(objects)), "");
  EXPECT_EQ(ParsedArgs(OperatorContainer(objects)).job.image_pull_secrets,
            (std::vector<std::string>{"regcred", "jobs.example.com"}));
  EXPECT_EQ(PodSpec(objects)["imagePullSecrets"], json::parse(R"j([{"name": "regcred"}])j"));

  objects = RenderChart(json::parse(R"j({"jobImagePullSecrets": [{"name": "jobs-registry"}]})j"));
  EXPECT_EQ(ParsedArgs(OperatorContainer(objects)).job.image_pull_secrets,
            std::vector<std::string>{"jobs-registry"});
  EXPECT_FALSE(PodSpec(objects).contains("imagePullSecrets"));
}

// The flags users tune, as the operator parses them; extraArgs come last
// and win.
TEST_F(GaptrainChartTest, OperatorFlagsFromValues) {
  const std::vector<json> objects = RenderChart(
      {{"workers", 8},
       {"progressPollSeconds", 30},
       {"leaderElection",
        {{"leaseDurationSeconds", 30}, {"renewDeadlineSeconds", 20}, {"retryPeriodSeconds", 2.5}}},
       {"ports", {{"metrics", 9090}, {"health", 9091}}},
       {"jobPodIds", "cluster"},
       {"extraArgs", {"--progress-poll-seconds=45", "--metrics-address=0.0.0.0"}}});
  EXPECT_EQ(ProblemLines(OperatorDeploymentProblems(objects)), "");
  const OperatorOptions o = ParsedArgs(OperatorContainer(objects));
  EXPECT_EQ(o.workers, 8);
  EXPECT_EQ(o.pod_ids, "cluster");
  EXPECT_EQ(o.job.progress_poll_interval, std::chrono::seconds(45));
  EXPECT_EQ(o.lease_duration, std::chrono::seconds(30));
  EXPECT_EQ(o.renew_deadline, std::chrono::seconds(20));
  EXPECT_EQ(o.retry_period, std::chrono::milliseconds(2500));
  EXPECT_EQ(o.metrics_port, 9090);
  EXPECT_EQ(o.health_port, 9091);
  EXPECT_EQ(OperatorDeployment(objects)["spec"]["template"]["metadata"]["annotations"]
                                       ["prometheus.io/port"],
            "9090");
}

// Each job's NetworkPolicy: on by default (the operator's default, so no
// flag), off with networkPolicy.enabled=false; Prometheus' namespace let in
// when named, and "monitoring" by default once the PodMonitors are on.
TEST_F(GaptrainChartTest, NetworkPolicyValues) {
  OperatorOptions o = ParsedArgs(OperatorContainer(RenderChart(json::object())));
  EXPECT_TRUE(o.job.network_policy.enabled);
  EXPECT_EQ(o.job.network_policy.prometheus_namespace, "");
  // The operator's pods carry the label the policies admit them by,
  // whatever the chart's names.
  for (const json& values : {json::object(), json{{"nameOverride", "trainer"}},
                             json{{"fullnameOverride", "ops"}}}) {
    const std::vector<json> objects = RenderChart(values);
    json deployment;
    for (const json& object : objects) {
      if (object["kind"] == "Deployment") deployment = object;
    }
    EXPECT_EQ(deployment["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/part-of"],
              "gaptrain")
        << values;
  }

  o = ParsedArgs(OperatorContainer(RenderChart({{"networkPolicy", {{"enabled", false}}}})));
  EXPECT_FALSE(o.job.network_policy.enabled);
  o = ParsedArgs(OperatorContainer(
      RenderChart({{"networkPolicy", {{"prometheusNamespace", "observability"}}}})));
  EXPECT_TRUE(o.job.network_policy.enabled);
  EXPECT_EQ(o.job.network_policy.prometheus_namespace, "observability");
  o = ParsedArgs(OperatorContainer(RenderChart(kMonitoringOn)));
  EXPECT_EQ(o.job.network_policy.prometheus_namespace, "monitoring");
  json named = kMonitoringOn;
  named["networkPolicy"] = {{"prometheusNamespace", "observability"}};
  o = ParsedArgs(OperatorContainer(RenderChart(named)));
  EXPECT_EQ(o.job.network_policy.prometheus_namespace, "observability");
  // Off is off, whatever else is set.
  named["networkPolicy"]["enabled"] = false;
  o = ParsedArgs(OperatorContainer(RenderChart(named)));
  EXPECT_FALSE(o.job.network_policy.enabled);
  EXPECT_EQ(o.job.network_policy.prometheus_namespace, "");
  // The ClusterRole is the same either way (OperatorPolicyRules()).
  EXPECT_EQ(ProblemLines(RbacProblems(RenderChart({{"networkPolicy", {{"enabled", false}}}}))),
            "");
}

TEST_F(GaptrainChartTest, PodValues) {
  const std::vector<json> objects = RenderChart(kEverythingOn);
  const json deployment = OperatorDeployment(objects);
  const json pod = deployment["spec"]["template"];
  const json spec = pod["spec"];
  EXPECT_EQ(spec["imagePullSecrets"], kEverythingOn["imagePullSecrets"]);
  EXPECT_EQ(spec["priorityClassName"], "system-cluster-critical");
  EXPECT_EQ(spec["nodeSelector"], kEverythingOn["nodeSelector"]);
  EXPECT_EQ(spec["tolerations"], kEverythingOn["tolerations"]);
  // A given affinity replaces the default anti-affinity.
  EXPECT_EQ(spec["affinity"], kEverythingOn["affinity"]);
  EXPECT_EQ(pod["metadata"]["annotations"]["example.com/team"], "ml");
  EXPECT_EQ(pod["metadata"]["annotations"]["prometheus.io/scrape"], "true");
  EXPECT_EQ(pod["metadata"]["labels"]["example.com/cost-center"], "research");
  EXPECT_EQ(pod["metadata"]["labels"]["app.kubernetes.io/name"], "gaptrain-operator");
  // extraEnv after the downward API's.
  const json env = spec["containers"][0]["env"];
  ASSERT_EQ(env.size(), 3u) << env;
  EXPECT_EQ(env[0]["name"], "POD_NAME");
  EXPECT_EQ(env[1]["name"], "POD_NAMESPACE");
  EXPECT_EQ(env[2], kEverythingOn["extraEnv"][0]);
  EXPECT_EQ(ParsedArgs(spec["containers"][0]).workers, 4);
  // The default: replicas preferably apart, selected as the Deployment selects.
  const std::vector<json> plain = RenderChart(json::object());
  const json anti = PodSpec(plain)["affinity"]["podAntiAffinity"]
                           ["preferredDuringSchedulingIgnoredDuringExecution"][0];
  EXPECT_EQ(anti["podAffinityTerm"]["labelSelector"]["matchLabels"],
            OperatorDeployment(plain)["spec"]["selector"]["matchLabels"]);
  EXPECT_EQ(anti["podAffinityTerm"]["topologyKey"], "kubernetes.io/hostname");
  // No fixed user: the image's, or the one OpenShift assigns.
  EXPECT_EQ(PodSpec(plain)["securityContext"],
            json({{"runAsNonRoot", true}, {"seccompProfile", {{"type", "RuntimeDefault"}}}}));
  const std::vector<json> with_fs_group =
      RenderChart({{"podSecurityContext", {{"runAsNonRoot", true}, {"fsGroup", 65532}}}});
  EXPECT_EQ(PodSpec(with_fs_group)["securityContext"]["fsGroup"], 65532);
}

TEST_F(GaptrainChartTest, PodDisruptionBudgetWithMoreThanOneReplica) {
  std::vector<json> objects = RenderChart(json::object());
  json pdb = FindObject(objects, "PodDisruptionBudget", kOperator);
  ASSERT_TRUE(pdb.is_object());
  EXPECT_EQ(pdb["apiVersion"], "policy/v1");
  EXPECT_EQ(pdb["spec"]["maxUnavailable"], 1);
  EXPECT_EQ(pdb["spec"]["selector"], OperatorDeployment(objects)["spec"]["selector"]);
  // minAvailable replaces maxUnavailable (the API refuses both).
  pdb = FindObject(RenderChart({{"podDisruptionBudget", {{"minAvailable", "50%"}}}}),
                   "PodDisruptionBudget", kOperator);
  EXPECT_EQ(pdb["spec"]["minAvailable"], "50%");
  EXPECT_FALSE(pdb["spec"].contains("maxUnavailable"));
  // One replica: a budget would block every drain.
  EXPECT_TRUE(FindObject(RenderChart({{"replicas", 1}}), "PodDisruptionBudget", kOperator).is_null());
  EXPECT_TRUE(FindObject(RenderChart({{"podDisruptionBudget", {{"enabled", false}}}}),
                         "PodDisruptionBudget", kOperator)
                  .is_null());
}

TEST_F(GaptrainChartTest, PodMonitorAndRuleValues) {
  const std::vector<json> objects = RenderChart(kEverythingOn);
  EXPECT_EQ(ProblemLines(PodMonitorProblems(objects, ScrapeConfig())), "");
  const json& pm = kEverythingOn["monitoring"]["podMonitor"];
  for (const char* name : {"gaptrain-jobs", "gaptrain-operator"}) {
    const json monitor = FindObject(objects, "PodMonitor", name);
    ASSERT_TRUE(monitor.is_object()) << name;
    EXPECT_EQ(monitor["metadata"]["labels"]["release"], "kube-prometheus-stack") << name;
    const json endpoint = monitor["spec"]["podMetricsEndpoints"][0];
    EXPECT_EQ(endpoint["port"], "metrics");
    EXPECT_EQ(endpoint["interval"], "30s");
    EXPECT_EQ(endpoint["scrapeTimeout"], "10s");
    EXPECT_EQ(endpoint["relabelings"], pm["relabelings"]);
    EXPECT_EQ(endpoint["metricRelabelings"], pm["metricRelabelings"]);
  }
  for (const char* name : {"gaptrain-job", "gaptrain-operator"}) {
    EXPECT_EQ(FindObject(objects, "PrometheusRule", name)["metadata"]["labels"]["release"],
              "kube-prometheus-stack")
        << name;
  }
  // The users' roles are optional.
  const std::set<std::string> names =
      KindsAndNames(RenderChart({{"rbac", {{"aggregateToDefaultRoles", false}}}}));
  EXPECT_EQ(names.count("ClusterRole/gaptrain-edit") + names.count("ClusterRole/gaptrain-view"), 0u);
}

// The install commands of helm/gaptrain/README.md, with --set as typed.
TEST_F(GaptrainChartTest, ReadmesSetFlagsWork) {
  const std::vector<std::vector<std::string>> commands = {
      {"spot.preset=gke", "monitoring.podMonitor.enabled=true", "monitoring.dashboards.enabled=true"},
      {"monitoring.podMonitor.enabled=true",
       "monitoring.podMonitor.labels.release=kube-prometheus-stack",
       "monitoring.prometheusRule.enabled=true",
       "monitoring.prometheusRule.labels.release=kube-prometheus-stack",
       "monitoring.dashboards.enabled=true"}};
  const std::string readme = ReadRaw(std::string(kChart) + "/README.md");
  for (const std::vector<std::string>& sets : commands) {
    HelmValues values;
    values.set = sets;
    for (const std::string& set : sets) {
      EXPECT_NE(readme.find("--set " + set), std::string::npos) << set << " is not in the README";
    }
    std::string manifests;
    const Status s = helm_.Template(kChart, HelmRelease(), values, &manifests);
    ASSERT_TRUE(s.ok()) << s.ToString();
    std::vector<json> objects;
    ASSERT_TRUE(ParseManifests(manifests, &objects).ok());
    EXPECT_EQ(ProblemLines(OperatorDeploymentProblems(objects)), "");
    EXPECT_FALSE(FindObject(objects, "PodMonitor", "gaptrain-jobs").is_null());
    EXPECT_FALSE(FindObject(objects, "ConfigMap", "gaptrain-dashboards").is_null());
  }
}

TEST_F(GaptrainChartTest, LintsWithoutFindings) {
  for (const json& overrides : {json::object(), kEverythingOn}) {
    HelmValues values;
    values.overrides = overrides;
    std::string report;
    const Status s = helm_.Lint(kChart, values, &report);
    EXPECT_TRUE(s.ok()) << s.ToString();
    // Stricter than `helm lint --strict`: not even an [INFO].
    for (const char* finding : {"[ERROR]", "[WARNING]", "[INFO]"}) {
      EXPECT_EQ(report.find(finding), std::string::npos) << overrides << ":\n" << report;
    }
  }
}

// The chart on a real API server: `helm install` with every option on
// creates what it renders (the PodMonitors and PrometheusRules against the
// Prometheus Operator's own CRDs), and NOTES.txt as `helm install` prints
// it (`helm template` does not render it), from a dry run.
class GaptrainChartInstallTest : public GaptrainChartTest {
 protected:
  static void SetUpTestSuite() {
    envtest::ControlPlane::Options options;
    options.work_dir = TestTempDir("cluster");
    std::string assets;
    if (envtest::FindAssets(&assets).ok()) {
      const std::string crds = assets + "/prometheus-operator/example/prometheus-operator-crd/";
      options.crd_files = {crds + "monitoring.coreos.com_podmonitors.yaml",
                           crds + "monitoring.coreos.com_prometheusrules.yaml"};
    }
    envtest::SharedControlPlane::Start(options);
  }
  static void TearDownTestSuite() { envtest::SharedControlPlane::Stop(); }
  void SetUp() override {
    GaptrainChartTest::SetUp();
    GAPTRAIN_REQUIRE_SHARED_CONTROL_PLANE();
    cluster_ = envtest::SharedControlPlane::Get();
  }

  std::string Notes(const json& overrides, const HelmRelease& release) {
    HelmValues values;
    values.overrides = overrides;
    json installed;
    const Status s = helm_.Install(kChart, release, values, cluster_->admin_kubeconfig_file(),
                                   /*dry_run=*/true, &installed);
    EXPECT_TRUE(s.ok()) << s.ToString();
    if (!s.ok()) return "";
    return installed.value("info", json::object()).value("notes", "");
  }

  envtest::ControlPlane* cluster_ = nullptr;
};

TEST_F(GaptrainChartInstallTest, EverythingOnInstallsOnARealApiServer) {
  ASSERT_OK(cluster_->CreateNamespace("team-a"));  // kEverythingOn's watchNamespace
  HelmValues values;
  values.overrides = kEverythingOn;
  json release;
  ASSERT_OK(helm_.Install(kChart, HelmRelease{"gaptrain", "everything"}, values,
                          cluster_->admin_kubeconfig_file(), /*dry_run=*/false, &release));
  EXPECT_EQ(release["info"]["status"], "deployed") << release.dump(2);
  // Every object the chart renders is in the cluster, as the API server
  // validated and stored it.
  std::vector<json> rendered;
  ASSERT_TRUE(ParseManifests(release.value("manifest", ""), &rendered).ok());
  EXPECT_GE(rendered.size(), 10u);
  for (const json& object : rendered) {
    const std::string kind = object["kind"], name = object["metadata"]["name"];
    const std::string ns = object["metadata"].value("namespace", "everything");
    std::string output;
    const Status got = cluster_->Kubectl({"get", kind, name, "-n", ns, "-o", "name"}, &output);
    EXPECT_TRUE(got.ok()) << kind << " " << name << ": " << got.ToString();
  }
  // Its cluster-wide objects would stop another release of the chart.
  ASSERT_OK(helm_.Uninstall(HelmRelease{"gaptrain", "everything"},
                            cluster_->admin_kubeconfig_file()));
  std::string output;
  EXPECT_FALSE(cluster_->Kubectl({"get", "clusterrole", "gaptrain-edit"}, &output).ok()) << output;
}

TEST_F(GaptrainChartInstallTest, NotesSayWhatToRunNextWithoutRepositoryPaths) {
  const std::string notes = Notes(kMonitoringOn, HelmRelease{"gaptrain", "ml-ops"});
  ASSERT_FALSE(notes.empty()) << "helm install --dry-run reported no notes";
  for (const char* want :
       {"kubectl -n ml-ops get pods", "logs deploy/gaptrain-operator", "kubectl get tj -w",
        "ghcr.io/gaptrain/gaptrain:0.1.0",
        "https://github.com/gaptrain/gaptrain/blob/v0.1.0/docs/install.md",
        "`helm upgrade` does not update the TrainingJob CRD",
        "helm show crds CHART --version VERSION | kubectl apply --server-side --force-conflicts -f -",
        "PodMonitors gaptrain-jobs and gaptrain-operator", "PrometheusRules gaptrain-job",
        "ml-ops/gaptrain-dashboards"}) {
    EXPECT_NE(notes.find(want), std::string::npos) << want << " not in:\n" << notes;
  }
  // A packaged chart has no repository around it: paths only in URLs.
  std::string without_urls = notes;
  for (size_t url; (url = without_urls.find("https://")) != std::string::npos;) {
    without_urls.erase(url, without_urls.find_first_of(" \n", url) - url);
  }
  for (const char* path : {"examples/", "docs/", "deploy/crd", "deploy/rbac", "deploy/monitoring",
                           "deploy/operator", "helm/gaptrain"}) {
    EXPECT_EQ(without_urls.find(path), std::string::npos) << path << " in:\n" << notes;
  }
  // The TrainingJob it shows is one the parser and the CRD accept.
  const std::string start = "<<'EOF'\n", end = "\nEOF\n";
  const size_t from = notes.find(start);
  ASSERT_NE(from, std::string::npos) << notes;
  const size_t to = notes.find(end, from);
  ASSERT_NE(to, std::string::npos) << notes;
  const std::string job_text = notes.substr(from + start.size(), to - from - start.size());
  TrainingJob job;
  const Status parsed = ParseTrainingJob(job_text, "NOTES.txt", &job);
  EXPECT_TRUE(parsed.ok()) << parsed.ToString() << "\n" << job_text;
  const YAML::Node schema = YAML::LoadFile("helm/gaptrain/crds/gaptrain.io_trainingjobs.yaml")
      ["spec"]["versions"][0]["schema"]["openAPIV3Schema"];
  EXPECT_EQ(CheckAgainstSchema(schema, YAML::Load(job_text)), std::vector<std::string>{});

  // Without the toggles, NOTES.txt does not mention what is not installed.
  const std::string plain = Notes({{"watchNamespace", "team-a"}}, HelmRelease{"gaptrain", "ml-ops"});
  EXPECT_NE(plain.find("kubectl -n ml-ops get pods"), std::string::npos) << plain;
  EXPECT_NE(plain.find("in namespace team-a"), std::string::npos) << plain;
  EXPECT_EQ(plain.find("PodMonitors"), std::string::npos) << plain;
  EXPECT_EQ(plain.find("gaptrain-dashboards"), std::string::npos) << plain;
}

}  // namespace
}  // namespace gaptrain
