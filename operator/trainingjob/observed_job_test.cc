// The coordinator's /status as the coordinator writes it, the master's
// /metrics, progress between two readings, and parsing the job object.

#include "operator/trainingjob/observed_job.h"

#include <gtest/gtest.h>

#include "operator/testing/coordinator_status_examples.h"

namespace gaptrain {
namespace trainingjob {
namespace {

using nlohmann::json;
using std::chrono::seconds;

namespace examples = coordinator_status_examples;

// The documents are the coordinator's own (JobStatusToJson); their values
// are listed in services/coordinator/status_examples.cc.
TEST(ObservedJobTest, ParsesTheCoordinatorStatus) {
  CoordinatorStatus s;
  ASSERT_TRUE(ParseCoordinatorStatus(examples::kRunning, &s).ok());
  EXPECT_EQ(s.phase, "Running");
  EXPECT_EQ(s.reason, "EnoughWorkers");
  EXPECT_EQ(s.message, "4 trainers");
  EXPECT_EQ(s.epoch, 2u);
  EXPECT_EQ(s.samples_done_in_epoch, 15000u);
  EXPECT_EQ(s.samples_in_epoch, 60000u);
  EXPECT_DOUBLE_EQ(s.EpochsDone(), 2.25);
  EXPECT_EQ(s.master_version, 4210u);
  EXPECT_EQ(s.live_trainers, 4u);
  EXPECT_EQ(s.test_accuracy, 0.97);
  EXPECT_EQ(s.test_loss, 0.1);
  EXPECT_EQ(s.evaluation_version, 4000u);
  EXPECT_EQ(s.test_metrics, (std::map<std::string, double>{{"top5_accuracy", 0.995}}));
  EXPECT_FALSE(s.finished());
  EXPECT_FALSE(s.finished_at.has_value());  // still running

  ASSERT_TRUE(ParseCoordinatorStatus(examples::kSucceeded, &s).ok());
  EXPECT_EQ(s.phase, "Succeeded");
  EXPECT_EQ(s.reason, "EpochsCompleted");
  EXPECT_EQ(s.message, "completed 1 epochs");
  EXPECT_TRUE(s.finished());
  ASSERT_TRUE(s.finished_at.has_value());  // the Succeeded condition's time
  EXPECT_EQ(std::chrono::system_clock::to_time_t(*s.finished_at), 1795414800);
  EXPECT_DOUBLE_EQ(s.EpochsDone(), 1);
  EXPECT_EQ(s.master_version, 938u);
  EXPECT_EQ(s.live_trainers, 0u);
  EXPECT_EQ(s.test_accuracy, 0.9871);
  EXPECT_EQ(s.test_loss, 0.04);
  EXPECT_EQ(s.evaluation_version, 938u);
  EXPECT_TRUE(s.test_metrics.empty());

  // No evaluation yet: accuracy and loss are null.
  ASSERT_TRUE(ParseCoordinatorStatus(examples::kPending, &s).ok());
  EXPECT_EQ(s.phase, "Pending");
  EXPECT_EQ(s.reason, "Created");
  EXPECT_FALSE(s.test_accuracy.has_value());
  EXPECT_FALSE(s.test_loss.has_value());
  EXPECT_EQ(s.master_version, 0u);
  EXPECT_FALSE(s.finished());
}

// A trainer's store away: the coordinator's dataUnavailable, absent when
// the data is available.
TEST(ObservedJobTest, ParsesWhyTheDataIsUnavailable) {
  CoordinatorStatus s;
  ASSERT_TRUE(ParseCoordinatorStatus(examples::kDataUnavailable, &s).ok());
  EXPECT_EQ(s.phase, "Running");
  ASSERT_TRUE(s.data_unavailable.has_value());
  EXPECT_EQ(s.data_unavailable->since, "2026-11-23T06:05:00Z");
  EXPECT_EQ(s.data_unavailable->message,
            "ConnectionRefusedError: [Errno 111] store:9000 refused the connection");
  EXPECT_EQ(s.data_unavailable->worker, 2u);
  EXPECT_EQ(s.data_unavailable->host, "mnist-trainer-0");
  EXPECT_EQ(s.data_unavailable->releases, 2u);
  ASSERT_TRUE(ParseCoordinatorStatus(examples::kRunning, &s).ok());
  EXPECT_FALSE(s.data_unavailable.has_value());
  ASSERT_TRUE(ParseCoordinatorStatus(R"({"phase": "Running", "dataUnavailable": null})", &s).ok());
  EXPECT_FALSE(s.data_unavailable.has_value());
  EXPECT_EQ(ParseCoordinatorStatus(R"({"phase": "Running", "dataUnavailable": "yes"})", &s).code(),
            Status::Code::kDataLoss);
}

// Hand-written on purpose: what the coordinator never writes.
TEST(ObservedJobTest, RefusesWhatIsNotACoordinatorStatus) {
  CoordinatorStatus s;
  EXPECT_EQ(ParseCoordinatorStatus("<html>", &s).code(), Status::Code::kDataLoss);
  EXPECT_EQ(ParseCoordinatorStatus("[]", &s).code(), Status::Code::kDataLoss);
  const Status phase = ParseCoordinatorStatus(R"({"phase": "Sleeping"})", &s);
  EXPECT_NE(phase.message().find("phase: must be Pending, Running, Succeeded or Failed, got "
                                 "'Sleeping'"),
            std::string::npos);
  // Odd numbers read as zero rather than throwing.
  ASSERT_TRUE(ParseCoordinatorStatus(R"({"phase": "Running", "epoch": -4, "masterVersion": "x",
                                         "samples": {"inEpoch": 0}})",
                                     &s)
                  .ok());
  EXPECT_EQ(s.epoch, 0u);
  EXPECT_EQ(s.master_version, 0u);
  EXPECT_DOUBLE_EQ(s.EpochsDone(), 0);
  const Status metric = ParseCoordinatorStatus(
      R"({"phase": "Running", "evaluation": {"metrics": {"Top-5": 0.9}}})", &s);
  EXPECT_EQ(metric.message(), "coordinator /status: evaluation.metrics.Top-5: must be a metric "
                              "name with a finite number");
  EXPECT_FALSE(ParseCoordinatorStatus(
                   R"({"phase": "Running", "evaluation": {"metrics": {"f1": "high"}}})", &s)
                   .ok());
}

std::string Metrics(double version, double gap_sum, double gap_count, double st_sum,
                    double st_count) {
  auto line = [](const char* name, double v) {
    return std::string(name) + " " + std::to_string(v) + "\n";
  };
  return "# TYPE gaptrain_master_model_version gauge\n" +
         line("gaptrain_master_model_version", version) +
         "gaptrain_master_gap_bucket{le=\"1\"} 0\n" + line("gaptrain_master_gap_sum", gap_sum) +
         line("gaptrain_master_gap_count", gap_count) +
         line("gaptrain_master_staleness_sum", st_sum) +
         line("gaptrain_master_staleness_count", st_count);
}

TEST(ObservedJobTest, MasterProgressBetweenReadings) {
  const auto t0 = std::chrono::system_clock::from_time_t(1795413600);
  MasterScrape first, second, restarted;
  ASSERT_TRUE(ParseMasterMetrics(Metrics(1000, 1500, 1000, 3000, 1000), t0, &first).ok());
  ASSERT_TRUE(
      ParseMasterMetrics(Metrics(1600, 2700, 1600, 4200, 1600), t0 + seconds(10), &second).ok());

  const MasterProgress alone = ProgressBetween(nullptr, first);
  EXPECT_EQ(alone.model_version, 1000u);
  EXPECT_DOUBLE_EQ(*alone.mean_gap, 1.5);
  EXPECT_DOUBLE_EQ(*alone.mean_staleness, 3);
  EXPECT_FALSE(alone.updates_per_second.has_value());

  const MasterProgress recent = ProgressBetween(&first, second);
  EXPECT_EQ(recent.model_version, 1600u);
  EXPECT_DOUBLE_EQ(*recent.mean_gap, 2.0);        // 1200 / 600
  EXPECT_DOUBLE_EQ(*recent.mean_staleness, 2.0);  // 1200 / 600
  EXPECT_DOUBLE_EQ(*recent.updates_per_second, 60);

  // The master restarted: its totals went down; means since it started.
  ASSERT_TRUE(ParseMasterMetrics(Metrics(1700, 20, 10, 30, 10), t0 + seconds(20), &restarted).ok());
  const MasterProgress after = ProgressBetween(&second, restarted);
  EXPECT_DOUBLE_EQ(*after.mean_gap, 2.0);
  EXPECT_FALSE(after.updates_per_second.has_value());

  // No push between readings: the running means.
  const MasterProgress idle = ProgressBetween(&second, [&] {
    MasterScrape s = second;
    s.at += seconds(5);
    return s;
  }());
  EXPECT_DOUBLE_EQ(*idle.mean_gap, 2700.0 / 1600);
  EXPECT_DOUBLE_EQ(*idle.updates_per_second, 0);
}

TEST(ObservedJobTest, RefusesWhatIsNotTheMastersMetrics) {
  MasterScrape s;
  const auto now = std::chrono::system_clock::now();
  EXPECT_EQ(ParseMasterMetrics("gaptrain_coordinator_epoch 3\n", now, &s).code(),
            Status::Code::kDataLoss);
  EXPECT_EQ(ParseMasterMetrics(Metrics(5, -1, 1, 0, 0), now, &s).code(), Status::Code::kDataLoss);
  EXPECT_FALSE(ProgressBetween(nullptr, MasterScrape{}).mean_gap.has_value());
}

TEST(ObservedJobTest, ObserveJobParsesTheObject) {
  const json job = json::parse(R"({
    "apiVersion": "gaptrain.io/v1alpha1", "kind": "TrainingJob",
    "metadata": {"name": "mnist", "namespace": "team-a", "uid": "u", "resourceVersion": "9",
                 "annotations": {"x": "y"}},
    "spec": {"data": {"path": "/data"}, "training": {"epochs": 2},
             "workers": {"replicas": 3, "template": {"spec": {"nodeSelector": {"spot": "true"}}}}},
    "status": {"phase": "Running"}})");
  const ObservedJob o = ObserveJob(job);
  ASSERT_TRUE(o.parse_status.ok()) << o.parse_status.ToString();
  EXPECT_EQ(o.spec.name, "mnist");
  EXPECT_EQ(o.spec.namespace_name, "team-a");
  EXPECT_EQ(o.spec.workers.replicas, 3u);

  json bad = job;
  bad["spec"]["workers"]["minReplicas"] = 5;
  const ObservedJob invalid = ObserveJob(bad);
  EXPECT_EQ(invalid.parse_status.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(invalid.parse_status.message().find(
                "trainingjob team-a/mnist: spec.workers.minReplicas: must be <= replicas (3)"),
            std::string::npos)
      << invalid.parse_status.message();
  EXPECT_FALSE(ObserveJob(json::array()).parse_status.ok());
}

}  // namespace
}  // namespace trainingjob
}  // namespace gaptrain
