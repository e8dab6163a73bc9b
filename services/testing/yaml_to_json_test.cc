#include "services/testing/yaml_to_json.h"

#include <gtest/gtest.h>

namespace gaptrain {
namespace kube_testing {
namespace {

using nlohmann::json;

TEST(YamlToJsonTest, ResolvesPlainScalarsLikeKubernetes) {
  json j;
  ASSERT_TRUE(YamlToJson("a: 1\nb: 1.5\nc: true\nd: yes\ne: off\nf: ~\ng: text\nh: \"0\"\n"
                         "i: '3'\nj: 0x1F\nk: -7\nl: 1e3\nm: 2026-11-23T06:00:00Z\nn:\n",
                         &j)
                  .ok());
  EXPECT_EQ(j["a"], 1);
  EXPECT_TRUE(j["a"].is_number_integer());
  EXPECT_EQ(j["b"], 1.5);
  EXPECT_EQ(j["c"], true);
  EXPECT_EQ(j["d"], true);
  EXPECT_EQ(j["e"], false);
  EXPECT_TRUE(j["f"].is_null());
  EXPECT_EQ(j["g"], "text");
  EXPECT_EQ(j["h"], "0");
  EXPECT_EQ(j["i"], "3");
  EXPECT_EQ(j["j"], 31);
  EXPECT_EQ(j["k"], -7);
  EXPECT_EQ(j["l"], 1000.0);
  EXPECT_EQ(j["m"], "2026-11-23T06:00:00Z");
  EXPECT_TRUE(j["n"].is_null());
}

TEST(YamlToJsonTest, ConvertsTheRecordedApplyBody) {
  json j;
  ASSERT_TRUE(YamlToJson("apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  labels: {a: b, "
                         "idx: \"0\"}\nspec:\n  containers:\n  - name: w\n    command: [x, "
                         "--role=trainer]\n",
                         &j)
                  .ok());
  EXPECT_EQ(j, json::parse(R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":"p",
      "labels":{"a":"b","idx":"0"}},"spec":{"containers":[{"name":"w",
      "command":["x","--role=trainer"]}]}})"));
}

TEST(YamlToJsonTest, JsonIsYaml) {
  json j;
  ASSERT_TRUE(YamlToJson(R"({"a": [1, "2", {"b": null}], "c": "\u00e9"})", &j).ok());
  EXPECT_EQ(j, json::parse(R"({"a": [1, "2", {"b": null}], "c": "\u00e9"})"));
}

TEST(YamlToJsonTest, RejectsMalformedInput) {
  json j;
  Status s = YamlToJson("a: [1, 2\n", &j);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  s = YamlToJson("a: 1\na: 2\n", &j);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(s.message().find("duplicate key \"a\""), std::string::npos) << s.message();
  s = YamlToJson("a: 1\n---\nb: 2\n", &j);
  EXPECT_NE(s.message().find("2 documents"), std::string::npos) << s.message();
  s = YamlToJson("? [a, b]\n: 1\n", &j);
  EXPECT_NE(s.message().find("mapping key must be a scalar"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace kube_testing
}  // namespace gaptrain
