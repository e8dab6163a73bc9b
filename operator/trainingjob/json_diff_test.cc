// IsSubset against what the API server adds and leaves out (including a
// recorded server-side apply: the request is a subset of the stored pod),
// and MergePatch between statuses.

#include "operator/trainingjob/json_diff.h"

#include <gtest/gtest.h>

#include "operator/testing/kube_test_support.h"
#include "services/testing/yaml_to_json.h"

namespace gaptrain {
namespace trainingjob {
namespace {

using nlohmann::json;

json J(const char* text) { return json::parse(text); }

TEST(JsonDiffTest, SubsetOfObjects) {
  EXPECT_TRUE(IsSubset(J(R"({"a": 1})"), J(R"({"a": 1, "b": 2})")));
  EXPECT_FALSE(IsSubset(J(R"({"a": 1, "b": 2})"), J(R"({"a": 1})")));
  EXPECT_FALSE(IsSubset(J(R"({"a": 1})"), J(R"({"a": 2})")));
  EXPECT_TRUE(IsSubset(J(R"({"a": {"b": "x"}})"), J(R"({"a": {"b": "x", "c": 1}})")));
  EXPECT_FALSE(IsSubset(J(R"({"a": {"b": "x"}})"), J(R"({"a": "x"})")));
}

TEST(JsonDiffTest, ZeroValuesMatchAbsentKeys) {
  // Go's omitempty drops them from what the server returns.
  EXPECT_TRUE(IsSubset(J(R"({"readOnly": false, "n": 0, "s": "", "l": [], "o": {}})"),
                       J(R"({})")));
  EXPECT_FALSE(IsSubset(J(R"({"readOnly": true})"), J(R"({})")));
  EXPECT_FALSE(IsSubset(J(R"({"readOnly": false})"), J(R"({"readOnly": true})")));
}

TEST(JsonDiffTest, ArraysMatchInOrderWithExtraItems) {
  EXPECT_TRUE(IsSubset(J(R"([{"name": "a"}, {"name": "b"}])"),
                       J(R"([{"name": "a", "x": 1}, {"name": "server"}, {"name": "b"}])")));
  EXPECT_FALSE(IsSubset(J(R"([{"name": "b"}, {"name": "a"}])"),
                        J(R"([{"name": "a"}, {"name": "b"}])")));
  EXPECT_FALSE(IsSubset(J(R"([1, 1])"), J(R"([1])")));
  EXPECT_TRUE(IsSubset(J(R"([])"), J(R"([1])")));
}

TEST(JsonDiffTest, NumbersCompareByValue) {
  EXPECT_TRUE(IsSubset(J("1"), J("1.0")));
  EXPECT_TRUE(IsSubset(J("2.5"), J("2.5")));
  EXPECT_FALSE(IsSubset(J("1"), J("\"1\"")));
}

TEST(JsonDiffTest, AnAppliedPodIsASubsetOfWhatTheServerStored) {
  kube::Recording r;
  const Status s = kube::LoadRecording("pod-server-side-apply", &r);
  ASSERT_TRUE(s.ok()) << s.ToString();
  json applied;
  ASSERT_TRUE(kube_testing::YamlToJson(r.request_body.get<std::string>(), &applied).ok());
  // The server added a service-account volume and mounts, default
  // tolerations, dnsPolicy, ... and kept every applied field.
  EXPECT_TRUE(IsSubset(applied, r.response_body));
  json changed = applied;
  changed["spec"]["containers"][0]["image"] = "gaptrain:other";
  EXPECT_FALSE(IsSubset(changed, r.response_body));
}

TEST(JsonDiffTest, MergePatch) {
  EXPECT_EQ(MergePatch(J(R"({"a": 1, "b": {"c": 2, "d": 3}})"), J(R"({"a": 1, "b": {"c": 2, "d": 3}})")),
            J("{}"));
  EXPECT_EQ(MergePatch(J(R"({"phase": "Pending", "startTime": "t", "w": {"a": 1, "b": 2}})"),
                       J(R"({"phase": "Running", "w": {"a": 1, "b": 3}, "n": [1]})")),
            J(R"({"phase": "Running", "startTime": null, "w": {"b": 3}, "n": [1]})"));
  // Lists are replaced whole.
  EXPECT_EQ(MergePatch(J(R"({"l": [1, 2]})"), J(R"({"l": [1]})")), J(R"({"l": [1]})"));
  EXPECT_EQ(MergePatch(J(R"({"x": 1})"), J(R"({"x": 1.0})")), J("{}"));
  // Applying the patch gives the target.
  json from = J(R"({"phase": "Pending", "startTime": "t", "w": {"a": 1, "b": 2}})");
  const json to = J(R"({"phase": "Running", "w": {"a": 1, "c": 3}})");
  from.merge_patch(MergePatch(from, to));
  EXPECT_EQ(from, to);
}

}  // namespace
}  // namespace trainingjob
}  // namespace gaptrain
