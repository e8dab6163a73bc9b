#include "operator/testing/managed_fields.h"

#include <gtest/gtest.h>

namespace gaptrain {
namespace kube_testing {
namespace {

using nlohmann::json;

// Pods' containers are keyed by name, owner references by uid.
FieldShape PodShape(const std::vector<std::string>& names) {
  FieldShape s;
  if (names == std::vector<std::string>{"spec", "containers"}) s.list_keys = {"name"};
  if (names == std::vector<std::string>{"metadata", "ownerReferences"}) {
    s.list_keys = {"uid"};
    s.atomic_elements = true;
  }
  return s;
}

const char kNow[] = "2026-11-23T06:33:05Z";
const char kLater[] = "2026-11-23T06:34:00Z";

json Pod(const std::string& command) {
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata",
           {{"name", "p"},
            {"labels", {{"a", "1"}}},
            {"ownerReferences", json::array({{{"uid", "u-1"}, {"kind", "TrainingJob"}, {"name", "j"}}})}}},
          {"spec",
           {{"containers",
             json::array({{{"name", "worker"}, {"image", "gaptrain:dev"}, {"command", json::array({command})}}})}}}};
}

TEST(FieldsV1Test, EncodesSelfEntriesAndRoundTrips) {
  FieldSet set = {{"f:spec"}, {"f:spec", "f:a"}, {"f:metadata", "f:labels", "f:x"},
                  {"f:spec", "f:list", "k:{\"name\":\"w\"}"}, {"f:spec", "f:list", "k:{\"name\":\"w\"}", "f:image"}};
  const json encoded = EncodeFieldsV1(set);
  EXPECT_EQ(encoded, json::parse(R"({"f:metadata":{"f:labels":{"f:x":{}}},
      "f:spec":{".":{},"f:a":{},"f:list":{"k:{\"name\":\"w\"}":{".":{},"f:image":{}}}}})"));
  FieldSet decoded;
  ASSERT_TRUE(DecodeFieldsV1(encoded, &decoded).ok());
  EXPECT_EQ(decoded, set);
  EXPECT_FALSE(DecodeFieldsV1(json::parse(R"({"x:bad":{}})"), &decoded).ok());
  EXPECT_EQ(FieldPathString({"f:spec", "f:containers", "k:{\"name\":\"worker\"}", "f:command"}),
            ".spec.containers[name=\"worker\"].command");
}

TEST(ManagedFieldsTest, AnUpdateOwnsWhatItAddedOrChanged) {
  ManagedFields fields;
  const json before = json::object();
  json after = {{"metadata", {{"name", "j"}, {"labels", {{"team", "a"}}}}},
                {"spec", {{"data", {{"path", "/d"}}}, {"list", json::array({1, 2})}}}};
  fields.RecordUpdate("unknown", "", "gaptrain.io/v1alpha1", kNow, before, after, PodShape);
  ASSERT_EQ(fields.entries().size(), 1u);
  // The recorded shape: "." for maps the update created, none for metadata.
  EXPECT_EQ(EncodeFieldsV1(fields.entries()[0].fields), json::parse(R"({
      "f:metadata":{"f:labels":{".":{},"f:team":{}}},
      "f:spec":{".":{},"f:data":{".":{},"f:path":{}},"f:list":{}}})"));

  // A status writer takes only the fields it changed.
  json with_status = after;
  with_status["status"] = {{"phase", "Running"}};
  fields.RecordUpdate("unknown", "status", "gaptrain.io/v1alpha1", kLater, after, with_status, PodShape);
  ASSERT_EQ(fields.entries().size(), 2u);
  EXPECT_EQ(fields.entries()[1].subresource, "status");
  EXPECT_EQ(EncodeFieldsV1(fields.entries()[1].fields),
            json::parse(R"({"f:status":{".":{},"f:phase":{}}})"));

  // Another manager changing spec.data.path takes it over.
  json changed = with_status;
  changed["spec"]["data"]["path"] = "/e";
  fields.RecordUpdate("kubectl", "", "gaptrain.io/v1alpha1", kLater, with_status, changed, PodShape);
  EXPECT_EQ(fields.entries()[0].fields.count({"f:spec", "f:data", "f:path"}), 0u);
  EXPECT_EQ(fields.entries()[2].fields, (FieldSet{{"f:spec", "f:data", "f:path"}}));

  // Sorted as the server sorts: operation, time, manager.
  const json encoded = fields.Encode();
  ASSERT_EQ(encoded.size(), 3u);
  EXPECT_EQ(encoded[0]["time"], kNow);
  EXPECT_EQ(encoded[1]["manager"], "kubectl");
  EXPECT_EQ(encoded[2]["subresource"], "status");
  ManagedFields decoded;
  ASSERT_TRUE(ManagedFields::Decode(encoded, &decoded).ok());
  EXPECT_TRUE(decoded.SameOwnership(fields));
}

TEST(ManagedFieldsTest, ApplyOwnsTheAppliedFieldsWithKeyedElements) {
  ManagedFields fields;
  json merged;
  const json applied = Pod("--role=trainer");
  ASSERT_TRUE(fields.Apply("op", false, "", "v1", kNow, json::object(), applied, PodShape, &merged).ok());
  EXPECT_EQ(merged, applied);
  ASSERT_EQ(fields.entries().size(), 1u);
  EXPECT_EQ(fields.entries()[0].operation, "Apply");
  EXPECT_EQ(EncodeFieldsV1(fields.entries()[0].fields), json::parse(R"({
      "f:metadata":{"f:labels":{"f:a":{}},"f:ownerReferences":{"k:{\"uid\":\"u-1\"}":{}}},
      "f:spec":{"f:containers":{"k:{\"name\":\"worker\"}":{".":{},"f:command":{},"f:image":{},"f:name":{}}}}})"));
}

TEST(ManagedFieldsTest, ApplyingAnotherManagersFieldConflictsUnlessForced) {
  ManagedFields fields;
  json live;
  ASSERT_TRUE(fields.Apply("op", false, "", "v1", kNow, json::object(), Pod("--role=trainer"), PodShape, &live).ok());
  json merged;
  ApiError e = fields.Apply("someone-else", false, "", "v1", kLater, live, Pod("--role=evaluator"),
                            PodShape, &merged);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.code(), 409);
  EXPECT_EQ(e.message(), "Apply failed with 1 conflict: conflict with \"op\": "
                         ".spec.containers[name=\"worker\"].command");
  ASSERT_EQ(e.causes().size(), 1u);
  EXPECT_EQ(e.causes()[0].reason, "FieldManagerConflict");
  EXPECT_EQ(e.causes()[0].message, "conflict with \"op\"");

  // The same values are shared, not a conflict.
  ASSERT_TRUE(fields.Apply("someone-else", false, "", "v1", kLater, live, Pod("--role=trainer"),
                           PodShape, &merged).ok());
  // Forcing moves the field.
  ASSERT_TRUE(fields.Apply("someone-else", true, "", "v1", kLater, live, Pod("--role=evaluator"),
                           PodShape, &merged).ok());
  EXPECT_EQ(merged["spec"]["containers"][0]["command"][0], "--role=evaluator");
  const FieldPath command = {"f:spec", "f:containers", "k:{\"name\":\"worker\"}", "f:command"};
  for (const auto& e : fields.entries()) {
    EXPECT_EQ(e.fields.count(command), e.manager == "someone-else" ? 1u : 0u) << e.manager;
  }
}

TEST(ManagedFieldsTest, ConflictsWithAnUpdaterNameItsVersionAndTime) {
  ManagedFields fields;
  const json live = {{"spec", {{"replicas", 3}}}};
  fields.RecordUpdate("kubectl-edit", "", "v1", kNow, json::object(), live, PodShape);
  json merged;
  ApiError e = fields.Apply("op", false, "", "v1", kLater, live, json{{"spec", {{"replicas", 4}}}},
                            PodShape, &merged);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.causes()[0].message,
            std::string("conflict with \"kubectl-edit\" using v1 at ") + kNow);
}

TEST(ManagedFieldsTest, FieldsAnApplierDropsAreRemovedUnlessSomeoneElseOwnsThem) {
  ManagedFields fields;
  json live;
  json first = {{"metadata", {{"labels", {{"a", "1"}, {"b", "2"}}}}}, {"spec", {{"x", 1}, {"y", 2}}}};
  ASSERT_TRUE(fields.Apply("op", false, "", "v1", kNow, json::object(), first, PodShape, &live).ok());
  // Another manager updates spec.y to the same... no: changes spec.y, so it owns it.
  json updated = live;
  updated["spec"]["y"] = 3;
  fields.RecordUpdate("other", "", "v1", kLater, live, updated, PodShape);
  live = updated;
  json second = {{"metadata", {{"labels", {{"a", "1"}}}}}, {"spec", {{"x", 1}}}};
  json merged;
  ASSERT_TRUE(fields.Apply("op", false, "", "v1", kLater, live, second, PodShape, &merged).ok());
  EXPECT_EQ(merged["metadata"]["labels"], json({{"a", "1"}}));  // b was only op's
  EXPECT_EQ(merged["spec"], json({{"x", 1}, {"y", 3}}));        // y is other's now
  // Dropping every label removes the emptied map too.
  json third = {{"spec", {{"x", 1}}}};
  json merged_again;
  ASSERT_TRUE(fields.Apply("op", false, "", "v1", kLater, merged, third, PodShape, &merged_again).ok());
  EXPECT_FALSE(merged_again["metadata"].contains("labels"));
}

TEST(ManagedFieldsTest, KeyedListsMergeByKey) {
  ManagedFields fields;
  json live = {{"spec", {{"containers", json::array({{{"name", "a"}, {"image", "1"}, {"defaulted", true}},
                                                     {{"name", "b"}, {"image", "2"}}})}}}};
  fields.RecordUpdate("creator", "", "v1", kNow, json::object(), live, PodShape);
  json merged;
  json applied = {{"spec", {{"containers", json::array({{{"name", "b"}, {"image", "3"}}})}}}};
  ASSERT_TRUE(fields.Apply("op", true, "", "v1", kLater, live, applied, PodShape, &merged).ok());
  EXPECT_EQ(merged["spec"]["containers"],
            json::parse(R"([{"name":"a","image":"1","defaulted":true},{"name":"b","image":"3"}])"));
  fields.ForgetMissingFields(merged);
  EXPECT_FALSE(fields.empty());
}

}  // namespace
}  // namespace kube_testing
}  // namespace gaptrain
