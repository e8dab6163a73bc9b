// JobStatus against the CRD's status schema: a status with every field set
// validates, and writes every property the schema has at the top level and
// in progress and workers (a field the reconcile could not set is a field
// the schema promises for nothing); reading gives back what was written,
// and a hand-edited status reads without failing.

#include "operator/trainingjob/job_status.h"

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <set>
#include <string>
#include <vector>

#include "operator/crd/schema_check.h"
#include "operator/crd/trainingjob_crd.h"

namespace gaptrain {
namespace trainingjob {
namespace {

using nlohmann::json;

YAML::Node StatusSchema() {
  return YAML::Load(TrainingJobCrdYaml())["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
                                         ["properties"]["status"];
}

std::set<std::string> SchemaKeys(const YAML::Node& schema) {
  std::set<std::string> keys;
  for (const auto& p : schema["properties"]) keys.insert(p.first.as<std::string>());
  return keys;
}

std::set<std::string> Keys(const json& object) {
  std::set<std::string> keys;
  for (const auto& [key, value] : object.items()) keys.insert(key);
  return keys;
}

JobStatus Full() {
  JobStatus s;
  s.phase = "Running";
  s.conditions = json::parse(
      R"j([{"type": "Running", "status": "True", "reason": "TrainingJobRunning",
            "message": "TrainingJob mnist is running",
            "lastUpdateTime": "2026-11-28T10:00:00Z",
            "lastTransitionTime": "2026-11-28T10:00:00Z"}])j");
  s.observed_generation = 3;
  s.start_time = "2026-11-28T10:00:00Z";
  s.completion_time = "2026-11-28T11:00:00Z";
  s.replica_statuses["Trainer"] = {4, 3, 0, 1};
  s.replica_statuses["Master"] = {1, 1, 0, 0};
  s.workers = WorkersStatus{4, 3, 4, "gaptrain.io/job-name=mnist", "3/4"};
  s.preemptions = 2;
  s.failures = 1;
  s.restarts = 1;
  s.progress.epoch = 1.5;
  s.progress.model_version = 700;
  s.progress.test_accuracy = 0.97;
  s.progress.test_loss = 0.1;
  s.progress.test_metrics = {{"top5_accuracy", 0.99}};
  s.progress.mean_gap = 1.2;
  s.progress.mean_staleness = 3.5;
  s.progress.updates_per_second = 240;
  s.display = {{"epoch", "1.5/2"}, {"accuracy", "97.00%"}};
  s.output = {{"claimName", "models"}, {"path", "mnist.pt"}, {"phase", "Pending"}};
  s.autoscale = {{"grownFrom", 2}};
  s.gang = {{"releases", 1}};
  s.image = "ghcr.io/gaptrain/gaptrain:0.1.0";
  s.tls = true;
  return s;
}

TEST(JobStatusTest, AFullStatusFitsTheSchemaAndWritesEveryPropertyItHas) {
  const YAML::Node schema = StatusSchema();
  const json written = Full().ToJson();
  EXPECT_EQ(CheckAgainstSchema(schema, YAML::Load(written.dump()), "status"),
            std::vector<std::string>{})
      << written.dump(2);
  EXPECT_EQ(Keys(written), SchemaKeys(schema));
  EXPECT_EQ(Keys(written["progress"]), SchemaKeys(schema["properties"]["progress"]));
  EXPECT_EQ(Keys(written["workers"]), SchemaKeys(schema["properties"]["workers"]));
  EXPECT_EQ(Keys(written["replicaStatuses"]["Trainer"]),
            SchemaKeys(schema["properties"]["replicaStatuses"]["properties"]["Trainer"]));
}

TEST(JobStatusTest, ReadingGivesBackWhatWasWritten) {
  const json written = Full().ToJson();
  EXPECT_EQ(ReadJobStatus(written).ToJson(), written);
  const JobStatus empty;
  EXPECT_EQ(ReadJobStatus(empty.ToJson()).ToJson(), empty.ToJson());
}

// A status an older operator wrote, or someone edited: what has the right
// type is read, the rest is unset, unknown fields are dropped.
TEST(JobStatusTest, AnEditedStatusReadsWhatItCan) {
  const JobStatus s = ReadJobStatus(json::parse(R"j({
      "phase": 7, "startTime": "2026-11-28T10:00:00Z", "preemptions": "two",
      "failures": 1.0, "workers": {"desired": 3, "ready": "x"},
      "progress": {"epoch": "one", "modelVersion": -4, "testAccuracy": 0.5,
                   "testMetrics": {"f1": 0.7, "bad": "x"}},
      "replicaStatuses": {"Trainer": 5, "Master": {"active": 1}},
      "output": [1], "tls": "yes", "someday": {"new": true}})j"));
  EXPECT_EQ(s.phase, "");
  EXPECT_EQ(s.start_time, "2026-11-28T10:00:00Z");
  EXPECT_EQ(s.preemptions, 0);
  EXPECT_EQ(s.failures, 1);
  ASSERT_TRUE(s.workers.has_value());
  EXPECT_EQ(s.workers->desired, 3);
  EXPECT_EQ(s.workers->ready, 0);
  EXPECT_FALSE(s.progress.epoch.has_value());
  EXPECT_FALSE(s.progress.model_version.has_value());
  EXPECT_EQ(s.progress.test_accuracy, 0.5);
  EXPECT_EQ(s.progress.test_metrics, (std::map<std::string, double>{{"f1", 0.7}}));
  EXPECT_EQ(s.replica_statuses.size(), 1u);
  EXPECT_EQ(s.replica_statuses.at("Master").active, 1);
  EXPECT_TRUE(s.output.empty());
  EXPECT_FALSE(s.tls);
  EXPECT_FALSE(s.ToJson().contains("someday"));
}

}  // namespace
}  // namespace trainingjob
}  // namespace gaptrain
