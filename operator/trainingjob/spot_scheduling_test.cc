// The spot presets (GKE, EKS, AKS, none), custom JSON with every error
// naming its field, and negation of node requirements.

#include "operator/trainingjob/spot_scheduling.h"

#include <gtest/gtest.h>

namespace gaptrain {
namespace trainingjob {
namespace {

using nlohmann::json;

TEST(SpotSchedulingTest, Presets) {
  SpotScheduling s;
  ASSERT_TRUE(SpotPreset("gke", &s).ok());
  EXPECT_EQ(s.spot_node_selector,
            json::parse(R"([{"key":"cloud.google.com/gke-spot","operator":"In","values":["true"]}])"));
  EXPECT_EQ(s.tolerations, json::parse(R"([{"key":"cloud.google.com/gke-spot","operator":"Equal",
                                            "value":"true","effect":"NoSchedule"}])"));
  ASSERT_TRUE(SpotPreset("eks", &s).ok());
  EXPECT_EQ(s.spot_node_selector,
            json::parse(R"([{"key":"eks.amazonaws.com/capacityType","operator":"In","values":["SPOT"]}])"));
  EXPECT_TRUE(s.tolerations.empty());
  ASSERT_TRUE(SpotPreset("aks", &s).ok());
  EXPECT_EQ(s.spot_node_selector,
            json::parse(R"([{"key":"kubernetes.azure.com/scalesetpriority","operator":"In",
                             "values":["spot"]}])"));
  EXPECT_EQ(s.tolerations, json::parse(R"([{"key":"kubernetes.azure.com/scalesetpriority",
                                            "operator":"Equal","value":"spot","effect":"NoSchedule"}])"));
  ASSERT_TRUE(SpotPreset("none", &s).ok());
  EXPECT_TRUE(s.empty());
  EXPECT_EQ(SpotPreset("gcp", &s).code(), Status::Code::kInvalidArgument);
}

TEST(SpotSchedulingTest, FlagValueIsAPresetOrJson) {
  SpotScheduling s;
  ASSERT_TRUE(ParseSpotScheduling("aks", "--spot-preset", &s).ok());
  EXPECT_EQ(s.name, "aks");
  const Status bad = ParseSpotScheduling("spot", "--spot-preset", &s);
  EXPECT_NE(bad.message().find("--spot-preset: must be gke, eks, aks, none or a JSON object"),
            std::string::npos)
      << bad.message();

  ASSERT_TRUE(ParseSpotScheduling(
                  R"( {"tolerations": [{"key": "spot", "operator": "Exists", "effect": "NoSchedule"}],
                      "spotNodeSelector": [{"key": "node.example.com/lifecycle", "operator": "In",
                                            "values": ["spot", "preemptible"]}]})",
                  "--spot-preset", &s)
                  .ok());
  EXPECT_EQ(s.name, "custom");
  EXPECT_EQ(s.tolerations.size(), 1u);
  EXPECT_EQ(s.spot_node_selector[0]["values"].size(), 2u);
}

TEST(SpotSchedulingTest, CustomJsonErrorsNameTheField) {
  struct Case {
    const char* value;
    const char* error;
  } cases[] = {
      {"{not json", "--spot-preset: not a JSON object"},
      {R"({"tolerations": {}})", "--spot-preset: tolerations: must be a list"},
      {R"({"affinity": []})", "--spot-preset: affinity: unknown field"},
      {R"({"tolerations": [{"key": "a", "operator": "Maybe"}]})",
       "tolerations[0].operator: must be Equal or Exists, got 'Maybe'"},
      {R"({"tolerations": [{"key": "a", "effect": "Sometimes"}]})",
       "tolerations[0].effect: must be NoSchedule, PreferNoSchedule or NoExecute"},
      {R"({"tolerations": [{"key": "a", "operator": "Exists", "value": "x"}]})",
       "tolerations[0].value: must be absent with operator Exists"},
      {R"({"tolerations": [{"key": "a", "tolerationSeconds": "5"}]})",
       "tolerations[0].tolerationSeconds: must be an integer"},
      {R"({"tolerations": [{"color": "red"}]})", "tolerations[0].color: unknown field"},
      {R"({"spotNodeSelector": [{"operator": "In", "values": ["x"]}]})",
       "spotNodeSelector[0].key: must be a non-empty string"},
      {R"({"spotNodeSelector": [{"key": "a", "operator": "Gt", "values": ["1"]}]})",
       "spotNodeSelector[0].operator: must be In, NotIn, Exists or DoesNotExist"},
      {R"({"spotNodeSelector": [{"key": "a", "operator": "In"}]})",
       "spotNodeSelector[0].values: must be a non-empty list of strings for In"},
      {R"({"spotNodeSelector": [{"key": "a", "operator": "Exists", "values": ["x"]}]})",
       "spotNodeSelector[0].values: must be absent for Exists"},
      {R"({"spotNodeSelector": ["a"]})", "spotNodeSelector[0]: must be an object"},
  };
  for (const Case& c : cases) {
    SpotScheduling s;
    const Status status = ParseSpotScheduling(c.value, "--spot-preset", &s);
    EXPECT_EQ(status.code(), Status::Code::kInvalidArgument) << c.value;
    EXPECT_NE(status.message().find(c.error), std::string::npos)
        << c.value << " -> " << status.message();
  }
}

TEST(SpotSchedulingTest, NegatedRequirement) {
  EXPECT_EQ(NegatedRequirement(json::parse(R"({"key":"k","operator":"In","values":["a"]})")),
            json::parse(R"({"key":"k","operator":"NotIn","values":["a"]})"));
  EXPECT_EQ(NegatedRequirement(json::parse(R"({"key":"k","operator":"NotIn","values":["a"]})")),
            json::parse(R"({"key":"k","operator":"In","values":["a"]})"));
  EXPECT_EQ(NegatedRequirement(json::parse(R"({"key":"k","operator":"Exists"})")),
            json::parse(R"({"key":"k","operator":"DoesNotExist"})"));
  EXPECT_EQ(NegatedRequirement(json::parse(R"({"key":"k","operator":"DoesNotExist"})")),
            json::parse(R"({"key":"k","operator":"Exists"})"));
}

}  // namespace
}  // namespace trainingjob
}  // namespace gaptrain
