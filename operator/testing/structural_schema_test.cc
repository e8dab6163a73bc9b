#include "operator/testing/structural_schema.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>

#include "operator/testing/server_test_base.h"
#include "operator/testing/yaml_to_json.h"

namespace gaptrain {
namespace kube_testing {
namespace {

using nlohmann::json;

class StructuralSchemaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    json crd;
    ASSERT_TRUE(YamlToJson(ExampleCrdYaml(), &crd).ok());
    Status s = StructuralSchema::Parse(crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"],
                                       &schema_);
    ASSERT_TRUE(s.ok()) << s.ToString();
  }
  std::unique_ptr<StructuralSchema> schema_;
};

TEST_F(StructuralSchemaTest, AppliesTheRecordedDefaults) {
  json job = TrainingJobBody("mnist");
  schema_->ApplyDefaults(&job);
  // As in recorded/trainingjob-create.json: defaults where the parent exists.
  EXPECT_EQ(job["spec"]["data"], json::parse(R"({"format":"mnist-idx","path":"/data/mnist","shuffleSeed":1})"));
  EXPECT_EQ(job["spec"]["training"]["batchSize"], 128);
  EXPECT_EQ(job["spec"]["training"]["optimizer"]["momentum"], 0.9);
  EXPECT_EQ(job["spec"]["training"]["optimizer"]["learningRate"], 0.05);
  EXPECT_EQ(job["spec"]["workers"]["restartPolicy"], "OnFailure");
  EXPECT_FALSE(job["spec"].contains("model"));
  EXPECT_FALSE(job["spec"]["training"].contains("staleness"));
  EXPECT_EQ(job["metadata"]["name"], "mnist");
}

TEST_F(StructuralSchemaTest, PrunesUnknownFieldsButKeepsPreservedOnes) {
  json job = TrainingJobBody("mnist");
  job["spec"]["staleness"] = 1;
  job["spec"]["workers"]["template"]["spec"]["anything"] = {{"goes", true}};
  job["status"] = {{"phase", "Running"}, {"bogus", 1}, {"progress", nullptr}};
  std::vector<std::string> unknown;
  schema_->Prune(&job, &unknown);
  EXPECT_EQ(unknown, (std::vector<std::string>{"spec.staleness", "status.bogus"}));
  EXPECT_FALSE(job["spec"].contains("staleness"));
  EXPECT_TRUE(job["spec"]["workers"]["template"]["spec"].contains("anything"));
  EXPECT_FALSE(job["status"].contains("progress"));  // a null that is not nullable
  EXPECT_EQ(job["kind"], "TrainingJob");
}

TEST_F(StructuralSchemaTest, ReportsTheRecordedValidationCauses) {
  json job = TrainingJobBody("bad", 0);
  job["spec"]["training"]["optimizer"]["momentum"] = 1.5;
  job["spec"]["training"]["staleness"] = {{"rule", "gap-awre"}};
  std::vector<StatusCause> causes;
  schema_->Validate(job, &causes);
  ASSERT_EQ(causes.size(), 3u);
  auto find = [&](const std::string& field) {
    return std::find_if(causes.begin(), causes.end(),
                        [&](const StatusCause& c) { return c.field == field; });
  };
  auto rule = find("spec.training.staleness.rule");
  ASSERT_NE(rule, causes.end());
  EXPECT_EQ(rule->reason, "FieldValueNotSupported");
  EXPECT_EQ(rule->message,
            "Unsupported value: \"gap-awre\": supported values: \"none\", \"staleness-aware\", "
            "\"gap-aware\", \"dana-zero\", \"dana-slim\", \"gap-aware-dana\", \"dc-asgd\"");
  auto momentum = find("spec.training.optimizer.momentum");
  ASSERT_NE(momentum, causes.end());
  EXPECT_EQ(momentum->message,
            "Invalid value: 1.5: spec.training.optimizer.momentum in body should be less than 1");
  auto replicas = find("spec.workers.replicas");
  ASSERT_NE(replicas, causes.end());
  EXPECT_EQ(replicas->message,
            "Invalid value: 0: spec.workers.replicas in body should be greater than or equal to 1");
}

TEST_F(StructuralSchemaTest, ChecksTypesRequiredFieldsLengthsAndFormats) {
  json job = TrainingJobBody("x");
  job["spec"].erase("training");
  job["spec"]["data"]["path"] = "";
  job["spec"]["workers"]["replicas"] = "four";
  job["spec"]["training"] = {{"epochs", 0}};
  job["status"] = {{"conditions", json::array({{{"type", "Running"}, {"lastTransitionTime", "now"}}})}};
  std::vector<StatusCause> causes;
  schema_->Validate(job, &causes);
  std::vector<std::string> messages;
  for (const StatusCause& c : causes) messages.push_back(c.field + ": " + c.message);
  EXPECT_EQ(messages,
            (std::vector<std::string>{
                "spec.data.path: Invalid value: \"\": spec.data.path in body should be at least 1 chars long",
                "spec.training.epochs: Invalid value: 0: spec.training.epochs in body should be greater than 0",
                "spec.workers.replicas: Invalid value: \"string\": spec.workers.replicas in body must be of type integer: \"string\"",
                "status.conditions[0].status: Required value",
                "status.conditions[0].lastTransitionTime: Invalid value: \"now\": status.conditions[0].lastTransitionTime in body must be of type date-time: \"now\"",
            }));
  // An integral float is an integer; a fraction is not.
  job = TrainingJobBody("y");
  job["spec"]["workers"]["replicas"] = 2.0;
  causes.clear();
  schema_->Validate(job, &causes);
  EXPECT_TRUE(causes.empty());
  job["spec"]["workers"]["replicas"] = 2.5;
  schema_->Validate(job, &causes);
  ASSERT_EQ(causes.size(), 1u);
  EXPECT_EQ(causes[0].message, "Invalid value: \"number\": spec.workers.replicas in body must be of type integer: \"number\"");
}

TEST(StructuralSchemaParseTest, RejectsMalformedSchemas) {
  std::unique_ptr<StructuralSchema> schema;
  Status s = StructuralSchema::Parse(json::parse(R"({"type":"object","properties":{"a":{"type":3}}})"), &schema);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(s.message().find("openAPIV3Schema.properties.a.type"), std::string::npos) << s.message();
  s = StructuralSchema::Parse(json::parse(R"({"pattern":"("})"), &schema);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  s = StructuralSchema::Parse(json::parse(R"([1])"), &schema);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
}

TEST(StructuralSchemaShapeTest, ListTypesComeFromTheSchema) {
  std::unique_ptr<StructuralSchema> schema;
  ASSERT_TRUE(StructuralSchema::Parse(json::parse(R"({"type":"object","properties":{"status":{
      "type":"object","properties":{"conditions":{"type":"array",
      "x-kubernetes-list-type":"map","x-kubernetes-list-map-keys":["type"],
      "items":{"type":"object","properties":{"type":{"type":"string"}}}},
      "labels":{"type":"object","x-kubernetes-map-type":"atomic"}}}}})"),
                                      &schema)
                  .ok());
  EXPECT_EQ(schema->ShapeAt({"status", "conditions"}).list_keys, std::vector<std::string>{"type"});
  EXPECT_TRUE(schema->ShapeAt({"status", "labels"}).atomic);
  EXPECT_FALSE(schema->ShapeAt({"status", "other"}).atomic);
}

}  // namespace
}  // namespace kube_testing
}  // namespace gaptrain
