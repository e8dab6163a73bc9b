// Tests the operator's metrics: job counters follow only what executed
// plans wrote (a failed write counts nothing), reconcile records become the
// histogram, results and error reasons, and the names are those the docs
// and dashboards use.

#include "operator/operator_metrics.h"

#include <gtest/gtest.h>
#include <prometheus/text_serializer.h>

#include <cmath>

#include "operator/trainingjob/pod_ledger.h"
#include "services/net/metrics_text.h"

namespace gaptrain {
namespace {

using nlohmann::json;
using trainingjob::ExecutionReport;
using trainingjob::PodLedger;
using trainingjob::ReconcilePlan;

json Condition(const std::string& type, const std::string& reason) {
  return {{"type", type}, {"status", "True"}, {"reason", reason}};
}

json Job(const json& status, const PodLedger& ledger) {
  return {{"metadata",
           {{"name", "mnist"},
            {"annotations", {{trainingjob::kPodLedgerAnnotation, PodLedgerText(ledger)}}}}},
          {"status", status}};
}

ExecutionReport Written(bool ledger, bool status) {
  ExecutionReport report;
  report.ledger_written = ledger;
  report.status_written = status;
  return report;
}

double Sample(const std::string& text, const std::string& series) {
  return MetricValue(ParseMetricsText(text), series, std::nan(""));
}

TEST(JobTransitionsTest, ACreatedJobAndItsEnd) {
  ReconcilePlan plan;
  plan.status = json{{"phase", "Pending"}, {"conditions", {Condition("Created", "TrainingJobCreated")}}};
  JobTransitions t = TransitionsOf(Job(json::object(), {}), plan, Written(false, true));
  EXPECT_TRUE(t.created);
  EXPECT_FALSE(t.succeeded);
  // Not written: nothing happened.
  EXPECT_FALSE(TransitionsOf(Job(json::object(), {}), plan, Written(false, false)).created);

  const json running = {{"phase", "Running"},
                        {"conditions", {Condition("Created", "TrainingJobCreated")}}};
  plan.status = json{{"phase", "Succeeded"},
                     {"conditions",
                      {Condition("Created", "TrainingJobCreated"),
                       Condition("Succeeded", "TrainingJobSucceeded")}}};
  t = TransitionsOf(Job(running, {}), plan, Written(false, true));
  EXPECT_FALSE(t.created);
  EXPECT_TRUE(t.succeeded);
  // Already Succeeded: a later status write (cleanup) is not another success.
  EXPECT_FALSE(TransitionsOf(Job(*plan.status, {}), plan, Written(false, true)).succeeded);

  plan.status = json{{"phase", "Failed"},
                     {"conditions",
                      {Condition("Created", "TrainingJobCreated"),
                       Condition("Failed", "BackoffLimitExceeded")}}};
  EXPECT_EQ(TransitionsOf(Job(running, {}), plan, Written(false, true)).failed_reason,
            "BackoffLimitExceeded");
}

TEST(JobTransitionsTest, CountsAreTheLedgersGrowthOnceWritten) {
  PodLedger before;
  before.preemptions = 2;
  before.failures = 1;
  ReconcilePlan plan;
  plan.ledger = before;
  plan.ledger->preemptions = 4;
  plan.ledger->restarts = 1;
  JobTransitions t = TransitionsOf(Job(json::object(), before), plan, Written(true, false));
  EXPECT_EQ(t.preemptions, 2u);
  EXPECT_EQ(t.failures, 0u);
  EXPECT_EQ(t.restarts, 1u);
  t = TransitionsOf(Job(json::object(), before), plan, Written(false, false));
  EXPECT_EQ(t.preemptions, 0u);
}

TEST(OperatorMetricsTest, ExportsTheIssuesNames) {
  OperatorMetrics metrics(std::make_shared<prometheus::Registry>());
  JobTransitions t;
  t.created = true;
  t.preemptions = 2;
  t.restarts = 1;
  t.failures = 1;
  metrics.RecordTransitions(t);
  JobTransitions end;
  end.succeeded = true;
  metrics.RecordTransitions(end);
  JobTransitions failed;
  failed.failed_reason = "DeadlineExceeded";
  metrics.RecordTransitions(failed);

  controller::ReconcileRecord ok;
  ok.duration = std::chrono::milliseconds(30);
  ok.requeue_after = std::chrono::seconds(15);
  metrics.OnReconciled("trainingjob", ok);
  controller::ReconcileRecord conflict;
  conflict.status = Status(Status::Code::kAborted, "409");
  conflict.reason = "Conflict";
  conflict.duration = std::chrono::milliseconds(3);
  metrics.OnReconciled("trainingjob", conflict);
  metrics.SetQueueDepth(3);
  metrics.SetLeader(true);

  const std::string text =
      prometheus::TextSerializer().Serialize(metrics.registry()->Collect());
  EXPECT_EQ(Sample(text, "gaptrain_operator_jobs_created_total"), 1);
  EXPECT_EQ(Sample(text, "gaptrain_operator_jobs_succeeded_total"), 1);
  EXPECT_EQ(Sample(text, R"(gaptrain_operator_jobs_failed_total{reason="DeadlineExceeded"})"), 1);
  EXPECT_EQ(Sample(text, "gaptrain_operator_jobs_restarted_total"), 1);
  EXPECT_EQ(Sample(text, "gaptrain_operator_preemptions_total"), 2);
  EXPECT_EQ(Sample(text, "gaptrain_operator_worker_failures_total"), 1);
  EXPECT_EQ(Sample(text, "gaptrain_operator_reconcile_duration_seconds_count"), 2);
  EXPECT_NEAR(Sample(text, "gaptrain_operator_reconcile_duration_seconds_sum"), 0.033, 1e-9);
  EXPECT_EQ(Sample(text, R"(gaptrain_operator_reconcile_duration_seconds_bucket{le="0.005"})"), 1);
  EXPECT_EQ(Sample(text, R"(gaptrain_operator_reconciles_total{result="requeue"})"), 1);
  EXPECT_EQ(Sample(text, R"(gaptrain_operator_reconciles_total{result="error"})"), 1);
  EXPECT_EQ(Sample(text, R"(gaptrain_operator_reconcile_errors_total{reason="Conflict"})"), 1);
  EXPECT_EQ(Sample(text, "gaptrain_operator_work_queue_depth"), 3);
  EXPECT_EQ(Sample(text, "gaptrain_operator_is_leader"), 1);
}

TEST(OperatorMetricsTest, DashboardSeriesExistAtZeroAndJobsCountByPhase) {
  OperatorMetrics metrics(std::make_shared<prometheus::Registry>());
  auto text = [&] { return prometheus::TextSerializer().Serialize(metrics.registry()->Collect()); };
  EXPECT_EQ(Sample(text(), R"(gaptrain_operator_jobs_failed_total{reason="BackoffLimitExceeded"})"), 0);
  EXPECT_EQ(Sample(text(), R"(gaptrain_operator_reconcile_errors_total{reason="Unavailable"})"), 0);
  EXPECT_EQ(Sample(text(), R"(gaptrain_operator_reconciles_total{result="success"})"), 0);
  EXPECT_EQ(Sample(text(), R"(gaptrain_operator_jobs{phase="Running"})"), 0);

  metrics.SetJobPhases({"Running", "Running", "", "Succeeded"});
  EXPECT_EQ(Sample(text(), R"(gaptrain_operator_jobs{phase="Running"})"), 2);
  EXPECT_EQ(Sample(text(), R"(gaptrain_operator_jobs{phase="Pending"})"), 1);
  EXPECT_EQ(Sample(text(), R"(gaptrain_operator_jobs{phase="Succeeded"})"), 1);
  EXPECT_EQ(Sample(text(), R"(gaptrain_operator_jobs{phase="Failed"})"), 0);
  // A job that finished leaves Running.
  metrics.SetJobPhases({"Succeeded"});
  EXPECT_EQ(Sample(text(), R"(gaptrain_operator_jobs{phase="Running"})"), 0);
  EXPECT_EQ(Sample(text(), R"(gaptrain_operator_jobs{phase="Succeeded"})"), 1);
}

}  // namespace
}  // namespace gaptrain
