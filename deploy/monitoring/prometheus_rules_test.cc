// The Prometheus side of deploy/monitoring, with Debian's real promtool and
// prometheus: every rule file passes `promtool check rules`, every unit
// test file `promtool test rules`; every alert has a unit test where it
// fires and one where it stays silent, a summary, a description that shows
// the query's value, and an absolute runbook_url whose anchor is its
// section in docs/monitoring.md; prometheus_rules.yaml's PrometheusRules
// carry exactly the rule files' groups (scripts/generate-prometheus-rules.sh
// writes it), which promtool checks as extracted; the example scrape
// configuration passes `promtool check config`, and its relabelling gives
// a TrainingJob's pods the labels the dashboards and rules select by.

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "services/base/os_error.h"
#include "services/base/process.h"
#include "services/testing/prometheus_test_server.h"
#include "services/testing/test_files.h"

namespace gaptrain {
namespace {

const char* const kRuleFiles[] = {"gaptrain-job.rules.yml", "gaptrain-operator.rules.yml"};
const char kDir[] = "deploy/monitoring/";
// Where runbook_urls point: docs/monitoring.md of this release on the
// chart's home (helm/gaptrain/Chart.yaml: home, version). Absolute, so the
// links work from Alertmanager and Grafana.
const char kRunbookBase[] = "https://github.com/gaptrain/gaptrain/blob/v0.1.0/docs/monitoring.md";

std::string TempDir() {
  const char* dir = std::getenv("TEST_TMPDIR");
  return dir != nullptr ? dir : "/tmp";
}

// $GAPTRAIN_PROMTOOL_BINARY, else Debian's (the prometheus package).
std::string Promtool() {
  const char* env = std::getenv("GAPTRAIN_PROMTOOL_BINARY");
  return env != nullptr && *env != '\0' ? env : "/usr/bin/promtool";
}

// Runs promtool with `args`; returns its exit code (-1 when it did not run
// or end) and its output in *output.
int RunPromtool(const std::vector<std::string>& args, std::string* output) {
  static int runs = 0;
  Process::Spec spec;
  spec.binary = Promtool();
  spec.args = args;
  spec.log_file = TempDir() + "/promtool-" + std::to_string(++runs) + ".out";
  std::unique_ptr<Process> process;
  Status s = Process::Start(spec, &process);
  if (!s.ok()) {
    *output = s.ToString() + " (install Debian's prometheus package, which has promtool)";
    return -1;
  }
  const bool exited = process->WaitExit(std::chrono::seconds(120));
  *output = ReadRaw(spec.log_file);
  if (!exited || !WIFEXITED(process->wait_status())) return -1;
  return WEXITSTATUS(process->wait_status());
}

// The test file of `rules`: gaptrain-job.rules.yml -> gaptrain-job.rules.test.yml.
std::string TestFileOf(const std::string& rules) {
  return rules.substr(0, rules.size() - 4) + ".test.yml";
}

struct Rules {
  std::vector<YAML::Node> alerts;
  std::vector<std::string> recorded;
};

Rules LoadRules(const std::string& file) {
  Rules rules;
  const YAML::Node root = YAML::LoadFile(kDir + file);
  for (const YAML::Node& group : root["groups"]) {
    for (const YAML::Node& rule : group["rules"]) {
      if (rule["alert"]) rules.alerts.push_back(rule);
      if (rule["record"]) rules.recorded.push_back(rule["record"].as<std::string>());
    }
  }
  return rules;
}

// GitHub's anchor of a Markdown heading: lower case, punctuation but '-'
// and '_' dropped, spaces made '-'.
std::string GithubAnchor(const std::string& heading) {
  std::string anchor;
  for (unsigned char c : heading) {
    if (std::isalnum(c) || c == '-' || c == '_') {
      anchor += static_cast<char>(std::tolower(c));
    } else if (c == ' ') {
      anchor += '-';
    }
  }
  return anchor;
}

// The anchors of every heading of a Markdown text (outside code blocks).
std::set<std::string> HeadingAnchors(const std::string& markdown) {
  std::set<std::string> anchors;
  std::istringstream lines(markdown);
  std::string line;
  bool in_code = false;
  while (std::getline(lines, line)) {
    if (line.rfind("```", 0) == 0) in_code = !in_code;
    if (in_code || line.empty() || line[0] != '#') continue;
    const size_t text = line.find_first_not_of('#');
    if (text == std::string::npos || line[text] != ' ') continue;
    anchors.insert(GithubAnchor(line.substr(text + 1)));
  }
  return anchors;
}

// A YAML tree as JSON, every scalar a string (as both sides of a
// comparison are read from YAML text, equal text is equal).
nlohmann::json ToJson(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Sequence: {
      nlohmann::json out = nlohmann::json::array();
      for (const YAML::Node& item : node) out.push_back(ToJson(item));
      return out;
    }
    case YAML::NodeType::Map: {
      nlohmann::json out = nlohmann::json::object();
      for (const auto& entry : node) out[entry.first.as<std::string>()] = ToJson(entry.second);
      return out;
    }
    case YAML::NodeType::Scalar:
      return node.as<std::string>();
    default:
      return nullptr;
  }
}

TEST(PrometheusRulesTest, PromtoolChecksEveryRuleFile) {
  for (const char* file : kRuleFiles) {
    std::string output;
    EXPECT_EQ(RunPromtool({"check", "rules", kDir + std::string(file)}, &output), 0)
        << file << ":\n" << output;
    EXPECT_NE(output.find("SUCCESS"), std::string::npos) << output;
  }
}

TEST(PrometheusRulesTest, PromtoolUnitTestsPass) {
  for (const char* file : kRuleFiles) {
    std::string output;
    EXPECT_EQ(RunPromtool({"test", "rules", kDir + TestFileOf(file)}, &output), 0)
        << TestFileOf(file) << ":\n" << output;
    EXPECT_NE(output.find("SUCCESS"), std::string::npos) << output;
  }
}

// A test case per alert where it fires (expected alerts) and one where it
// stays silent (none expected); every recording rule's value is checked.
TEST(PrometheusRulesTest, EveryAlertFiresInAUnitTestAndStaysSilentInAnother) {
  for (const char* file : kRuleFiles) {
    const Rules rules = LoadRules(file);
    ASSERT_FALSE(rules.alerts.empty()) << file;
    const YAML::Node tests = YAML::LoadFile(kDir + TestFileOf(file))["tests"];
    std::map<std::string, int> fires, silent;
    std::set<std::string> checked_exprs;
    for (const YAML::Node& test : tests) {
      for (const YAML::Node& case_ : test["alert_rule_test"]) {
        const std::string name = case_["alertname"].as<std::string>();
        const YAML::Node expected = case_["exp_alerts"];
        ++(expected && expected.size() > 0 ? fires : silent)[name];
      }
      for (const YAML::Node& expr : test["promql_expr_test"]) {
        checked_exprs.insert(expr["expr"].as<std::string>());
      }
    }
    for (const YAML::Node& alert : rules.alerts) {
      const std::string name = alert["alert"].as<std::string>();
      EXPECT_GT(fires[name], 0) << name << ": no unit test where it fires";
      EXPECT_GT(silent[name], 0) << name << ": no unit test where it stays silent";
    }
    for (const std::string& recorded : rules.recorded) {
      EXPECT_TRUE(checked_exprs.count(recorded)) << recorded << ": no promql_expr_test";
    }
  }
}

TEST(PrometheusRulesTest, EveryAlertHasASummaryItsValueAndARunbookSection) {
  const std::string docs = ReadRaw("docs/monitoring.md");
  ASSERT_FALSE(docs.empty()) << "docs/monitoring.md is not in the runfiles";
  const std::set<std::string> anchors = HeadingAnchors(docs);
  EXPECT_EQ(anchors.count("gaptrainjobstuck"), 1u) << "the anchors are GitHub's";
  for (const char* file : kRuleFiles) {
    for (const YAML::Node& alert : LoadRules(file).alerts) {
      const std::string name = alert["alert"].as<std::string>();
      const YAML::Node annotations = alert["annotations"];
      ASSERT_TRUE(annotations) << name;
      EXPECT_FALSE(annotations["summary"].as<std::string>("").empty()) << name;
      EXPECT_NE(annotations["description"].as<std::string>("").find("$value"), std::string::npos)
          << name << ": the description must show the query's value";
      const std::string severity = alert["labels"]["severity"].as<std::string>("");
      EXPECT_TRUE(severity == "warning" || severity == "critical") << name << ": " << severity;
      // Absolute, on https, to an anchor docs/monitoring.md has: the
      // alert's own section ("### Name").
      const std::string url = annotations["runbook_url"].as<std::string>("");
      EXPECT_EQ(url.rfind("https://", 0), 0u) << name << ": " << url;
      const size_t hash = url.find('#');
      ASSERT_NE(hash, std::string::npos) << name << ": " << url;
      EXPECT_EQ(url.substr(0, hash), kRunbookBase) << name;
      const std::string anchor = url.substr(hash + 1);
      EXPECT_EQ(anchors.count(anchor), 1u) << name << ": no heading of docs/monitoring.md has "
                                           << "the anchor #" << anchor;
      EXPECT_EQ(anchor, GithubAnchor(name)) << name << ": not its own section";
      const size_t section = docs.find("\n### " + name + "\n");
      ASSERT_NE(section, std::string::npos) << name << ": no runbook section in monitoring.md";
      // A runbook says what the alert means and what to do.
      const size_t next = docs.find("\n#", section + 5);
      const std::string body = docs.substr(section, next - section);
      for (const char* part : {"**What it means.**", "**What to check.**", "**What to do.**"}) {
        EXPECT_NE(body.find(part), std::string::npos) << name << ": no " << part << "\n" << body;
      }
    }
  }
}

// prometheus_rules.yaml holds one PrometheusRule per rule file for the
// Prometheus Operator, whose spec.groups are the file's groups: the rule
// files are the one source (promtool-tested above), and
// scripts/generate-prometheus-rules.sh writes the PrometheusRules from them.
// The groups as extracted pass `promtool check rules` too.
TEST(PrometheusRulesTest, ThePrometheusRulesCarryExactlyTheRuleFilesGroups) {
  const std::vector<YAML::Node> documents =
      YAML::LoadAllFromFile(std::string(kDir) + "prometheus_rules.yaml");
  std::map<std::string, YAML::Node> by_name;
  for (const YAML::Node& d : documents) {
    if (!d.IsMap()) continue;
    EXPECT_EQ(d["apiVersion"].as<std::string>(""), "monitoring.coreos.com/v1");
    EXPECT_EQ(d["kind"].as<std::string>(""), "PrometheusRule");
    const std::string name = d["metadata"]["name"].as<std::string>("");
    EXPECT_EQ(d["metadata"]["namespace"].as<std::string>(""), "gaptrain-system") << name;
    EXPECT_EQ(d["metadata"]["labels"]["app.kubernetes.io/part-of"].as<std::string>(""),
              "gaptrain")
        << name;
    EXPECT_EQ(by_name.count(name), 0u) << name << " twice";
    by_name[name] = d;
  }
  ASSERT_EQ(by_name.size(), 2u);
  const std::string regenerate =
      "prometheus_rules.yaml differs from the rule files: run "
      "scripts/generate-prometheus-rules.sh";
  for (const char* file : kRuleFiles) {
    const std::string rules(file);
    const std::string name = rules.substr(0, rules.find(".rules.yml"));  // gaptrain-job
    SCOPED_TRACE(name);
    ASSERT_EQ(by_name.count(name), 1u) << "no PrometheusRule " << name;
    const YAML::Node spec = by_name[name]["spec"];
    ASSERT_TRUE(spec.IsMap());
    EXPECT_EQ(spec.size(), 1u) << "spec holds the groups only";
    const nlohmann::json groups = ToJson(spec["groups"]);
    EXPECT_EQ(groups, ToJson(YAML::LoadFile(kDir + rules)["groups"])) << regenerate;
    EXPECT_FALSE(groups.empty());

    // What the Prometheus Operator hands Prometheus: the groups as a rule file.
    const std::string extracted = TempDir() + "/" + name + ".extracted.rules.yml";
    YAML::Node rule_file;
    rule_file["groups"] = spec["groups"];
    std::ofstream(extracted) << YAML::Dump(rule_file) << "\n";
    std::string output;
    EXPECT_EQ(RunPromtool({"check", "rules", extracted}, &output), 0) << output;
    EXPECT_NE(output.find("SUCCESS"), std::string::npos) << output;
  }
}

// The example config, with its Kubernetes discovery swapped for file_sd
// (Debian builds Prometheus without Kubernetes discovery), and its rule
// files next to it.
TEST(PrometheusRulesTest, TheExampleScrapeConfigPassesPromtool) {
  YAML::Node config = YAML::LoadFile(std::string(kDir) + "prometheus-scrape.yml");
  ASSERT_TRUE(config["scrape_configs"].IsSequence());
  for (YAML::Node job : config["scrape_configs"]) {
    if (job["kubernetes_sd_configs"]) {
      job.remove("kubernetes_sd_configs");
      YAML::Node files;
      files["files"].push_back(TempDir() + "/pods.json");
      job["file_sd_configs"].push_back(files);
    }
  }
  const std::string dir = TempDir() + "/scrape-config";
  Status made = MakeDirs(dir);
  ASSERT_TRUE(made.ok()) << made.ToString();
  std::ofstream(dir + "/prometheus.yml") << YAML::Dump(config) << "\n";
  for (const char* file : kRuleFiles) {
    std::ofstream(dir + "/" + file) << ReadRaw(kDir + std::string(file));
  }
  std::string output;
  EXPECT_EQ(RunPromtool({"check", "config", dir + "/prometheus.yml"}, &output), 0) << output;
  EXPECT_NE(output.find("SUCCESS: 2 rule files found"), std::string::npos) << output;
}

// A scrape job's relabel_configs from the example config, as YAML text.
std::string RelabelConfigs(const std::string& job_name) {
  const YAML::Node config = YAML::LoadFile(std::string(kDir) + "prometheus-scrape.yml");
  for (const YAML::Node& job : config["scrape_configs"]) {
    if (job["job_name"].as<std::string>() == job_name) {
      YAML::Emitter out;
      out << job["relabel_configs"];
      return out.c_str();
    }
  }
  return "";
}

// What Kubernetes discovery tells Prometheus about a pod's container port.
nlohmann::json Pod(const std::string& ns, const std::string& name, const std::string& port_name,
                   const std::map<std::string, std::string>& pod_labels) {
  nlohmann::json labels = {{"__meta_kubernetes_namespace", ns},
                           {"__meta_kubernetes_pod_name", name},
                           {"__meta_kubernetes_pod_container_port_name", port_name}};
  for (const auto& [key, value] : pod_labels) {
    labels["__meta_kubernetes_pod_label_" + key] = value;
  }
  // Nothing listens there: a target's labels do not depend on its answer.
  return {{"targets", {"127.0.0.1:9"}}, {"labels", labels}};
}

// The labels of Prometheus's active targets, and how many it dropped.
void Targets(PrometheusTestServer* prometheus, std::vector<nlohmann::json>* active,
             size_t* dropped) {
  std::string body;
  Status s = prometheus->Api("targets", {}, &body);
  ASSERT_TRUE(s.ok()) << s.ToString();
  const nlohmann::json data = nlohmann::json::parse(body)["data"];
  active->clear();
  for (const nlohmann::json& t : data["activeTargets"]) active->push_back(t["labels"]);
  *dropped = data["droppedTargets"].size();
}

// The example config's relabelling, run by a real Prometheus on the pods a
// cluster would show it: a TrainingJob's master (its metrics and its gRPC
// port), a pod of something else, and the operator.
TEST(PrometheusRulesTest, ClusterRelabellingGivesPodsTheLabelsTheDashboardsSelectBy) {
  struct Case {
    std::string job_name;
    nlohmann::json pods;
    nlohmann::json expected;  // the one target kept
  };
  const std::vector<Case> cases = {
      {"gaptrain",
       {Pod("ml", "mnist-master", "metrics",
            {{"gaptrain_io_job_name", "mnist"}, {"gaptrain_io_replica_type", "master"},
             {"gaptrain_io_replica_index", "0"}, {"app", "other"}}),
        Pod("ml", "mnist-master", "grpc",
            {{"gaptrain_io_job_name", "mnist"}, {"gaptrain_io_replica_type", "master"}}),
        Pod("ml", "web-0", "metrics", {{"app", "web"}})},
       {{"namespace", "ml"},
        {"pod", "mnist-master"},
        {"gaptrain_io_job_name", "mnist"},
        {"gaptrain_io_replica_type", "master"},
        {"instance", "127.0.0.1:9"},
        {"job", "gaptrain_test"}}},
      {"gaptrain-operator",
       {Pod("gaptrain-system", "gaptrain-operator-7c9d", "metrics",
            {{"app_kubernetes_io_name", "gaptrain-operator"}}),
        Pod("ml", "mnist-master", "metrics", {{"gaptrain_io_job_name", "mnist"}})},
       {{"namespace", "gaptrain-system"},
        {"pod", "gaptrain-operator-7c9d"},
        {"instance", "127.0.0.1:9"},
        {"job", "gaptrain_test"}}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.job_name);
    const std::string pods = TempDir() + "/" + c.job_name + "-pods.json";
    std::ofstream(pods) << c.pods.dump();
    PrometheusTestServer::FileTargetsOptions options;
    options.scrape_interval_seconds = 0.5;
    options.relabel_configs = RelabelConfigs(c.job_name);
    ASSERT_FALSE(options.relabel_configs.empty());
    std::unique_ptr<PrometheusTestServer> prometheus;
    Status s = PrometheusTestServer::StartWithFileTargets(AbsolutePath(pods), options, &prometheus);
    ASSERT_TRUE(s.ok()) << s.ToString();
    // The series the rules read (GaptrainMasterDown reads up) carry the labels.
    double up = -1;
    s = prometheus->WaitForSeries("up", 30, &up);
    ASSERT_TRUE(s.ok()) << s.ToString();
    std::vector<nlohmann::json> active;
    size_t dropped = 0;
    ASSERT_NO_FATAL_FAILURE(Targets(prometheus.get(), &active, &dropped));
    ASSERT_EQ(active.size(), 1u) << nlohmann::json(active).dump();
    EXPECT_EQ(active[0], c.expected);
    EXPECT_EQ(dropped, c.pods.size() - 1);
  }
}

}  // namespace
}  // namespace gaptrain
