#include "services/api/job_fields.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace gaptrain {
namespace {

struct Inner {
  double rate = 0.5;
};

struct Toy {
  std::string kind = "a";
  std::string path;
  bool on = true;
  uint32_t count = 4;
  uint64_t length = 0;
  std::vector<double> marks = {0.25};
  std::map<std::string, std::string> tags;
  std::string pod;
  Inner inner;
};

const FieldSectionOf<Inner>& InnerFields() {
  using F = FieldsOf<Inner>;
  static const FieldSectionOf<Inner> fields({
      F::Number("rate", &Inner::rate, "a rate").Above(0).Below(1),
  });
  return fields;
}

const FieldSectionOf<Toy>& ToyFields() {
  using F = FieldsOf<Toy>;
  static const FieldSectionOf<Toy> fields(
      {
          F::Text("kind", &Toy::kind, "a or b").OneOf({"a", "b"}),
          F::Text("path", &Toy::path, "where").Required(),
          F::Flag("on", &Toy::on, "switch"),
          F::Integer("count", &Toy::count, "how many").AtLeast(1).Limit(8, "eight is plenty"),
          F::Integer("length", &Toy::length, "how long").AtLeast(1).Limit(1e15, "big").NoDefault(),
          F::Numbers("marks", &Toy::marks, "fractions").Above(0).Below(1),
          F::StringMap("tags", &Toy::tags, "labels"),
          F::Object("pod", &Toy::pod, "free-form"),
          F::Section("inner", &Toy::inner, InnerFields(), "nested"),
      },
      {"ignoredKey"});
  return fields;
}

// The error of reading `yaml` into a Toy ("" when it reads).
std::string ReadError(const std::string& yaml, Toy* toy) {
  Status status;
  ReadFields(ToyFields(), YAML::Load(yaml), "toy", toy, &status);
  return status.message();
}

std::string ReadError(const std::string& yaml) {
  Toy toy;
  return ReadError(yaml, &toy);
}

TEST(JobFieldsTest, DefaultsComeFromTheStruct) {
  const std::vector<JobField>& fields = ToyFields().fields();
  EXPECT_EQ(std::get<std::string>(fields[0].schema().default_value), "a");
  EXPECT_TRUE(std::holds_alternative<std::monostate>(fields[1].schema().default_value));
  EXPECT_EQ(std::get<bool>(fields[2].schema().default_value), true);
  EXPECT_EQ(std::get<uint64_t>(fields[3].schema().default_value), 4u);
  EXPECT_TRUE(std::holds_alternative<std::monostate>(fields[4].schema().default_value));
  EXPECT_EQ(std::get<std::vector<double>>(fields[5].schema().default_value),
            std::vector<double>{0.25});
  EXPECT_TRUE(std::holds_alternative<std::monostate>(fields[6].schema().default_value));
  // Integers start at 0 unless the line says more.
  EXPECT_TRUE(fields[3].schema().minimum.set);
}

TEST(JobFieldsTest, ReadsEveryTypeAndKeepsDefaultsOfAbsentFields) {
  Toy toy;
  EXPECT_EQ(ReadError(R"(
path: /x
count: 8
length: 1000000000000000
marks: [0.1, 0.9]
tags: {team: a}
pod: {spec: {containers: []}}
inner: {rate: 0.25}
ignoredKey: anything
)",
                      &toy),
            "");
  EXPECT_EQ(toy.kind, "a");
  EXPECT_TRUE(toy.on);
  EXPECT_EQ(toy.count, 8u);
  EXPECT_EQ(toy.length, 1000000000000000u);
  EXPECT_EQ(toy.marks, (std::vector<double>{0.1, 0.9}));
  EXPECT_EQ(toy.tags.at("team"), "a");
  EXPECT_NE(toy.pod.find("containers"), std::string::npos);
  EXPECT_DOUBLE_EQ(toy.inner.rate, 0.25);
}

TEST(JobFieldsTest, SingleFieldRulesNameTheField) {
  EXPECT_EQ(ReadError("kind: c\npath: /x"), "toy.kind: must be one of a | b, got 'c'");
  EXPECT_EQ(ReadError("kind: a"), "toy.path: is required");
  EXPECT_EQ(ReadError("path: ''"), "toy.path: is required");
  EXPECT_EQ(ReadError("path: /x\ncount: 9"), "toy.count: must be <= 8 (eight is plenty), got 9");
  EXPECT_EQ(ReadError("path: /x\ncount: 0"), "toy.count: must be >= 1, got 0");
  EXPECT_EQ(ReadError("path: /x\ncount: 18446744073709551615"),
            "toy.count: must be <= 8 (eight is plenty), got 18446744073709551615");
  EXPECT_EQ(ReadError("path: /x\ncount: -1"),
            "toy.count: must be a non-negative integer, got '-1'");
  EXPECT_EQ(ReadError("path: /x\nlength: 1000000000000001"),
            "toy.length: must be <= 1000000000000000 (big), got 1000000000000001");
  EXPECT_EQ(ReadError("path: /x\nlength: 9007199254740993"),
            "toy.length: must be <= 1000000000000000 (big), got 9007199254740993");
  EXPECT_EQ(ReadError("path: /x\nmarks: [0.5, 1]"), "toy.marks[1]: must be in (0, 1), got 1");
  EXPECT_EQ(ReadError("path: /x\ninner: {rate: 1.5}"),
            "toy.inner.rate: must be in (0, 1), got 1.5");
  EXPECT_EQ(ReadError("path: /x\ninner: 3"), "toy.inner: must be a mapping");
}

TEST(JobFieldsTest, ListsAreListsAsTheApiServerWantsThem) {
  EXPECT_EQ(ReadError("path: /x\nmarks: 0.5"), "toy.marks: must be a list of numbers");
  EXPECT_EQ(ReadError("path: /x\nmarks: [a]"), "toy.marks[0]: must be a number");
}

TEST(JobFieldsTest, UnknownKeysAreErrorsThatListTheKnownOnes) {
  const std::string error = ReadError("path: /x\ncolour: red");
  EXPECT_EQ(error.rfind("toy.colour: unknown field (known here: ", 0), 0u) << error;
  EXPECT_NE(error.find("count"), std::string::npos) << error;
  EXPECT_NE(error.find("ignoredKey"), std::string::npos) << error;
  EXPECT_EQ(ReadError("path: /x\ninner: {rat: 1}").rfind("toy.inner.rat: unknown field", 0), 0u);
}

TEST(JobFieldsTest, ForEachFieldWalksDepthFirstWithPaths) {
  std::vector<std::string> paths;
  ForEachField(ToyFields(), "toy",
               [&](const std::string& path, const FieldSchema&) { paths.push_back(path); });
  EXPECT_EQ(paths, (std::vector<std::string>{"toy.kind", "toy.path", "toy.on", "toy.count",
                                             "toy.length", "toy.marks", "toy.tags", "toy.pod",
                                             "toy.inner", "toy.inner.rate"}));
}

TEST(JobFieldsTest, RangeErrorsSayTheBoundThatMatters) {
  FieldSchema interval;
  interval.minimum = {true, 0, false};
  interval.maximum = {true, 1, true};
  EXPECT_EQ(RangeError(interval, 0.5, FormatNumber(0.5)), "");
  EXPECT_EQ(RangeError(interval, 1, FormatNumber(1)), "must be in [0, 1), got 1");
  EXPECT_EQ(RangeError(interval, -0.5, FormatNumber(-0.5)), "must be in [0, 1), got -0.5");
  FieldSchema limited = interval;
  limited.maximum = {true, 100, false};
  limited.limit_reason = "why";
  EXPECT_EQ(RangeError(limited, 100, FormatNumber(100)), "");
  EXPECT_EQ(RangeError(limited, 1e300, FormatNumber(1e300)), "must be <= 100 (why), got 1.0e+300");
  EXPECT_EQ(RangeError(limited, -1, FormatNumber(-1)), "must be >= 0, got -1");
  FieldSchema lower_only;
  lower_only.minimum = {true, 0, true};
  EXPECT_EQ(RangeError(lower_only, 0, FormatNumber(0)), "must be > 0, got 0");
}

TEST(JobFieldsTest, FormatNumberIsShortExactAndYamlFriendly) {
  EXPECT_EQ(FormatNumber(0), "0");
  EXPECT_EQ(FormatNumber(65536), "65536");
  EXPECT_EQ(FormatNumber(1e15), "1000000000000000");
  EXPECT_EQ(FormatNumber(9007199254740991.0), "9007199254740991");
  EXPECT_EQ(FormatNumber(0.1), "0.1");
  EXPECT_EQ(FormatNumber(0.999), "0.999");
  EXPECT_EQ(FormatNumber(1e-4), "0.0001");
  EXPECT_EQ(FormatNumber(1e-8), "1.0e-8");
  EXPECT_EQ(FormatNumber(2.5e-12), "2.5e-12");
  EXPECT_EQ(FormatNumber(-1.5), "-1.5");
  EXPECT_EQ(FormatNumber(1e300), "1.0e+300");
  for (double v : {0.1, 1.0 / 3, 1e-8, 123456.789, 2.0e20}) {
    EXPECT_EQ(std::strtod(FormatNumber(v).c_str(), nullptr), v) << FormatNumber(v);
  }
}

TEST(JobFieldsTest, OpenApiTypes) {
  EXPECT_STREQ(OpenApiTypeName(FieldType::kNumberList), "array");
  EXPECT_STREQ(OpenApiTypeName(FieldType::kSection), "object");
  EXPECT_STREQ(OpenApiTypeName(FieldType::kInteger), "integer");
}

}  // namespace
}  // namespace gaptrain
