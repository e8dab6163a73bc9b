#include "deploy/monitoring/grafana_dashboard.h"

#include <gtest/gtest.h>

#include <functional>
#include <nlohmann/json.hpp>

#include "services/testing/test_files.h"

namespace gaptrain {
namespace {

using nlohmann::json;

// ---- the shipped dashboards ----

GrafanaDashboard LoadShipped(const std::string& file) {
  GrafanaDashboard d;
  const std::string text = ReadRaw("deploy/monitoring/" + file);
  EXPECT_FALSE(text.empty()) << file << " is not in the test's runfiles";
  Status s = GrafanaDashboard::Parse(text, &d);
  EXPECT_TRUE(s.ok()) << file << ": " << s.ToString();
  return d;
}

// Every query of every panel, joined, to look for what the panels show.
std::string AllQueries(const GrafanaDashboard& d) {
  std::string all;
  for (const DashboardPanel& p : d.panels()) {
    for (const DashboardTarget& t : p.targets) all += t.expr + "\n";
  }
  return all;
}

TEST(ShippedDashboardsTest, TheJobDashboardImportsAndSelectsOneJob) {
  const GrafanaDashboard d = LoadShipped("gaptrain-job.dashboard.json");
  EXPECT_EQ(d.uid(), "gaptrain-job");
  EXPECT_GE(d.schema_version(), kMinSchemaVersion);
  std::vector<std::string> names;
  for (const DashboardVariable& v : d.variables()) names.push_back(v.name);
  EXPECT_EQ(names, (std::vector<std::string>{"datasource", "namespace", "job"}));
  size_t queries = 0;
  for (const DashboardPanel& p : d.panels()) {
    for (const DashboardTarget& t : p.targets) {
      ++queries;
      // The labels a cluster's pods and gaptrain run's targets both carry.
      EXPECT_NE(t.expr.find("namespace=\"$namespace\""), std::string::npos)
          << p.title << ": " << t.expr;
      EXPECT_NE(t.expr.find("gaptrain_io_job_name=\"$job\""), std::string::npos)
          << p.title << ": " << t.expr;
    }
  }
  EXPECT_GE(queries, 30u);
}

// What issue 18 asks the job dashboard to show, by the metric that shows it.
TEST(ShippedDashboardsTest, TheJobDashboardShowsEverythingTheIssueAsksFor) {
  const std::string all = AllQueries(LoadShipped("gaptrain-job.dashboard.json"));
  for (const char* shown : {
           "gaptrain_job:gaptrain_master_gap:mean2m",        // Gap mean
           "gaptrain_master_gap_bucket",                     // Gap p90
           "gaptrain_master_tensor_gap",                     // per tensor
           "gaptrain_master_staleness_bucket",               // staleness heatmap
           "gaptrain_master_worker_staleness",               // per worker
           "gaptrain_job:gaptrain_master_penalty_factor:mean2m",
           "gaptrain_master_pushes_total{namespace=\"$namespace\", "
           "gaptrain_io_job_name=\"$job\", outcome=\"applied\"}",  // update rate
           "sum by (outcome, pod) (rate(gaptrain_master_pushes_total",  // pushes by outcome, per shard
           "gaptrain_master_pushes_rejected_total",          // by reason
           "gaptrain_master_learning_rate",
           "gaptrain_master_model_version",
           "gaptrain_worker_eval_accuracy",
           "gaptrain_worker_eval_loss",
           "gaptrain_coordinator_eval_metric",               // the user's metrics
           "gaptrain_coordinator_eval_target",               // and the target
           "gaptrain_coordinator_live_trainers",             // live against desired
           "gaptrain_coordinator_desired_trainers",
           "gaptrain_coordinator_leaves_total",              // preemptions, failures
           "gaptrain_coordinator_lease_expiries_total",
           "gaptrain_coordinator_tasks",                     // queued, in flight
           "gaptrain_coordinator_tasks_reassigned_total",
           "gaptrain_coordinator_samples_lost_total",        // trained again
           "gaptrain_master_last_checkpoint_timestamp_seconds",
           "gaptrain_master_checkpoint_duration_seconds",
           "gaptrain_master_push_duration_seconds",
           "gaptrain_master_pull_duration_seconds",
           "gaptrain_master_received_bytes_total",
           "gaptrain_master_sent_bytes_total",
       }) {
    EXPECT_NE(all.find(shown), std::string::npos) << "no panel shows " << shown;
  }
}

TEST(ShippedDashboardsTest, TheOperatorDashboardImportsAndShowsTheOperatorsMetrics) {
  const GrafanaDashboard d = LoadShipped("gaptrain-operator.dashboard.json");
  EXPECT_EQ(d.uid(), "gaptrain-operator");
  const std::string all = AllQueries(d);
  for (const char* shown : {"gaptrain_operator_jobs{", "gaptrain_operator_reconcile_duration_seconds",
                            "gaptrain_operator_reconcile_errors_total",
                            "gaptrain_operator_work_queue_depth", "gaptrain_operator_is_leader",
                            "gaptrain_operator_preemptions", "gaptrain_operator_jobs_created_total",
                            "gaptrain_operator_jobs_failed_total"}) {
    EXPECT_NE(all.find(shown), std::string::npos) << "no panel shows " << shown;
  }
  for (const DashboardPanel& p : d.panels()) {
    for (const DashboardTarget& t : p.targets) {
      EXPECT_NE(t.expr.find("namespace=\"$namespace\""), std::string::npos)
          << p.title << ": " << t.expr;
    }
  }
}

// ---- what Parse() refuses ----

json ValidDashboard() {
  const json ds = {{"type", "prometheus"}, {"uid", "${datasource}"}};
  return {
      {"uid", "test-board"},
      {"title", "Test"},
      {"id", nullptr},
      {"schemaVersion", 42},
      {"refresh", "30s"},
      {"time", {{"from", "now-1h"}, {"to", "now"}}},
      {"templating",
       {{"list",
         {{{"name", "datasource"}, {"type", "datasource"}, {"query", "prometheus"}},
          {{"name", "job"},
           {"type", "query"},
           {"datasource", ds},
           {"query", {{"query", "label_values(up, job)"}, {"refId", "V"}}}}}}}},
      {"panels",
       {{{"id", 1}, {"type", "row"}, {"title", "Row"},
         {"gridPos", {{"x", 0}, {"y", 0}, {"w", 24}, {"h", 1}}}, {"panels", json::array()}},
        {{"id", 2},
         {"type", "timeseries"},
         {"title", "Up"},
         {"description", "Healthy: 1."},
         {"datasource", ds},
         {"gridPos", {{"x", 0}, {"y", 1}, {"w", 12}, {"h", 8}}},
         {"targets",
          {{{"refId", "A"}, {"expr", "up{job=\"$job\"}"}, {"datasource", ds},
            {"legendFormat", "{{instance}}"}}}}}}}};
}

// Parses `d` after `change`; the error must contain `expected`.
void ExpectRejected(const std::function<void(json*)>& change, const std::string& expected) {
  json d = ValidDashboard();
  change(&d);
  GrafanaDashboard parsed;
  Status s = GrafanaDashboard::Parse(d.dump(), &parsed);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << expected;
  EXPECT_NE(s.message().find(expected), std::string::npos) << s.ToString();
}

TEST(GrafanaDashboardTest, AValidDashboardParses) {
  GrafanaDashboard d;
  Status s = GrafanaDashboard::Parse(ValidDashboard().dump(), &d);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_EQ(d.panels().size(), 2u);
  EXPECT_EQ(d.panels()[1].title, "Up");
  ASSERT_EQ(d.panels()[1].targets.size(), 1u);
  EXPECT_EQ(d.panels()[1].targets[0].expr, "up{job=\"$job\"}");
  EXPECT_EQ(d.panels()[1].targets[0].legend_format, "{{instance}}");
  EXPECT_FALSE(d.panels()[1].targets[0].instant);
  ASSERT_EQ(d.variables().size(), 2u);
  EXPECT_EQ(d.variables()[1].query, "label_values(up, job)");
}

TEST(GrafanaDashboardTest, TheDashboardsOwnFieldsAreChecked) {
  ExpectRejected([](json* d) { *d = json::array(); }, "not a JSON object");
  ExpectRejected([](json* d) { d->erase("uid"); }, "uid: missing");
  ExpectRejected([](json* d) { (*d)["uid"] = std::string(41, 'a'); }, "uid:");
  ExpectRejected([](json* d) { (*d)["uid"] = "a b"; }, "uid:");
  ExpectRejected([](json* d) { d->erase("title"); }, "title: missing");
  ExpectRejected([](json* d) { (*d)["id"] = 7; }, "id: must be null");
  ExpectRejected([](json* d) { (*d)["schemaVersion"] = 16; }, "schemaVersion");
  ExpectRejected([](json* d) { (*d)["refresh"] = false; }, "refresh");
  ExpectRejected([](json* d) { (*d)["timepicker"] = {{"time_options", {"5m"}}}; },
                 "timepicker.time_options");
  ExpectRejected([](json* d) { (*d)["time"].erase("to"); }, "time:");
  ExpectRejected([](json* d) { (*d)["panels"] = json::array(); }, "panels: missing or empty");
}

TEST(GrafanaDashboardTest, VariablesAreChecked) {
  ExpectRejected([](json* d) { (*d)["templating"]["list"].erase(0); },
                 "variable \"datasource\" of type datasource");
  ExpectRejected([](json* d) { (*d)["templating"]["list"][0]["query"] = "loki"; },
                 "templating.list[0].query");
  ExpectRejected([](json* d) { (*d)["templating"]["list"][1]["datasource"] = "Prometheus"; },
                 "templating.list[1].datasource");
  ExpectRejected([](json* d) { (*d)["templating"]["list"][1].erase("query"); },
                 "templating.list[1].query");
  ExpectRejected([](json* d) { (*d)["templating"]["list"][1]["name"] = "datasource"; },
                 "defined twice");
}

TEST(GrafanaDashboardTest, PanelsAreChecked) {
  const std::string panel = "panels[1] (id 2, \"Up\")";
  ExpectRejected([](json* d) { (*d)["panels"][1]["id"] = 1; }, "id 1 is used twice");
  ExpectRejected([](json* d) { (*d)["panels"][1]["id"] = "2"; }, ".id: missing");
  ExpectRejected([](json* d) { (*d)["panels"][1]["type"] = "graph-ng"; }, panel + ".type");
  ExpectRejected([](json* d) { (*d)["panels"][1].erase("title"); }, ".title: missing");
  ExpectRejected([](json* d) { (*d)["panels"][1].erase("gridPos"); }, panel + ".gridPos");
  ExpectRejected([](json* d) { (*d)["panels"][1]["gridPos"]["x"] = 16; }, "24 columns");
  ExpectRejected([](json* d) { (*d)["panels"][1]["gridPos"]["y"] = 0; }, "overlaps");
  ExpectRejected([](json* d) { (*d)["panels"][0]["gridPos"]["w"] = 12; }, "a row spans");
  ExpectRejected([](json* d) { (*d)["panels"][1]["description"] = "Up or down."; },
                 panel + ".description: must say what a healthy value");
  ExpectRejected([](json* d) { (*d)["panels"][1]["datasource"] = {{"uid", "prom-1"}}; },
                 panel + ".datasource");
  ExpectRejected([](json* d) { (*d)["panels"][1]["targets"] = json::array(); },
                 panel + ".targets: a panel needs at least one query");
  ExpectRejected(
      [](json* d) { (*d)["panels"][1]["targets"].push_back((*d)["panels"][1]["targets"][0]); },
      "\"A\" is used twice");
  ExpectRejected([](json* d) { (*d)["panels"][1]["targets"][0]["expr"] = ""; },
                 panel + ".targets[0].expr: missing or empty");
  ExpectRejected([](json* d) { (*d)["panels"][1]["targets"][0]["expr"] = "up{pod=\"$pod\"}"; },
                 "$pod is neither a templating variable nor a Grafana macro");
  ExpectRejected(
      [](json* d) { (*d)["panels"][1]["targets"][0]["datasource"] = {{"uid", "other"}}; },
      panel + ".targets[0].datasource");
  // A collapsed row's panels are checked as well.
  ExpectRejected(
      [](json* d) {
        json nested = (*d)["panels"][1];
        nested["id"] = 3;
        nested.erase("description");
        (*d)["panels"][0]["panels"].push_back(nested);
      },
      "panels[0] (id 1, \"Row\").panels[0] (id 3, \"Up\").description");
}

// ---- queries as Grafana sends them ----

TEST(ExpandQueryTest, MacrosAndVariablesAreExpandedAsGrafanaDoes) {
  QueryInterval interval;
  interval.step_seconds = 2;
  interval.scrape_interval_seconds = 1;
  interval.range_seconds = 90.4;
  std::string q;
  Status s = ExpandQuery(
      "rate(x{job=\"$job\", ns=\"${namespace}\"}[$__rate_interval]) + $__interval_ms + "
      "rate(y[$__interval]) + $__range_s + z[$__range] + label_replace(a, \"b\", \"$1\", \"c\", "
      "\"(.*)\")",
      {{"job", "mnist"}, {"namespace", "local"}}, interval, &q);
  ASSERT_TRUE(s.ok()) << s.ToString();
  // $__rate_interval = max(step + scrape, 4 x scrape) = max(3 s, 4 s).
  EXPECT_EQ(q,
            "rate(x{job=\"mnist\", ns=\"local\"}[4s]) + 2000 + rate(y[2s]) + 90 + z[90s] + "
            "label_replace(a, \"b\", \"$1\", \"c\", \"(.*)\")");
  interval.step_seconds = 30;
  interval.scrape_interval_seconds = 15;
  ASSERT_TRUE(ExpandQuery("[$__rate_interval]", {}, interval, &q).ok());
  EXPECT_EQ(q, "[60s]");
  interval.step_seconds = 45;
  ASSERT_TRUE(ExpandQuery("[$__rate_interval]", {}, interval, &q).ok());
  EXPECT_EQ(q, "[60s]");
  interval.step_seconds = 50;
  ASSERT_TRUE(ExpandQuery("[$__rate_interval]", {}, interval, &q).ok());
  EXPECT_EQ(q, "[65s]");
}

TEST(ExpandQueryTest, UnknownVariablesAndFormatsAreErrors) {
  std::string q;
  EXPECT_EQ(ExpandQuery("up{pod=\"$pod\"}", {{"job", "x"}}, QueryInterval(), &q).code(),
            Status::Code::kInvalidArgument);
  EXPECT_EQ(ExpandQuery("up{job=~\"${job:regex}\"}", {{"job", "x"}}, QueryInterval(), &q).code(),
            Status::Code::kInvalidArgument);
  EXPECT_EQ(ExpandQuery("up{job=\"${job\"}", {{"job", "x"}}, QueryInterval(), &q).code(),
            Status::Code::kInvalidArgument);
  // "$" not followed by a name is text.
  ASSERT_TRUE(ExpandQuery("a $ b $", {}, QueryInterval(), &q).ok());
  EXPECT_EQ(q, "a $ b $");
}

TEST(PrometheusDurationTest, WholeSecondsOrMilliseconds) {
  EXPECT_EQ(PrometheusDuration(15), "15s");
  EXPECT_EQ(PrometheusDuration(90), "90s");
  EXPECT_EQ(PrometheusDuration(0.5), "500ms");
  EXPECT_EQ(PrometheusDuration(1.25), "1250ms");
  EXPECT_EQ(PrometheusDuration(0), "1ms");
}

TEST(ParseLabelValuesQueryTest, SelectorAndLabel) {
  std::string selector, label;
  ASSERT_TRUE(ParseLabelValuesQuery(
                  "label_values(gaptrain_coordinator_phase{namespace=\"$namespace\"}, "
                  "gaptrain_io_job_name)",
                  &selector, &label)
                  .ok());
  EXPECT_EQ(selector, "gaptrain_coordinator_phase{namespace=\"$namespace\"}");
  EXPECT_EQ(label, "gaptrain_io_job_name");
  ASSERT_TRUE(ParseLabelValuesQuery("label_values(namespace)", &selector, &label).ok());
  EXPECT_EQ(selector, "");
  EXPECT_EQ(label, "namespace");
  for (const char* bad : {"query_result(up)", "label_values(up, )", "label_values(, job)",
                          "label_values(up, job", "label_values(up, a-b)"}) {
    EXPECT_EQ(ParseLabelValuesQuery(bad, &selector, &label).code(),
              Status::Code::kInvalidArgument)
        << bad;
  }
}

TEST(FormatLegendTest, LabelsAreSubstituted) {
  const std::map<std::string, std::string> labels = {
      {"__name__", "up"}, {"pod", "trainer-0"}, {"worker", "3"}};
  EXPECT_EQ(FormatLegend("worker {{worker}} on {{ pod }}", labels), "worker 3 on trainer-0");
  EXPECT_EQ(FormatLegend("{{missing}}x", labels), "x");
  EXPECT_EQ(FormatLegend("", labels), "{pod=\"trainer-0\", worker=\"3\"}");
  EXPECT_EQ(FormatLegend("mean", labels), "mean");
}

}  // namespace
}  // namespace gaptrain
