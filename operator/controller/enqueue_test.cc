// Tests object keys and the key mappers: "namespace/name" both ways, bad
// objects and keys refused with the field named, the owner found through
// the controller ownerReference (group and kind must match) or else the
// job label, and the handlers enqueueing old and new owners.

#include "operator/controller/enqueue.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "operator/controller/fake_clock.h"
#include "operator/controller/object_key.h"

namespace gaptrain {
namespace controller {
namespace {

using Keys = std::vector<std::string>;

TEST(ObjectKeyTest, KeysAndSplitsBothWays) {
  std::string key, ns, name;
  ASSERT_TRUE(ObjectKey({{"metadata", {{"name", "mnist"}, {"namespace", "jobs"}}}}, &key).ok());
  EXPECT_EQ(key, "jobs/mnist");
  ASSERT_TRUE(SplitKey(key, &ns, &name).ok());
  EXPECT_EQ(ns, "jobs");
  EXPECT_EQ(name, "mnist");
  ASSERT_TRUE(ObjectKey({{"metadata", {{"name", "node-1"}}}}, &key).ok());
  EXPECT_EQ(key, "node-1");
  ASSERT_TRUE(SplitKey(key, &ns, &name).ok());
  EXPECT_EQ(ns, "");
  EXPECT_EQ(name, "node-1");
  EXPECT_EQ(MakeKey("", "x"), "x");
}

TEST(ObjectKeyTest, RefusesObjectsAndKeysWithoutAName) {
  std::string key, ns, name;
  EXPECT_NE(ObjectKey(nlohmann::json::array(), &key).message().find("object"), std::string::npos);
  EXPECT_NE(ObjectKey({{"kind", "Pod"}}, &key).message().find("metadata"), std::string::npos);
  EXPECT_NE(ObjectKey({{"metadata", {{"name", ""}}}}, &key).message().find("metadata.name"),
            std::string::npos);
  EXPECT_NE(ObjectKey({{"metadata", {{"name", 3}}}}, &key).message().find("metadata.name"),
            std::string::npos);
  EXPECT_NE(ObjectKey({{"metadata", {{"name", "a"}, {"namespace", 1}}}}, &key)
                .message()
                .find("metadata.namespace"),
            std::string::npos);
  for (const char* bad : {"", "/a", "a/", "a/b/c", "/"}) {
    EXPECT_EQ(SplitKey(bad, &ns, &name).code(), Status::Code::kInvalidArgument) << bad;
  }
}

TEST(ObjectKeyTest, ReadsMetadataLeniently) {
  const nlohmann::json pod = {
      {"metadata", {{"name", "p"}, {"resourceVersion", "7"}, {"labels", {{"a", "1"}, {"n", 2}}}}}};
  EXPECT_EQ(ObjectName(pod), "p");
  EXPECT_EQ(ObjectNamespace(pod), "");
  EXPECT_EQ(ObjectResourceVersion(pod), "7");
  bool present = false;
  EXPECT_EQ(ObjectLabel(pod, "a", &present), "1");
  EXPECT_TRUE(present);
  EXPECT_EQ(ObjectLabel(pod, "n", &present), "");
  EXPECT_FALSE(present);
  EXPECT_EQ(ObjectName(nlohmann::json("text")), "");
}

nlohmann::json Child(const nlohmann::json& refs, const std::string& job_label) {
  nlohmann::json pod = {{"metadata", {{"name", "mnist-trainer-0"}, {"namespace", "default"}}}};
  if (!refs.is_null()) pod["metadata"]["ownerReferences"] = refs;
  if (!job_label.empty()) pod["metadata"]["labels"]["gaptrain.io/job-name"] = job_label;
  return pod;
}

nlohmann::json Refs(std::vector<nlohmann::json> refs) { return nlohmann::json(std::move(refs)); }

nlohmann::json Ref(const std::string& api_version, const std::string& kind, const std::string& name,
                   bool controller) {
  return {{"apiVersion", api_version},
          {"kind", kind},
          {"name", name},
          {"uid", "u"},
          {"controller", controller}};
}

TEST(OwnerKeyTest, FindsTheControllerOwnerOfTheRightGroupAndKind) {
  const KeyMapper owner = OwnerKey({"gaptrain.io", "TrainingJob", ""});
  EXPECT_EQ(owner(Child(Refs({Ref("gaptrain.io/v1alpha1", "TrainingJob", "mnist", true)}), "")),
            Keys{"default/mnist"});
  EXPECT_EQ(owner(Child(Refs({Ref("gaptrain.io/v1", "TrainingJob", "later-version", true)}), "")),
            Keys{"default/later-version"})
      << "any version of the group";
  EXPECT_EQ(owner(Child(Refs({Ref("gaptrain.io/v1alpha1", "TrainingJob", "mnist", false)}), "")),
            Keys{})
      << "not the controller";
  EXPECT_EQ(owner(Child(Refs({Ref("other.io/v1alpha1", "TrainingJob", "mnist", true)}), "")),
            Keys{});
  EXPECT_EQ(owner(Child(Refs({Ref("apps/v1", "ReplicaSet", "rs", true),
                              Ref("gaptrain.io/v1alpha1", "TrainingJob", "mnist", true)}),
                        "")),
            Keys{"default/mnist"});
  EXPECT_EQ(owner(Child(nullptr, "mnist")), Keys{}) << "no label fallback configured";
  EXPECT_EQ(owner(nlohmann::json("junk")), Keys{});
}

TEST(OwnerKeyTest, FallsBackToTheLabel) {
  const KeyMapper owner = OwnerKey({"gaptrain.io", "TrainingJob", "gaptrain.io/job-name"});
  EXPECT_EQ(owner(Child(nullptr, "fmnist")), Keys{"default/fmnist"});
  EXPECT_EQ(
      owner(Child(Refs({Ref("gaptrain.io/v1alpha1", "TrainingJob", "mnist", true)}), "fmnist")),
      Keys{"default/mnist"})
      << "the ownerReference wins";
  EXPECT_EQ(owner(Child(nullptr, "")), Keys{});
}

TEST(OwnKeyTest, IsTheObjectsKey) {
  EXPECT_EQ(OwnKey()(Child(nullptr, "")), Keys{"default/mnist-trainer-0"});
  EXPECT_EQ(OwnKey()(nlohmann::json::object()), Keys{});
}

TEST(EnqueueHandlersTest, EnqueueTheKeysOfEveryChange) {
  FakeClock clock;
  WorkQueue::Options options;
  options.clock = &clock;
  WorkQueue queue(options);
  const EventHandlers h =
      EnqueueHandlers(&queue, OwnerKey({"gaptrain.io", "TrainingJob", "gaptrain.io/job-name"}));
  auto drain = [&] {
    Keys keys;
    while (queue.Len() > 0) {
      std::string key;
      queue.Get(&key);
      queue.Done(key);
      keys.push_back(key);
    }
    return keys;
  };
  h.on_add(Child(nullptr, "a"));
  EXPECT_EQ(drain(), Keys{"default/a"});
  h.on_update(Child(nullptr, "a"), Child(nullptr, "b"));  // moved to another job
  EXPECT_EQ(drain(), (Keys{"default/a", "default/b"}));
  h.on_update(Child(nullptr, "b"), Child(nullptr, "b"));
  EXPECT_EQ(drain(), Keys{"default/b"});
  h.on_delete(Child(nullptr, "c"), /*final_state_unknown=*/true);
  EXPECT_EQ(drain(), Keys{"default/c"});
  h.on_add(Child(nullptr, ""));
  EXPECT_EQ(drain(), Keys{});

  // A filter drops the updates it refuses, never adds or deletes.
  const EventHandlers filtered = EnqueueHandlers(
      &queue, OwnKey(), [](const nlohmann::json& old_object, const nlohmann::json& new_object) {
        return old_object["spec"] != new_object["spec"];
      });
  nlohmann::json before = Child(nullptr, "");
  before["spec"] = 1;
  nlohmann::json status_only = before;
  status_only["status"] = "written by the controller";
  filtered.on_update(before, status_only);
  EXPECT_EQ(drain(), Keys{});
  nlohmann::json spec_changed = before;
  spec_changed["spec"] = 2;
  filtered.on_update(before, spec_changed);
  EXPECT_EQ(drain(), Keys{"default/mnist-trainer-0"});
  filtered.on_add(before);
  filtered.on_delete(before, false);
  EXPECT_EQ(drain(), Keys{"default/mnist-trainer-0"});
}

// ContentChanged: the server's bookkeeping alone is no change; anything
// else in metadata, spec or status is, and so is a field added or gone.
TEST(ContentChangedTest, IgnoresOnlyTheServersBookkeeping) {
  const nlohmann::json pod = {
      {"metadata",
       {{"name", "p"}, {"resourceVersion", "1"}, {"managedFields", {{{"manager", "a"}}}}}},
      {"status", {{"phase", "Pending"}}}};
  nlohmann::json bookkeeping = pod;
  bookkeeping["metadata"]["resourceVersion"] = "2";
  bookkeeping["metadata"]["managedFields"] = {{{"manager", "b"}}};
  EXPECT_FALSE(ContentChanged(pod, bookkeeping));
  nlohmann::json trimmed = pod;
  trimmed["metadata"].erase("managedFields");
  EXPECT_FALSE(ContentChanged(pod, trimmed));

  nlohmann::json status = bookkeeping;
  status["status"]["phase"] = "Running";
  EXPECT_TRUE(ContentChanged(pod, status));
  nlohmann::json labelled = pod;
  labelled["metadata"]["labels"] = {{"a", "b"}};
  EXPECT_TRUE(ContentChanged(pod, labelled));
  EXPECT_TRUE(ContentChanged(labelled, pod));
  nlohmann::json no_status = pod;
  no_status.erase("status");
  EXPECT_TRUE(ContentChanged(pod, no_status));
  nlohmann::json spec = pod;
  spec["spec"] = {{"nodeName", "n"}};
  no_status["spec"] = {{"nodeName", "n"}};
  EXPECT_TRUE(ContentChanged(spec, no_status));  // same size, another key
  EXPECT_TRUE(ContentChanged(pod, nlohmann::json("not an object")));
  EXPECT_FALSE(ContentChanged(nlohmann::json(1), nlohmann::json(1)));
}

}  // namespace
}  // namespace controller
}  // namespace gaptrain
