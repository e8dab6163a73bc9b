// A table's line gives the schema, the writer and the reader at once: one
// line added to a table is written, read back and described; what is unset
// is not written, and a value of another type reads as unset.

#include "operator/trainingjob/status_fields.h"

#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <string>

namespace gaptrain {
namespace trainingjob {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

struct Hits {
  int64_t hits = 0;
};

struct Tiny {
  int64_t count = 0;
  std::optional<int64_t> generation;
  std::optional<uint64_t> version;
  std::optional<double> rate;
  std::string state;
  std::string since;
  bool on = false;
  std::map<std::string, double> scores;
  std::optional<Hits> last;
  std::map<std::string, Hits> by_kind;
  json notes = json::object();
  json history = json::array();
};

StatusFields<Hits> HitsFields() {
  return {StatusFieldsOf<Hits>::Count("hits", &Hits::hits, "times hit")};
}

StatusFields<Tiny> TinyFields() {
  using F = StatusFieldsOf<Tiny>;
  return {F::Count("count", &Tiny::count, "how many"),
          F::Integer("generation", &Tiny::generation, "which one").Format("int64"),
          F::Integer("version", &Tiny::version, "never negative"),
          F::Number("rate", &Tiny::rate, "per second"),
          F::Text("state", &Tiny::state, "where it is").OneOf({"Up", "Down"}),
          F::Time("since", &Tiny::since, "since when"),
          F::Flag("on", &Tiny::on, "switched on"),
          F::Numbers("scores", &Tiny::scores, "by name", "the score"),
          F::Section("last", &Tiny::last, HitsFields(), "the last one"),
          F::Sections("byKind", &Tiny::by_kind, HitsFields(), "by kind", {{"A", "kind A"}}),
          F::Computed("notes", &Tiny::notes, "computed elsewhere",
                      ordered_json{{"type", "object"}}),
          F::Computed("history", &Tiny::history, "a list",
                      ordered_json{{"type", "array"}, {"items", {{"type", "string"}}}})};
}

Tiny Full() {
  Tiny t;
  t.count = 3;
  t.generation = -2;
  t.version = 7;
  t.rate = 1.5;
  t.state = "Up";
  t.since = "2026-11-28T10:00:00Z";
  t.on = true;
  t.scores = {{"f1", 0.5}};
  t.last = Hits{4};
  t.by_kind["A"] = Hits{1};
  t.notes = {{"seen", true}};
  t.history = {"one"};
  return t;
}

TEST(StatusFieldsTest, OneLineGivesTheSchemaTheWriterAndTheReader) {
  struct One {
    int64_t count = 0;
  };
  const StatusFields<One> fields{
      StatusFieldsOf<One>::Count("count", &One::count, "how many")};
  EXPECT_EQ(StatusFieldsSchema(fields, "one").dump(),
            R"({"description":"one","type":"object","properties":)"
            R"({"count":{"description":"how many","type":"integer"}}})");
  EXPECT_EQ(WriteStatusFields(fields, One{5}), json({{"count", 5}}));
  EXPECT_EQ(ReadStatusFields(fields, json({{"count", 6}})).count, 6);
}

TEST(StatusFieldsTest, EveryKindOfLineWritesAndReadsBack) {
  const json written = WriteStatusFields(TinyFields(), Full());
  EXPECT_EQ(written, json::parse(R"j({
      "count": 3, "generation": -2, "version": 7, "rate": 1.5, "state": "Up",
      "since": "2026-11-28T10:00:00Z", "on": true, "scores": {"f1": 0.5},
      "last": {"hits": 4}, "byKind": {"A": {"hits": 1}}, "notes": {"seen": true},
      "history": ["one"]})j"));
  const Tiny read = ReadStatusFields(TinyFields(), written);
  EXPECT_EQ(read.count, 3);
  EXPECT_EQ(read.generation, -2);
  EXPECT_EQ(read.version, 7u);
  EXPECT_EQ(read.rate, 1.5);
  EXPECT_EQ(read.state, "Up");
  EXPECT_EQ(read.since, "2026-11-28T10:00:00Z");
  EXPECT_TRUE(read.on);
  EXPECT_EQ(read.scores, (std::map<std::string, double>{{"f1", 0.5}}));
  ASSERT_TRUE(read.last.has_value());
  EXPECT_EQ(read.last->hits, 4);
  EXPECT_EQ(read.by_kind.at("A").hits, 1);
  EXPECT_EQ(WriteStatusFields(TinyFields(), read), written);
}

// Counts, texts, maps of sections and arrays are written always; the rest
// only when set.
TEST(StatusFieldsTest, WhatIsUnsetIsNotWritten) {
  const json written = WriteStatusFields(TinyFields(), Tiny{});
  EXPECT_EQ(written, json::parse(R"j({"count": 0, "state": "", "byKind": {}, "history": []})j"));
  EXPECT_EQ(WriteStatusFields(TinyFields(), ReadStatusFields(TinyFields(), written)), written);
}

TEST(StatusFieldsTest, AValueOfAnotherTypeReadsAsUnset) {
  const Tiny t = ReadStatusFields(TinyFields(), json::parse(R"j({
      "count": "3", "generation": 1.5, "version": -1, "rate": "fast", "state": 1,
      "since": false, "on": "yes", "scores": {"f1": "x", "f2": 0.25}, "last": {},
      "byKind": {"A": 1, "B": {"hits": 2}}, "notes": [1], "history": {"a": 1},
      "unknown": 1})j"));
  EXPECT_EQ(t.count, 0);
  EXPECT_FALSE(t.generation.has_value());
  EXPECT_FALSE(t.version.has_value());
  EXPECT_FALSE(t.rate.has_value());
  EXPECT_EQ(t.state, "");
  EXPECT_EQ(t.since, "");
  EXPECT_FALSE(t.on);
  EXPECT_EQ(t.scores, (std::map<std::string, double>{{"f2", 0.25}}));
  EXPECT_FALSE(t.last.has_value());
  EXPECT_EQ(t.by_kind.size(), 1u);
  EXPECT_EQ(t.by_kind.at("B").hits, 2);
  EXPECT_EQ(t.notes, json::object());
  EXPECT_EQ(t.history, json::array());
}

TEST(StatusFieldsTest, TheSchemaDescribesEachLineInTableOrder) {
  const ordered_json schema = StatusFieldsSchema(TinyFields(), "tiny");
  const ordered_json& p = schema["properties"];
  std::string keys;
  for (const auto& [key, value] : p.items()) keys += key + " ";
  EXPECT_EQ(keys, "count generation version rate state since on scores last byKind notes history ");
  EXPECT_EQ(p["generation"].dump(),
            R"({"description":"which one","type":"integer","format":"int64"})");
  EXPECT_EQ(p["state"].dump(),
            R"({"description":"where it is","type":"string","enum":["Up","Down"]})");
  EXPECT_EQ(p["since"].dump(),
            R"({"description":"since when","type":"string","format":"date-time"})");
  EXPECT_EQ(p["scores"]["additionalProperties"]["type"], "number");
  EXPECT_EQ(p["last"]["properties"]["hits"]["type"], "integer");
  EXPECT_EQ(p["byKind"]["properties"]["A"]["description"], "kind A");
  EXPECT_EQ(p["history"].dump(),
            R"({"description":"a list","type":"array","items":{"type":"string"}})");
}

}  // namespace
}  // namespace trainingjob
}  // namespace gaptrain
