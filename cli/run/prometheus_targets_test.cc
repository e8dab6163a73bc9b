#include "cli/run/prometheus_targets.h"

#include <gtest/gtest.h>

namespace gaptrain {
namespace {

TEST(PrometheusTargetGroupsTest, EachTargetCarriesTheLabelsOfAClusterPod) {
  const nlohmann::json groups = PrometheusTargetGroups(
      "mnist", {{"master", "master", "master", "127.0.0.1:9000"},
                {"evaluator", "worker", "evaluator", "127.0.0.1:9001"},
                {"trainer-1", "worker", "trainer", "127.0.0.1:9002"}});
  ASSERT_TRUE(groups.is_array());
  ASSERT_EQ(groups.size(), 3u);
  EXPECT_EQ(groups[2]["targets"], nlohmann::json::array({"127.0.0.1:9002"}));
  EXPECT_EQ(groups[2]["labels"], (nlohmann::json{{"job", "gaptrain-worker"},
                                                 {"namespace", "local"},
                                                 {"pod", "trainer-1"},
                                                 {"gaptrain_io_job_name", "mnist"},
                                                 {"gaptrain_io_replica_type", "trainer"}}));
  EXPECT_EQ(groups[0]["labels"]["job"], "gaptrain-master");
  EXPECT_EQ(groups[1]["labels"]["gaptrain_io_replica_type"], "evaluator");
  EXPECT_EQ(groups[1]["labels"]["pod"], "evaluator");
}

TEST(PrometheusTargetGroupsTest, NoTargetsIsAnEmptyList) {
  // Prometheus reads an empty array as "no targets"; null would be an error.
  EXPECT_EQ(PrometheusTargetGroups("mnist", {}), nlohmann::json::array());
}

}  // namespace
}  // namespace gaptrain
