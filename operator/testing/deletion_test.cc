// Deletion as the real server does it: graceful deletion of running pods,
// eviction, preconditions, finalizers, and the garbage collector with each
// propagation policy.

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <string>

#include "operator/testing/server_test_base.h"

namespace gaptrain {
namespace kube_testing {
namespace {

using nlohmann::json;

class DeletionTest : public FakeApiServerTest {
 protected:
  // A TrainingJob and its uid.
  std::string CreateJob(const std::string& name) {
    TestResponse r = client_->Post(kJobs, TrainingJobBody(name));
    EXPECT_EQ(r.status, 201) << r.body;
    return r.json["metadata"]["uid"];
  }
  // A pod owned by the job `owner` (uid); blocking owner deletion.
  void CreateOwnedPod(const std::string& name, const std::string& owner, const std::string& uid,
                      const std::string& node = "", bool block = true) {
    json pod = PodBody(name, json::object(), node);
    pod["metadata"]["ownerReferences"] = json::array(
        {{{"apiVersion", "gaptrain.io/v1alpha1"}, {"kind", "TrainingJob"}, {"name", owner},
          {"uid", uid}, {"controller", true}, {"blockOwnerDeletion", block}}});
    TestResponse r = client_->Post(kPods, pod);
    EXPECT_EQ(r.status, 201) << r.body;
  }
  bool Exists(const std::string& resource, const std::string& name) {
    json ignored;
    return server_->Get(resource, "default", name, &ignored).ok();
  }
};

TEST_F(DeletionTest, ARunningPodIsDeletedGracefullyUntilTheKubeletConfirms) {
  ASSERT_EQ(client_->Post(kPods, PodBody("p", json::object(), "node-1")).status, 201);
  std::unique_ptr<WatchReader> watch =
      OpenWatch(std::string(kPods) + "?watch=1&resourceVersion=" + std::to_string(server_->resource_version()));
  TestResponse deleting = client_->Delete(PodPath("p"));
  ASSERT_EQ(deleting.status, 200);
  EXPECT_EQ(deleting.json["kind"], "Pod");
  EXPECT_EQ(deleting.json["metadata"]["deletionGracePeriodSeconds"], 30);
  EXPECT_TRUE(deleting.json["metadata"].contains("deletionTimestamp"));
  EXPECT_TRUE(Exists("pods", "p"));
  json event;
  ASSERT_TRUE(watch->Next(kWait, &event).ok());
  EXPECT_EQ(event["type"], "MODIFIED");

  // A shorter grace period wins; a longer one does not.
  TestResponse shorter = client_->Delete(PodPath("p") + "?gracePeriodSeconds=5");
  EXPECT_EQ(shorter.json["metadata"]["deletionGracePeriodSeconds"], 5);
  TestResponse longer = client_->Delete(PodPath("p") + "?gracePeriodSeconds=60");
  EXPECT_EQ(longer.json["metadata"]["deletionGracePeriodSeconds"], 5);
  EXPECT_EQ(longer.json["metadata"]["resourceVersion"], shorter.json["metadata"]["resourceVersion"]);
  ASSERT_TRUE(watch->Next(kWait, &event).ok());
  EXPECT_EQ(event["type"], "MODIFIED");

  // The kubelet's final delete, with the uid as a precondition.
  const std::string uid = deleting.json["metadata"]["uid"];
  TestResponse wrong = client_->Delete(PodPath("p"), R"({"gracePeriodSeconds":0,"preconditions":{"uid":"x"}})");
  EXPECT_EQ(wrong.status, 409);
  EXPECT_EQ(wrong.json["message"],
            "Operation cannot be fulfilled on pods \"p\": Precondition failed: UID in precondition: "
            "x, UID in object meta: " + uid);
  TestResponse gone = client_->Delete(PodPath("p"), json({{"gracePeriodSeconds", 0}, {"preconditions", {{"uid", uid}}}}).dump());
  ASSERT_EQ(gone.status, 200);
  EXPECT_FALSE(Exists("pods", "p"));
  ASSERT_TRUE(watch->Next(kWait, &event).ok());
  EXPECT_EQ(event["type"], "DELETED");
  EXPECT_EQ(event["object"]["metadata"]["deletionGracePeriodSeconds"], 0);
}

TEST_F(DeletionTest, PodsNoNodeRunsAndFinishedPodsGoAtOnce) {
  ASSERT_EQ(client_->Post(kPods, PodBody("pending")).status, 201);
  TestResponse r = client_->Delete(PodPath("pending"));
  EXPECT_EQ(r.json["metadata"]["deletionGracePeriodSeconds"], 0);
  EXPECT_FALSE(Exists("pods", "pending"));

  ASSERT_EQ(client_->Post(kPods, PodBody("done", json::object(), "node-1")).status, 201);
  ASSERT_TRUE(server_->Update("pods", "default", "done", [](json* pod) {
    (*pod)["status"]["phase"] = "Succeeded";
  }).ok());
  client_->Delete(PodPath("done"));
  EXPECT_FALSE(Exists("pods", "done"));
}

TEST_F(DeletionTest, EvictionMarksARunningPodAndDeletesItGracefully) {
  ASSERT_EQ(client_->Post(kPods, PodBody("p", json::object(), "node-1")).status, 201);
  TestResponse evicted = client_->Send("POST", PodPath("p") + "/eviction",
                                       R"({"apiVersion":"policy/v1","kind":"Eviction","metadata":{"name":"p","namespace":"default"}})");
  ASSERT_EQ(evicted.status, 201) << evicted.body;
  TestResponse pod = client_->Get(PodPath("p"));
  ASSERT_EQ(pod.status, 200);
  EXPECT_TRUE(pod.json["metadata"].contains("deletionTimestamp"));
  const json& condition = pod.json["status"]["conditions"][0];
  EXPECT_EQ(condition["type"], "DisruptionTarget");
  EXPECT_EQ(condition["reason"], "EvictionByEvictionAPI");
  EXPECT_EQ(client_->Send("POST", PodPath("nope") + "/eviction",
                          R"({"apiVersion":"policy/v1","kind":"Eviction","metadata":{"name":"nope"}})").status,
            404);
  EXPECT_EQ(client_->Send("POST", PodPath("p") + "/eviction",
                          R"({"apiVersion":"policy/v1","kind":"Eviction","metadata":{"name":"q"}})").status,
            400);
}

TEST_F(DeletionTest, FinalizersHoldAnObjectUntilTheyAreRemoved) {
  json job = TrainingJobBody("mnist");
  job["metadata"]["finalizers"] = {"gaptrain.io/cleanup"};
  ASSERT_EQ(client_->Post(kJobs, job).status, 201);
  TestResponse deleting = client_->Delete(JobPath("mnist"));
  ASSERT_EQ(deleting.status, 200);
  EXPECT_EQ(deleting.json["kind"], "TrainingJob");
  EXPECT_TRUE(deleting.json["metadata"].contains("deletionTimestamp"));
  EXPECT_EQ(deleting.json["metadata"]["generation"], 2);
  EXPECT_TRUE(Exists("trainingjobs", "mnist"));
  // No new finalizers on an object being deleted.
  TestResponse added = client_->MergePatch(
      JobPath("mnist"), {{"metadata", {{"finalizers", {"gaptrain.io/cleanup", "gaptrain.io/other"}}}}});
  EXPECT_EQ(added.status, 422);
  EXPECT_EQ(added.json["details"]["causes"][0]["field"], "metadata.finalizers");
  // Removing the last finalizer completes the deletion.
  TestResponse released = client_->MergePatch(JobPath("mnist"), {{"metadata", {{"finalizers", nullptr}}}});
  EXPECT_EQ(released.status, 200) << released.body;
  EXPECT_FALSE(Exists("trainingjobs", "mnist"));
}

TEST_F(DeletionTest, BackgroundDeletionCollectsDependentsAfterTheOwner) {
  const std::string uid = CreateJob("mnist");
  CreateOwnedPod("w0", "mnist", uid);
  CreateOwnedPod("w1", "mnist", uid, "node-1");
  std::unique_ptr<WatchReader> watch =
      OpenWatch("/api/v1/pods?watch=1&resourceVersion=" + std::to_string(server_->resource_version()));
  TestResponse deleted = client_->Delete(JobPath("mnist"));
  ASSERT_EQ(deleted.status, 200);
  EXPECT_EQ(deleted.json["kind"], "Status");
  EXPECT_FALSE(Exists("trainingjobs", "mnist"));
  EXPECT_FALSE(Exists("pods", "w0"));
  // The running pod terminates gracefully.
  json w1;
  ASSERT_TRUE(server_->Get("pods", "default", "w1", &w1).ok());
  EXPECT_TRUE(w1["metadata"].contains("deletionTimestamp"));
  json event;
  ASSERT_TRUE(watch->Next(kWait, &event).ok());
  EXPECT_EQ(event["type"], "DELETED");
  EXPECT_EQ(event["object"]["metadata"]["name"], "w0");
}

TEST_F(DeletionTest, ForegroundDeletionWaitsForBlockingDependents) {
  const std::string uid = CreateJob("mnist");
  CreateOwnedPod("w0", "mnist", uid, "node-1");
  CreateOwnedPod("w1", "mnist", uid, "", /*block=*/false);
  TestResponse deleting = client_->Delete(JobPath("mnist"), R"({"propagationPolicy":"Foreground"})");
  ASSERT_EQ(deleting.status, 200);
  EXPECT_EQ(deleting.json["metadata"]["finalizers"], json::array({"foregroundDeletion"}));
  EXPECT_EQ(deleting.json["metadata"]["deletionGracePeriodSeconds"], 0);
  EXPECT_FALSE(Exists("pods", "w1"));
  // w0 runs on a node: it terminates, and the job waits for it.
  EXPECT_TRUE(Exists("pods", "w0"));
  EXPECT_TRUE(Exists("trainingjobs", "mnist"));
  ASSERT_TRUE(server_->Delete("pods", "default", "w0", 0).ok());  // the kubelet confirms
  EXPECT_TRUE(server_->WaitForObject("trainingjobs", "default", "mnist",
                                     [](const json* job) { return job == nullptr; }, kWait));
}

TEST_F(DeletionTest, ReleasingABlockingDependentLetsAForegroundOwnerGo) {
  const std::string uid = CreateJob("mnist");
  CreateOwnedPod("w0", "mnist", uid, "node-1");
  ASSERT_EQ(client_->Delete(JobPath("mnist") + "?propagationPolicy=Foreground").status, 200);
  EXPECT_TRUE(Exists("trainingjobs", "mnist"));
  // The dependent stops blocking (it is terminating on its node meanwhile).
  TestResponse released = client_->MergePatch(PodPath("w0"), {{"metadata", {{"ownerReferences", nullptr}}}});
  ASSERT_EQ(released.status, 200) << released.body;
  EXPECT_FALSE(Exists("trainingjobs", "mnist"));
}

TEST_F(DeletionTest, OrphanDeletionKeepsTheDependents) {
  const std::string uid = CreateJob("mnist");
  CreateOwnedPod("w0", "mnist", uid);
  TestResponse deleted = client_->Delete(JobPath("mnist") + "?propagationPolicy=Orphan");
  ASSERT_EQ(deleted.status, 200);
  EXPECT_FALSE(Exists("trainingjobs", "mnist"));
  json pod;
  ASSERT_TRUE(server_->Get("pods", "default", "w0", &pod).ok());
  EXPECT_FALSE(pod["metadata"].contains("ownerReferences"));
  EXPECT_EQ(client_->Delete(JobPath("x") + "?propagationPolicy=Sideways").status, 422);
}

TEST_F(DeletionTest, ADependentWithAnotherOwnerOnlyLosesTheReference) {
  const std::string a = CreateJob("a");
  const std::string b = CreateJob("b");
  json pod = PodBody("shared");
  pod["metadata"]["ownerReferences"] = json::array(
      {{{"apiVersion", "gaptrain.io/v1alpha1"}, {"kind", "TrainingJob"}, {"name", "a"}, {"uid", a}},
       {{"apiVersion", "gaptrain.io/v1alpha1"}, {"kind", "TrainingJob"}, {"name", "b"}, {"uid", b}}});
  ASSERT_EQ(client_->Post(kPods, pod).status, 201);
  client_->Delete(JobPath("a"));
  json shared;
  ASSERT_TRUE(server_->Get("pods", "default", "shared", &shared).ok());
  ASSERT_EQ(shared["metadata"]["ownerReferences"].size(), 1u);
  EXPECT_EQ(shared["metadata"]["ownerReferences"][0]["uid"], b);
  client_->Delete(JobPath("b"));
  EXPECT_FALSE(Exists("pods", "shared"));
}

TEST_F(DeletionTest, ObjectsWhoseOwnerDoesNotExistAreCollected) {
  CreateJob("mnist");
  // The right name, the wrong uid: the owner is gone (a re-created job).
  CreateOwnedPod("stale", "mnist", "00000000-0000-4000-8000-000000000000");
  EXPECT_FALSE(Exists("pods", "stale"));
}

}  // namespace
}  // namespace kube_testing
}  // namespace gaptrain
