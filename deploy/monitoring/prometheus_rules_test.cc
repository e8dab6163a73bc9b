// The Prometheus side of deploy/monitoring, with Debian's real promtool and
// prometheus: every rule file passes `promtool check rules`, every unit
// test file `promtool test rules`; every alert has a unit test where it
// fires and one where it stays silent, a summary, a description that shows
// the query's value, and a runbook section in docs/monitoring.md; the
// example scrape configuration passes `promtool check config`, and its
// relabelling gives a TrainingJob's pods the labels the dashboards and
// rules select by.

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

#include "services/common/os_error.h"
#include "services/common/process.h"
#include "services/testing/prometheus_test_server.h"
#include "services/testing/test_files.h"

namespace gaptrain {
namespace {

const char* const kRuleFiles[] = {"gaptrain-job.rules.yml", "gaptrain-operator.rules.yml"};
const char kDir[] = "deploy/monitoring/";

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
      // GitHub's anchor of a "### Name" heading is the name in lower case.
      std::string anchor = name;
      std::transform(anchor.begin(), anchor.end(), anchor.begin(),
                     [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
      EXPECT_EQ(annotations["runbook_url"].as<std::string>(""), "docs/monitoring.md#" + anchor)
          << name;
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
