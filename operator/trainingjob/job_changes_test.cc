// Which changes to a TrainingJob wake the controller: not its own writes
// (status, the pod ledger, resourceVersion, managedFields), everything else.

#include "operator/trainingjob/job_changes.h"

#include <gtest/gtest.h>

#include "operator/trainingjob/pod_ledger.h"

namespace gaptrain {
namespace trainingjob {
namespace {

using nlohmann::json;

json Job() {
  return {{"metadata",
           {{"name", "mnist"},
            {"resourceVersion", "10"},
            {"generation", 1},
            {"labels", {{"team", "a"}}},
            {"managedFields", json::array()}}},
          {"spec", {{"workers", {{"replicas", 4}}}}},
          {"status", {{"phase", "Running"}}}};
}

TEST(JobChangesTest, TheOperatorsOwnWritesDoNotCount) {
  json after = Job();
  after["metadata"]["resourceVersion"] = "11";
  after["status"]["progress"] = {{"epoch", 1.5}};
  after["metadata"]["annotations"][kPodLedgerAnnotation] = "{\"preemptions\":1}";
  after["metadata"]["managedFields"].push_back({{"manager", "gaptrain-operator"}});
  EXPECT_FALSE(JobChangedBeyondOwnWrites(Job(), after));
}

TEST(JobChangesTest, EverythingElseCounts) {
  auto changed = [](const std::function<void(json*)>& change) {
    json after = Job();
    change(&after);
    return JobChangedBeyondOwnWrites(Job(), after);
  };
  EXPECT_TRUE(changed([](json* j) { (*j)["spec"]["workers"]["replicas"] = 6; }));
  EXPECT_TRUE(changed([](json* j) { (*j)["metadata"]["generation"] = 2; }));
  EXPECT_TRUE(changed([](json* j) { (*j)["metadata"]["labels"]["team"] = "b"; }));
  EXPECT_TRUE(changed([](json* j) { (*j)["metadata"]["annotations"]["note"] = "x"; }));
  EXPECT_TRUE(changed([](json* j) { (*j)["metadata"]["deletionTimestamp"] = "2026-11-23T06:00:00Z"; }));
  EXPECT_TRUE(changed([](json* j) { (*j)["metadata"]["finalizers"] = {"f"}; }));
  EXPECT_TRUE(JobChangedBeyondOwnWrites(json("odd"), Job()));
}

}  // namespace
}  // namespace trainingjob
}  // namespace gaptrain
