// Condition timestamps move only as Kubernetes' rules say; time text.

#include "operator/trainingjob/job_conditions.h"

#include <gtest/gtest.h>

namespace gaptrain {
namespace trainingjob {
namespace {

using nlohmann::json;

TEST(JobConditionsTest, TimeText) {
  const auto t = std::chrono::system_clock::from_time_t(1795413600);
  EXPECT_EQ(FormatTime(t), "2026-11-23T06:00:00Z");
  EXPECT_EQ(ParseTime("2026-11-23T06:00:00Z"), t);
  EXPECT_EQ(ParseTime("2026-11-23T06:00:00.123456Z"), t);
  for (const char* bad : {"", "2026-11-23", "2026-11-23T06:00:00", "2026-11-23T06:00:00+01:00",
                          "2026-13-23T06:00:00Z", "2026-11-23T06:00:00Zjunk"}) {
    EXPECT_FALSE(ParseTime(bad).has_value()) << bad;
  }
}

TEST(JobConditionsTest, TimestampsMoveOnlyWithChanges) {
  JobConditions first(json(), "T1");
  first.Set({"Running", "True", "TrainingJobRunning", "running"});
  const json written = first.ToJson();
  ASSERT_EQ(written.size(), 1u);
  EXPECT_EQ(written[0]["lastTransitionTime"], "T1");
  EXPECT_EQ(written[0]["lastUpdateTime"], "T1");

  // The same condition later: nothing moves.
  JobConditions same(written, "T2");
  same.Set({"Running", "True", "TrainingJobRunning", "running"});
  EXPECT_EQ(same.ToJson(), written);

  // A new message: lastUpdateTime moves, lastTransitionTime stays.
  JobConditions message(written, "T3");
  message.Set({"Running", "True", "TrainingJobRunning", "still running"});
  EXPECT_EQ(message.ToJson()[0]["lastTransitionTime"], "T1");
  EXPECT_EQ(message.ToJson()[0]["lastUpdateTime"], "T3");

  // A new status: both move.
  JobConditions flip(written, "T4");
  flip.Clear("Running", "TrainingJobSuspended", "suspended");
  EXPECT_EQ(flip.ToJson()[0]["status"], "False");
  EXPECT_EQ(flip.ToJson()[0]["lastTransitionTime"], "T4");

  // Clear leaves absent and False conditions alone.
  JobConditions absent(json::array(), "T5");
  absent.Clear("Restarting", "x", "y");
  EXPECT_TRUE(absent.ToJson().empty());
  JobConditions already(flip.ToJson(), "T6");
  already.Clear("Running", "Other", "other");
  EXPECT_EQ(already.ToJson(), flip.ToJson());
}

TEST(JobConditionsTest, CanonicalOrderAndOddInput) {
  JobConditions c(json::parse(R"([{"type": "Suspended", "status": "False"}, "junk", 3,
                                  {"status": "True"}, {"type": "Created", "status": "True"}])"),
                  "T");
  c.Set({"DataUnavailable", "True", "StoreUnreachable", "m"});
  c.Set({"Running", "True", "R", "m"});
  c.Set({"ReplicaFailure", "True", "FailedCreate", "m"});
  c.Set({"ModelExported", "True", "ModelExported", "m"});
  c.Set({"PodsUnschedulable", "True", "Unschedulable", "m"});
  c.Set({"Invented", "True", "R", "m"});  // not a type of the CRD's: dropped
  const json list = c.ToJson();
  ASSERT_EQ(list.size(), 7u);
  EXPECT_EQ(list[0]["type"], "Created");
  EXPECT_EQ(list[1]["type"], "Running");
  EXPECT_EQ(list[2]["type"], "Suspended");
  EXPECT_EQ(list[3]["type"], "PodsUnschedulable");
  EXPECT_EQ(list[4]["type"], "ReplicaFailure");
  EXPECT_EQ(list[5]["type"], "ModelExported");
  EXPECT_EQ(list[6]["type"], "DataUnavailable");  // added last: older statuses keep their order
  EXPECT_TRUE(c.IsTrue("Created"));
  EXPECT_FALSE(c.IsTrue("Suspended"));
  EXPECT_FALSE(c.Get("Failed").has_value());
}

}  // namespace
}  // namespace trainingjob
}  // namespace gaptrain
