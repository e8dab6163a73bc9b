#include "operator/crd/schema_check.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace gaptrain {
namespace {

const char kSchema[] = R"(
type: object
required: [spec]
properties:
  metadata:
    type: object
    properties:
      name: {type: string, maxLength: 5, pattern: "^[a-z]+$"}
  spec:
    type: object
    required: [path]
    properties:
      path: {type: string, minLength: 1}
      rule: {type: string, enum: [a, b], default: a}
      count: {type: integer, minimum: 1, maximum: 8}
      rate: {type: number, minimum: 0, exclusiveMinimum: true, maximum: 1, exclusiveMaximum: true}
      on: {type: boolean}
      marks: {type: array, items: {type: number, minimum: 0}}
      tags: {type: object, additionalProperties: {type: string}}
      pod: {type: object, x-kubernetes-preserve-unknown-fields: true}
)";

std::vector<std::string> Errors(const std::string& value) {
  return CheckAgainstSchema(YAML::Load(kSchema), YAML::Load(value));
}

TEST(SchemaCheckTest, AConformingObjectHasNoErrors) {
  EXPECT_EQ(Errors(R"(
metadata: {name: abc, labels: {x: y}, uid: "1"}
spec: {path: /x, rule: b, count: 8, rate: 0.5, on: true, marks: [0, 1.5], tags: {a: b},
       pod: {anything: [1, {goes: here}]}}
)"),
            std::vector<std::string>{});
  // JSON is YAML: the same object as the API server sends it.
  EXPECT_EQ(Errors(R"({"spec": {"path": "/x", "count": 1, "rate": 1e-3, "on": false}})"),
            std::vector<std::string>{});
}

TEST(SchemaCheckTest, EachRuleIsReportedWithThePath) {
  EXPECT_EQ(Errors("spec: {path: /x, rule: c}"),
            std::vector<std::string>{"spec.rule: unsupported value 'c'"});
  EXPECT_EQ(Errors("spec: {path: /x, count: 0}"),
            std::vector<std::string>{"spec.count: should be greater than or equal to 1"});
  EXPECT_EQ(Errors("spec: {path: /x, count: 9}"),
            std::vector<std::string>{"spec.count: should be less than or equal to 8"});
  EXPECT_EQ(Errors("spec: {path: /x, rate: 0}"),
            std::vector<std::string>{"spec.rate: should be greater than 0"});
  EXPECT_EQ(Errors("spec: {path: /x, rate: 1}"),
            std::vector<std::string>{"spec.rate: should be less than 1"});
  EXPECT_EQ(Errors("spec: {path: /x, count: 1.5}"),
            std::vector<std::string>{"spec.count: must be of type integer, got number"});
  EXPECT_EQ(Errors("spec: {path: /x, count: '3'}"),
            std::vector<std::string>{"spec.count: must be of type integer, got string"});
  EXPECT_EQ(Errors("spec: {path: /x, on: yes}"),
            std::vector<std::string>{"spec.on: must be of type boolean, got string"});
  EXPECT_EQ(Errors("spec: {path: ''}"),
            std::vector<std::string>{"spec.path: should be at least 1 chars long"});
  EXPECT_EQ(Errors("spec: {rule: a}"), std::vector<std::string>{"spec.path: Required value"});
  EXPECT_EQ(Errors("metadata: {name: x}"), std::vector<std::string>{"spec: Required value"});
  EXPECT_EQ(Errors("spec: {path: /x, colour: red}"),
            std::vector<std::string>{"spec.colour: unknown field"});
  EXPECT_EQ(Errors("spec: {path: /x, marks: [1, -1]}"),
            std::vector<std::string>{"spec.marks[1]: should be greater than or equal to 0"});
  EXPECT_EQ(Errors("spec: {path: /x, marks: 1}"),
            std::vector<std::string>{"spec.marks: must be of type array, got integer"});
  EXPECT_EQ(Errors("spec: {path: /x, tags: {a: [1]}}"),
            std::vector<std::string>{"spec.tags.a: must be of type string, got array"});
  EXPECT_EQ(Errors("metadata: {name: abcdef}\nspec: {path: /x}"),
            std::vector<std::string>{"metadata.name: may not be longer than 5"});
  EXPECT_EQ(Errors("metadata: {name: a1}\nspec: {path: /x}"),
            std::vector<std::string>{"metadata.name: should match '^[a-z]+$'"});
}

TEST(SchemaCheckTest, NullIsAbsent) {
  EXPECT_EQ(Errors("spec: {path: /x, count: null, rule: ~}"), std::vector<std::string>{});
  EXPECT_EQ(Errors("spec: {path: null}"), std::vector<std::string>{"spec.path: Required value"});
}

TEST(SchemaCheckTest, KeywordsItDoesNotKnowAreReported) {
  const std::vector<std::string> errors =
      CheckAgainstSchema(YAML::Load("{type: string, x-kubernetes-embedded-resource: true}"),
                         YAML::Load("x"), "field");
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].find("'x-kubernetes-embedded-resource'"), std::string::npos) << errors[0];
}

TEST(SchemaCheckTest, CelRulesAreKnownButNotEvaluated) {
  // The real API server evaluates them (trainingjob_crd_api_test).
  EXPECT_EQ(CheckAgainstSchema(YAML::Load("{type: string, x-kubernetes-validations: "
                                          "[{rule: 'self == \"y\"', message: must be y}]}"),
                               YAML::Load("x"), "field"),
            std::vector<std::string>{});
}

TEST(SchemaCheckTest, MaxItems) {
  const YAML::Node schema = YAML::Load("{type: array, maxItems: 2, items: {type: number}}");
  EXPECT_EQ(CheckAgainstSchema(schema, YAML::Load("[1, 2]"), "list"), std::vector<std::string>{});
  EXPECT_EQ(CheckAgainstSchema(schema, YAML::Load("[1, 2, 3]"), "list"),
            std::vector<std::string>{"list: must have at most 2 items"});
}

TEST(SchemaCheckTest, JsonTypes) {
  EXPECT_EQ(JsonTypeOf(YAML::Load("3")), "integer");
  EXPECT_EQ(JsonTypeOf(YAML::Load("-3")), "integer");
  EXPECT_EQ(JsonTypeOf(YAML::Load("1.0e-8")), "number");
  EXPECT_EQ(JsonTypeOf(YAML::Load("1e300")), "number");
  EXPECT_EQ(JsonTypeOf(YAML::Load(".5")), "number");
  EXPECT_EQ(JsonTypeOf(YAML::Load("'3'")), "string");
  EXPECT_EQ(JsonTypeOf(YAML::Load("\"true\"")), "string");
  EXPECT_EQ(JsonTypeOf(YAML::Load("true")), "boolean");
  EXPECT_EQ(JsonTypeOf(YAML::Load("gap-aware")), "string");
  EXPECT_EQ(JsonTypeOf(YAML::Load("~")), "null");
  EXPECT_EQ(JsonTypeOf(YAML::Load("[1]")), "array");
  EXPECT_EQ(JsonTypeOf(YAML::Load("{a: 1}")), "object");
}

TEST(SchemaCheckTest, StructuralProblemsAreFound) {
  EXPECT_EQ(StructuralProblems(YAML::Load(kSchema)), std::vector<std::string>{});
  EXPECT_EQ(StructuralProblems(YAML::Load(R"(
type: object
properties:
  metadata: {type: object, description: no, properties: {labels: {type: object}}}
  spec:
    type: object
    properties:
      untyped: {description: x}
      free: {x-kubernetes-preserve-unknown-fields: true}
      list: {type: array, items: {minimum: 0}}
)")),
            (std::vector<std::string>{
                "properties.metadata: may only restrict name and generateName, has 'description'",
                "properties.metadata: may only restrict name and generateName, has 'labels'",
                "properties.spec.properties.untyped: no type",
                "properties.spec.properties.list.items: no type"}));
}

}  // namespace
}  // namespace gaptrain
