// TrimCachedObject and TrimCachedPod on objects as the API server returns
// them. That the reconcile plans the same from trimmed objects is
// reconcile_test's: its Cluster hands every reconcile its children and job
// trimmed, as the operator's caches do.

#include "operator/trainingjob/cached_fields.h"

#include <gtest/gtest.h>

#include "operator/trainingjob/object_fields.h"
#include "operator/trainingjob/pod_state.h"

namespace gaptrain {
namespace trainingjob {
namespace {

using nlohmann::json;

// A trainer pod as kube-apiserver returns it (cut down from a real one).
json ServerPod() {
  return json::parse(R"j({
    "apiVersion": "v1", "kind": "Pod",
    "metadata": {
      "name": "mnist-trainer-0", "namespace": "research", "uid": "u1", "resourceVersion": "7",
      "labels": {"gaptrain.io/job-name": "mnist", "gaptrain.io/replica-type": "trainer",
                 "gaptrain.io/replica-index": "0"},
      "annotations": {"gaptrain.io/output": "x"},
      "ownerReferences": [{"apiVersion": "gaptrain.io/v1alpha1", "kind": "TrainingJob",
                           "name": "mnist", "uid": "job-uid", "controller": true}],
      "managedFields": [{"manager": "gaptrain-operator", "operation": "Apply",
                         "fieldsV1": {"f:spec": {"f:containers": {}}}}]},
    "spec": {
      "containers": [{"name": "gaptrain", "image": "ghcr.io/gaptrain/gaptrain:1",
                      "args": ["worker", "--job", "/etc/gaptrain/job.yaml"],
                      "env": [{"name": "A", "value": "b"}],
                      "resources": {"requests": {"cpu": "500m"}}},
                     {"name": "sidecar", "image": "busybox"}],
      "volumes": [{"name": "job", "configMap": {"name": "mnist-job"}},
                  {"name": "tls", "secret": {"secretName": "mnist-tls", "defaultMode": 420}}],
      "nodeName": "node-1",
      "tolerations": [{"key": "spot", "operator": "Exists"}],
      "affinity": {"nodeAffinity": {}},
      "securityContext": {"runAsUser": 65532}},
    "status": {"phase": "Running", "podIP": "10.0.0.7",
               "conditions": [{"type": "Ready", "status": "True"}],
               "containerStatuses": [{"name": "gaptrain", "ready": true,
                                      "state": {"running": {}}}]}})j");
}

TEST(CachedFieldsTest, PodKeepsWhatTheReconcileReads) {
  json pod = ServerPod();
  TrimCachedPod(&pod);
  EXPECT_EQ(pod["spec"], json::parse(R"j({
    "nodeName": "node-1",
    "containers": [{"name": "gaptrain", "image": "ghcr.io/gaptrain/gaptrain:1"},
                   {"name": "sidecar", "image": "busybox"}],
    "volumes": [{"name": "tls", "secret": {"secretName": "mnist-tls"}}]})j"));
  EXPECT_FALSE(pod["metadata"].contains("managedFields"));
  json whole = ServerPod();
  whole["metadata"].erase("managedFields");
  EXPECT_EQ(pod["metadata"], whole["metadata"]);
  EXPECT_EQ(pod["status"], whole["status"]);
  EXPECT_EQ(pod["apiVersion"], "v1");

  // What the reconcile reads of a pod is the same.
  const PodState a = ReadPodState(ServerPod(), false), b = ReadPodState(pod, false);
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.uid, b.uid);
  EXPECT_EQ(a.type, b.type);
  EXPECT_EQ(a.index, b.index);
  EXPECT_TRUE(b.running() && b.ready);
  EXPECT_TRUE(IsControlledBy(pod, "job-uid"));

  // Idempotent.
  json again = pod;
  TrimCachedPod(&again);
  EXPECT_EQ(again, pod);
}

TEST(CachedFieldsTest, PodWithoutSecretVolumesOrNodeKeepsNoneOfThem) {
  json pod = ServerPod();
  pod["spec"].erase("nodeName");
  pod["spec"]["volumes"] = json::array({{{"name", "job"}, {"configMap", {{"name", "c"}}}}});
  TrimCachedPod(&pod);
  EXPECT_FALSE(pod["spec"].contains("nodeName"));
  EXPECT_FALSE(pod["spec"].contains("volumes"));
  EXPECT_EQ(pod["spec"]["containers"].size(), 2u);
}

TEST(CachedFieldsTest, ObjectDropsOnlyManagedFieldsAndTheLastApplied) {
  json job = {{"apiVersion", "gaptrain.io/v1alpha1"},
              {"kind", "TrainingJob"},
              {"metadata",
               {{"name", "mnist"},
                {"resourceVersion", "3"},
                {"managedFields", json::array({{{"manager", "kubectl"}}})},
                {"annotations",
                 {{kLastAppliedAnnotation, "{\"spec\":{}}"}, {"gaptrain.io/image", "i"}}}}},
              {"spec", {{"workers", {{"replicas", 4}}}}},
              {"status", {{"phase", "Pending"}}}};
  json trimmed = job;
  TrimCachedObject(&trimmed);
  json expected = job;
  expected["metadata"].erase("managedFields");
  expected["metadata"]["annotations"].erase(kLastAppliedAnnotation);
  EXPECT_EQ(trimmed, expected);

  // An annotation map left empty goes; a service's spec stays whole.
  json only_last_applied = {{"metadata", {{"annotations", {{kLastAppliedAnnotation, "{}"}}}}},
                            {"spec", {{"ports", json::array({{{"port", 7070}}})}}}};
  TrimCachedObject(&only_last_applied);
  EXPECT_EQ(only_last_applied,
            json({{"metadata", json::object()}, {"spec", {{"ports", json::array({{{"port", 7070}}})}}}}));
}

TEST(CachedFieldsTest, LeavesWhatIsNotAnObjectAlone) {
  for (json odd : {json(), json(1), json("pod"), json::array({1}),
                   json({{"metadata", "x"}, {"spec", 1}}),
                   json({{"metadata", {{"annotations", "x"}}}, {"spec", {{"containers", 1}}}})}) {
    json object = odd;
    TrimCachedObject(&object);
    EXPECT_EQ(object, odd);
    TrimCachedPod(&object);
    if (odd.is_object() && odd.contains("spec") && odd["spec"].is_object()) {
      EXPECT_FALSE(object["spec"].contains("containers")) << object.dump();
    } else {
      EXPECT_EQ(object, odd);
    }
  }
}

}  // namespace
}  // namespace trainingjob
}  // namespace gaptrain
