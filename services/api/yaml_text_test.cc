#include "services/api/yaml_text.h"

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <string>

namespace gaptrain {
namespace {

using Json = nlohmann::ordered_json;

TEST(YamlTextTest, KubernetesBlockStyleInKeyOrder) {
  const Json value = {
      {"kind", "CustomResourceDefinition"},
      {"spec",
       {{"names", {{"shortNames", {"tj"}}, {"categories", Json::array()}}},
        {"versions", Json::array({Json{{"name", "v1alpha1"},
                                       {"served", true},
                                       {"subresources", {{"status", Json::object()}}}}})}}}};
  EXPECT_EQ(YamlText(value),
            "kind: CustomResourceDefinition\n"
            "spec:\n"
            "  names:\n"
            "    shortNames:\n"
            "    - tj\n"
            "    categories: []\n"
            "  versions:\n"
            "  - name: v1alpha1\n"
            "    served: true\n"
            "    subresources:\n"
            "      status: {}\n");
}

TEST(YamlTextTest, StringsThatCouldReadAsSomethingElseAreQuoted) {
  const Json value = {{"words", {"no", "on", "null", "True", "y", ".inf"}},
                      {"numbers", {"3/4", "1.0", "0x10", "-1"}},
                      {"spaces", {"a b", "a: b", "#c", ""}},
                      {"plain", {"gap-aware", "apiextensions.k8s.io/v1", ".status.phase", "e5"}},
                      {"escapes", "tab\there \"q\" η"}};
  EXPECT_EQ(YamlText(value),
            "words:\n- \"no\"\n- \"on\"\n- \"null\"\n- \"True\"\n- \"y\"\n- \".inf\"\n"
            "numbers:\n- \"3/4\"\n- \"1.0\"\n- \"0x10\"\n- \"-1\"\n"
            "spaces:\n- \"a b\"\n- \"a: b\"\n- \"#c\"\n- \"\"\n"
            "plain:\n- gap-aware\n- apiextensions.k8s.io/v1\n- .status.phase\n- e5\n"
            "escapes: \"tab\\there \\\"q\\\" η\"\n");
}

TEST(YamlTextTest, NumbersAreExactAndTyped) {
  const Json value = {{"i", 65536}, {"big", 1000000000000000ll}, {"f", 0.1},
                      {"tiny", 1e-8}, {"whole", 0.0}, {"neg", -2.5}, {"flag", false}};
  EXPECT_EQ(YamlText(value),
            "i: 65536\nbig: 1000000000000000\nf: 0.1\ntiny: 1.0e-8\nwhole: 0\nneg: -2.5\n"
            "flag: false\n");
}

TEST(YamlTextTest, ReadsBackAsTheSameValue) {
  const Json value = {
      {"a", {{"b", {1, 2.5, "x y", true}}, {"c", Json::object()}}},
      {"list", Json::array({Json{{"k", "v"}, {"n", {{"deep", Json::array({"z"})}}}},
                            Json::array({1, 2})})},
      {"quoted", "yes"}};
  const YAML::Node back = YAML::Load(YamlText(value));
  EXPECT_EQ(back["a"]["b"][0].as<int>(), 1);
  EXPECT_DOUBLE_EQ(back["a"]["b"][1].as<double>(), 2.5);
  EXPECT_EQ(back["a"]["b"][2].as<std::string>(), "x y");
  EXPECT_TRUE(back["a"]["b"][3].as<bool>());
  EXPECT_TRUE(back["a"]["c"].IsMap());
  EXPECT_EQ(back["a"]["c"].size(), 0u);
  EXPECT_EQ(back["list"][0]["k"].as<std::string>(), "v");
  EXPECT_EQ(back["list"][0]["n"]["deep"][0].as<std::string>(), "z");
  EXPECT_EQ(back["list"][1][1].as<int>(), 2);
  EXPECT_EQ(back["quoted"].Tag(), "!");  // a string, not YAML 1.1's boolean
}

}  // namespace
}  // namespace gaptrain
