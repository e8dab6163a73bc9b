// The API's semantics over HTTP: optimistic concurrency, status and scale
// isolation, generation, patches, server-side apply, the built-in kinds'
// rules, selectors, pagination, CRDs, Tables and discovery.

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <set>
#include <string>

#include "operator/testing/server_test_base.h"

namespace gaptrain {
namespace kube_testing {
namespace {

using nlohmann::json;

std::string Rv(const TestResponse& r) { return r.json["metadata"]["resourceVersion"]; }

class ApiSemanticsTest : public FakeApiServerTest {};

TEST_F(ApiSemanticsTest, ResourceVersionsAreOneIncreasingCounter) {
  TestResponse a = client_->Post(kJobs, TrainingJobBody("a"));
  TestResponse b = client_->Post(kPods, PodBody("b"));
  ASSERT_EQ(a.status, 201);
  ASSERT_EQ(b.status, 201);
  EXPECT_EQ(std::stoull(Rv(b)), std::stoull(Rv(a)) + 1);
  EXPECT_EQ(server_->resource_version(), std::stoull(Rv(b)));
  TestResponse list = client_->Get(kPods);
  EXPECT_EQ(list.json["metadata"]["resourceVersion"], Rv(b));
}

TEST_F(ApiSemanticsTest, UpdatesNeedTheCurrentResourceVersion) {
  TestResponse created = client_->Post(kJobs, TrainingJobBody("mnist"));
  json job = created.json;
  job["spec"]["workers"]["replicas"] = 5;
  TestResponse updated = client_->Put(JobPath("mnist"), job);
  ASSERT_EQ(updated.status, 200) << updated.body;
  EXPECT_EQ(updated.json["metadata"]["generation"], 2);
  // The same stale body again: 409.
  TestResponse stale = client_->Put(JobPath("mnist"), job);
  EXPECT_EQ(stale.status, 409);
  EXPECT_EQ(stale.json["reason"], "Conflict");
  // A custom resource cannot be updated unconditionally.
  job["metadata"].erase("resourceVersion");
  TestResponse unconditional = client_->Put(JobPath("mnist"), job);
  EXPECT_EQ(unconditional.status, 422);
  EXPECT_EQ(unconditional.json["details"]["causes"][0]["message"],
            "Invalid value: 0x0: must be specified for an update");
  // A built-in kind can.
  TestResponse pod = client_->Post(kPods, PodBody("p"));
  json labelled = pod.json;
  labelled["metadata"].erase("resourceVersion");
  labelled["metadata"]["labels"] = {{"x", "y"}};
  EXPECT_EQ(client_->Put(PodPath("p"), labelled).status, 200);
  // A PUT of something that does not exist is a 404.
  json ghost = TrainingJobBody("ghost");
  ghost["metadata"]["resourceVersion"] = "1";
  EXPECT_EQ(client_->Put(JobPath("ghost"), ghost).status, 404);
}

TEST_F(ApiSemanticsTest, NamesInTheBodyMustMatchTheUrl) {
  client_->Post(kJobs, TrainingJobBody("mnist"));
  json other = TrainingJobBody("other");
  other["metadata"]["resourceVersion"] = "1";
  TestResponse r = client_->Put(JobPath("mnist"), other);
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.json["message"], "the name of the object (other) does not match the name on the URL (mnist)");
  json elsewhere = TrainingJobBody("x");
  elsewhere["metadata"]["namespace"] = "prod";
  r = client_->Post(kJobs, elsewhere);
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.json["message"],
            "the namespace of the provided object does not match the namespace sent on the request");
  json wrong_kind = TrainingJobBody("x");
  wrong_kind["apiVersion"] = "gaptrain.io/v1";
  r = client_->Post(kJobs, wrong_kind);
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.json["message"], "the API version in the data (gaptrain.io/v1) does not match the "
                               "expected API version (gaptrain.io/v1alpha1)");
}

TEST_F(ApiSemanticsTest, MainResourceWritesIgnoreStatusAndStatusWritesIgnoreTheRest) {
  json job = TrainingJobBody("mnist");
  job["status"] = {{"phase", "Running"}};
  TestResponse created = client_->Post(kJobs, job);
  EXPECT_FALSE(created.json.contains("status"));  // dropped on create

  TestResponse status = client_->Send(
      "PUT", JobPath("mnist") + "/status",
      json({{"apiVersion", "gaptrain.io/v1alpha1"},
            {"kind", "TrainingJob"},
            {"metadata", {{"name", "mnist"}, {"resourceVersion", Rv(created)}, {"labels", {{"new", "label"}}}}},
            {"spec", {{"workers", {{"replicas", 9}}}}},
            {"status", {{"phase", "Running"}}}})
          .dump());
  ASSERT_EQ(status.status, 200) << status.body;
  EXPECT_EQ(status.json["status"]["phase"], "Running");
  EXPECT_EQ(status.json["spec"]["workers"]["replicas"], 4);
  EXPECT_FALSE(status.json["metadata"]["labels"].contains("new"));
  EXPECT_EQ(status.json["metadata"]["generation"], 1);

  json main = status.json;
  main["status"]["phase"] = "Failed";
  main["spec"]["workers"]["replicas"] = 2;
  TestResponse updated = client_->Put(JobPath("mnist"), main);
  ASSERT_EQ(updated.status, 200);
  EXPECT_EQ(updated.json["status"]["phase"], "Running");
  EXPECT_EQ(updated.json["spec"]["workers"]["replicas"], 2);
  EXPECT_EQ(updated.json["metadata"]["generation"], 2);

  // A status patch that changes nothing writes nothing.
  TestResponse same = client_->MergePatch(JobPath("mnist") + "/status", {{"status", {{"phase", "Running"}}}});
  EXPECT_EQ(Rv(same), Rv(updated));
}

TEST_F(ApiSemanticsTest, ScaleMapsToTheCrdReplicaPaths) {
  client_->Post(kJobs, TrainingJobBody("mnist", 3));
  ASSERT_EQ(client_->MergePatch(JobPath("mnist") + "/status",
                                {{"status", {{"workers", {{"active", 2}, {"selector", "a=b"}}}}}})
                .status,
            200);
  TestResponse scale = client_->Get(JobPath("mnist") + "/scale");
  ASSERT_EQ(scale.status, 200);
  EXPECT_EQ(scale.json["spec"]["replicas"], 3);
  EXPECT_EQ(scale.json["status"], json({{"replicas", 2}, {"selector", "a=b"}}));
  TestResponse patched = client_->MergePatch(JobPath("mnist") + "/scale", {{"spec", {{"replicas", 5}}}});
  ASSERT_EQ(patched.status, 200) << patched.body;
  EXPECT_EQ(patched.json["spec"]["replicas"], 5);
  json job;
  ASSERT_TRUE(server_->Get("trainingjobs", "default", "mnist", &job).ok());
  EXPECT_EQ(job["spec"]["workers"]["replicas"], 5);
  EXPECT_EQ(job["metadata"]["generation"], 2);
  // Below the schema's minimum: the custom resource's own 422.
  TestResponse zero = client_->MergePatch(JobPath("mnist") + "/scale", {{"spec", {{"replicas", 0}}}});
  EXPECT_EQ(zero.status, 422);
  EXPECT_EQ(zero.json["details"]["causes"][0]["field"], "spec.workers.replicas");
  TestResponse negative = client_->Send(
      "PUT", JobPath("mnist") + "/scale",
      R"({"apiVersion":"autoscaling/v1","kind":"Scale","metadata":{"name":"mnist"},"spec":{"replicas":-1}})");
  EXPECT_EQ(negative.status, 422);
  EXPECT_EQ(negative.json["message"], "Scale.autoscaling \"mnist\" is invalid: spec.replicas: "
                                      "Invalid value: -1: must be greater than or equal to 0");
  TestResponse stale = client_->Send(
      "PUT", JobPath("mnist") + "/scale",
      R"({"apiVersion":"autoscaling/v1","kind":"Scale","metadata":{"name":"mnist","resourceVersion":"1"},"spec":{"replicas":2}})");
  EXPECT_EQ(stale.status, 409);
  // Pods have no scale subresource.
  client_->Post(kPods, PodBody("p"));
  EXPECT_EQ(client_->Get(PodPath("p") + "/scale").status, 404);
}

TEST_F(ApiSemanticsTest, MergeAndJsonPatches) {
  client_->Post(kJobs, TrainingJobBody("mnist"));
  TestResponse merged = client_->MergePatch(
      JobPath("mnist"), {{"metadata", {{"labels", {{"team", nullptr}, {"tier", "gold"}}}}}});
  ASSERT_EQ(merged.status, 200);
  EXPECT_EQ(merged.json["metadata"]["labels"], json({{"tier", "gold"}}));
  TestResponse patched = client_->Send(
      "PATCH", JobPath("mnist"),
      R"([{"op":"test","path":"/spec/workers/replicas","value":4},{"op":"replace","path":"/spec/workers/replicas","value":7}])",
      "application/json-patch+json");
  ASSERT_EQ(patched.status, 200) << patched.body;
  EXPECT_EQ(patched.json["spec"]["workers"]["replicas"], 7);
  TestResponse failed = client_->Send("PATCH", JobPath("mnist"),
                                      R"([{"op":"test","path":"/spec/workers/replicas","value":1}])",
                                      "application/json-patch+json");
  EXPECT_EQ(failed.status, 422);
  TestResponse strategic = client_->Send("PATCH", JobPath("mnist"), "{}",
                                         "application/strategic-merge-patch+json");
  EXPECT_EQ(strategic.status, 415);
  EXPECT_EQ(strategic.json["reason"], "UnsupportedMediaType");
  // A patch that makes the object invalid is refused.
  TestResponse invalid = client_->MergePatch(JobPath("mnist"), {{"spec", {{"data", {{"path", ""}}}}}});
  EXPECT_EQ(invalid.status, 422);
  // A patch carrying an old resourceVersion is a precondition.
  TestResponse stale = client_->MergePatch(JobPath("mnist"), {{"metadata", {{"resourceVersion", "1"}}}});
  EXPECT_EQ(stale.status, 409);
  EXPECT_EQ(client_->MergePatch(JobPath("nope"), json::object()).status, 404);
  EXPECT_EQ(client_->MergePatch(JobPath("mnist") + "?force=true", json::object()).status, 422);
}

TEST_F(ApiSemanticsTest, ServerSideApplyCreatesUpdatesAndIsANoOpWhenUnchanged) {
  const std::string v1 =
      "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  labels: {a: '1'}\n"
      "data:\n  x: '1'\n  y: '2'\n";
  TestResponse created = client_->Apply("/api/v1/namespaces/default/configmaps/settings?fieldManager=op", v1);
  ASSERT_EQ(created.status, 201) << created.body;
  TestResponse again = client_->Apply("/api/v1/namespaces/default/configmaps/settings?fieldManager=op", v1);
  EXPECT_EQ(again.status, 200);
  EXPECT_EQ(Rv(again), Rv(created));
  EXPECT_EQ(again.json["metadata"]["managedFields"], created.json["metadata"]["managedFields"]);

  // Dropping y from the configuration removes it.
  const std::string v2 =
      "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  labels: {a: '1'}\n"
      "data:\n  x: '1'\n";
  TestResponse dropped = client_->Apply("/api/v1/namespaces/default/configmaps/settings?fieldManager=op", v2);
  ASSERT_EQ(dropped.status, 200);
  EXPECT_EQ(dropped.json["data"], json({{"x", "1"}}));

  // Another manager's value for x conflicts; force takes it over.
  const std::string theirs =
      "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  x: '9'\n";
  TestResponse conflict = client_->Apply("/api/v1/namespaces/default/configmaps/settings?fieldManager=other", theirs);
  EXPECT_EQ(conflict.status, 409);
  EXPECT_EQ(conflict.json["message"], "Apply failed with 1 conflict: conflict with \"op\": .data.x");
  TestResponse forced = client_->Apply("/api/v1/namespaces/default/configmaps/settings?fieldManager=other&force=true", theirs);
  ASSERT_EQ(forced.status, 200);
  EXPECT_EQ(forced.json["data"]["x"], "9");
  // Now op's configuration conflicts with other.
  conflict = client_->Apply("/api/v1/namespaces/default/configmaps/settings?fieldManager=op", v2);
  EXPECT_EQ(conflict.status, 409);
  EXPECT_EQ(conflict.json["details"]["causes"][0]["message"], "conflict with \"other\"");

  // Apply needs a field manager; a PUT by someone else is an update manager.
  EXPECT_EQ(client_->Apply("/api/v1/namespaces/default/configmaps/settings", v2).status, 422);
  EXPECT_EQ(client_->Apply("/api/v1/namespaces/default/configmaps/settings?fieldManager=op", "a: [").status, 400);
  EXPECT_EQ(client_->Apply("/api/v1/namespaces/default/configmaps/other?fieldManager=op", v2).status, 400);
}

TEST_F(ApiSemanticsTest, ApplyToACustomResourceKeepsStatusAndPrunes) {
  const std::string job =
      "apiVersion: gaptrain.io/v1alpha1\nkind: TrainingJob\nmetadata:\n  name: mnist\n"
      "spec:\n  data: {path: /data}\n  training: {epochs: 2}\n  bogus: 1\nstatus:\n  phase: X\n";
  TestResponse created = client_->Apply(JobPath("mnist") + "?fieldManager=op", job);
  ASSERT_EQ(created.status, 201) << created.body;
  EXPECT_FALSE(created.json.contains("status"));
  EXPECT_FALSE(created.json["spec"].contains("bogus"));
  EXPECT_EQ(created.Header("Warning"), "299 - \"unknown field \\\"spec.bogus\\\"\"");
  EXPECT_EQ(created.json["spec"]["training"]["batchSize"], 128);  // defaulted
  EXPECT_FALSE(created.json["spec"].contains("workers"));  // no parent, no defaults
  ASSERT_EQ(client_->MergePatch(JobPath("mnist") + "/status", {{"status", {{"phase", "Running"}}}}).status, 200);
  TestResponse again = client_->Apply(JobPath("mnist") + "?fieldManager=op", job);
  EXPECT_EQ(again.status, 200);
  EXPECT_EQ(again.json["status"]["phase"], "Running");
  EXPECT_EQ(again.json["metadata"]["generation"], 1);
  // Applying status through the status subresource.
  TestResponse status = client_->Apply(
      JobPath("mnist") + "/status?fieldManager=op-status",
      "apiVersion: gaptrain.io/v1alpha1\nkind: TrainingJob\nmetadata:\n  name: mnist\n"
      "status:\n  phase: Succeeded\n");
  ASSERT_EQ(status.status, 409) << status.body;  // the patch above owns phase
  status = client_->Apply(
      JobPath("mnist") + "/status?fieldManager=op-status&force=true",
      "apiVersion: gaptrain.io/v1alpha1\nkind: TrainingJob\nmetadata:\n  name: mnist\n"
      "status:\n  phase: Succeeded\n");
  ASSERT_EQ(status.status, 200) << status.body;
  EXPECT_EQ(status.json["status"]["phase"], "Succeeded");
  EXPECT_EQ(status.json["metadata"]["generation"], 1);
}

TEST_F(ApiSemanticsTest, CreateValidatesNamesAndMakesUpGeneratedOnes) {
  json nameless = PodBody("");
  nameless["metadata"].erase("name");
  TestResponse r = client_->Post(kPods, nameless);
  EXPECT_EQ(r.status, 422);
  EXPECT_EQ(r.json["message"],
            "Pod \"\" is invalid: metadata.name: Required value: name or generateName is required");
  EXPECT_EQ(r.json["details"]["causes"][0]["reason"], "FieldValueRequired");

  r = client_->Post(kPods, PodBody("Bad_Name"));
  EXPECT_EQ(r.status, 422);
  EXPECT_EQ(r.json["details"]["causes"][0]["field"], "metadata.name");

  json generated = PodBody("");
  generated["metadata"].erase("name");
  generated["metadata"]["generateName"] = "mnist-trainer-";
  r = client_->Post(kPods, generated);
  ASSERT_EQ(r.status, 201);
  const std::string name = r.json["metadata"]["name"];
  EXPECT_EQ(name.size(), std::string("mnist-trainer-").size() + 5);
  EXPECT_EQ(name.rfind("mnist-trainer-", 0), 0u);
  generated["metadata"]["generateName"] = "mnist.";
  r = client_->Post(kPods, generated);
  EXPECT_EQ(r.status, 422);
  EXPECT_EQ(r.json["details"]["causes"][0]["field"], "metadata.generateName");

  json bad_labels = PodBody("p", {{"gaptrain.io/replica", "trainer/0"}});
  r = client_->Post(kPods, bad_labels);
  EXPECT_EQ(r.status, 422);
  EXPECT_EQ(r.json["details"]["causes"][0]["field"], "metadata.labels");
  json wrong_type = PodBody("p");
  wrong_type["metadata"]["labels"] = {{"a", 1}};
  r = client_->Post(kPods, wrong_type);
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.json["reason"], "BadRequest");
}

TEST_F(ApiSemanticsTest, PodsGetDefaultsAndTheirSpecIsMostlyImmutable) {
  TestResponse pod = client_->Post(kPods, PodBody("p"));
  ASSERT_EQ(pod.status, 201);
  const json& spec = pod.json["spec"];
  EXPECT_EQ(spec["dnsPolicy"], "ClusterFirst");
  EXPECT_EQ(spec["terminationGracePeriodSeconds"], 30);
  EXPECT_EQ(spec["serviceAccountName"], "default");
  EXPECT_EQ(spec["containers"][0]["imagePullPolicy"], "IfNotPresent");
  EXPECT_EQ(spec["containers"][0]["terminationMessagePath"], "/dev/termination-log");
  EXPECT_EQ(pod.json["status"], json({{"phase", "Pending"}, {"qosClass", "BestEffort"}}));

  json changed = pod.json;
  changed["spec"]["containers"][0]["image"] = "gaptrain:v2";
  TestResponse image = client_->Put(PodPath("p"), changed);
  EXPECT_EQ(image.status, 200) << image.body;
  changed = image.json;
  changed["spec"]["containers"][0]["command"] = {"other"};
  TestResponse command = client_->Put(PodPath("p"), changed);
  EXPECT_EQ(command.status, 422);
  EXPECT_EQ(command.json["details"]["causes"][0]["field"], "spec");
  EXPECT_EQ(command.json["details"]["causes"][0]["reason"], "FieldValueForbidden");
  // spec.nodeName is set through the binding subresource.
  changed = image.json;
  changed["spec"]["nodeName"] = "node-1";
  EXPECT_EQ(client_->Put(PodPath("p"), changed).status, 422);
  TestResponse bound = client_->Send("POST", PodPath("p") + "/binding",
                                     R"({"apiVersion":"v1","kind":"Binding","metadata":{"name":"p"},"target":{"kind":"Node","name":"node-1"}})");
  EXPECT_EQ(bound.status, 201);
  EXPECT_EQ(bound.json, json::parse(R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Success","code":201})"));
  EXPECT_EQ(client_->Get(PodPath("p")).json["spec"]["nodeName"], "node-1");
  EXPECT_EQ(client_->Send("POST", PodPath("p") + "/binding",
                          R"({"target":{"kind":"Node","name":"node-2"}})").status,
            409);

  json missing = PodBody("q");
  missing["spec"]["containers"] = json::array();
  TestResponse invalid = client_->Post(kPods, missing);
  EXPECT_EQ(invalid.status, 422);
  EXPECT_EQ(invalid.json["message"], "Pod \"q\" is invalid: spec.containers: Required value");
}

TEST_F(ApiSemanticsTest, ServicesSecretsAndClaims) {
  const std::string services = "/api/v1/namespaces/default/services";
  TestResponse svc = client_->Post(services, json::parse(R"({"apiVersion":"v1","kind":"Service",
      "metadata":{"name":"master"},"spec":{"selector":{"a":"b"},"ports":[{"port":7070}]}})"));
  ASSERT_EQ(svc.status, 201) << svc.body;
  const std::string ip = svc.json["spec"]["clusterIP"];
  EXPECT_EQ(ip.rfind("10.96.", 0), 0u);
  EXPECT_EQ(svc.json["spec"]["ports"][0]["targetPort"], 7070);
  EXPECT_EQ(svc.json["spec"]["ports"][0]["protocol"], "TCP");
  // A PUT without the cluster IP keeps it; changing it is refused.
  json update = svc.json;
  update["spec"].erase("clusterIP");
  update["spec"].erase("clusterIPs");
  TestResponse kept = client_->Put(services + "/master", update);
  ASSERT_EQ(kept.status, 200) << kept.body;
  EXPECT_EQ(kept.json["spec"]["clusterIP"], ip);
  update = kept.json;
  update["spec"]["clusterIP"] = "10.0.0.1";
  EXPECT_EQ(client_->Put(services + "/master", update).status, 422);
  TestResponse headless = client_->Post(services, json::parse(R"({"apiVersion":"v1","kind":"Service",
      "metadata":{"name":"workers"},"spec":{"clusterIP":"None"}})"));
  EXPECT_EQ(headless.status, 201) << headless.body;
  EXPECT_EQ(client_->Post(services, json::parse(R"({"apiVersion":"v1","kind":"Service",
      "metadata":{"name":"1bad"},"spec":{"ports":[{"port":1}]}})")).status, 422);
  // Deleting a service answers the object.
  TestResponse deleted = client_->Delete(services + "/workers");
  EXPECT_EQ(deleted.json["kind"], "Service");

  const std::string secrets = "/api/v1/namespaces/default/secrets";
  TestResponse secret = client_->Post(secrets, json::parse(R"({"apiVersion":"v1","kind":"Secret",
      "metadata":{"name":"token"},"stringData":{"token":"abc"}})"));
  ASSERT_EQ(secret.status, 201);
  EXPECT_EQ(secret.json["data"], json({{"token", "YWJj"}}));
  EXPECT_EQ(secret.json["type"], "Opaque");
  EXPECT_FALSE(secret.json.contains("stringData"));
  TestResponse bad = client_->Post(secrets, json::parse(R"({"apiVersion":"v1","kind":"Secret",
      "metadata":{"name":"bad"},"data":{"token":"ab$c"}})"));
  EXPECT_EQ(bad.status, 400);
  EXPECT_EQ(bad.json["message"], "Secret in version \"v1\" cannot be handled as a Secret: illegal "
                                 "base64 data at input byte 2");
  // Deleting a secret answers a Status.
  TestResponse gone = client_->Delete(secrets + "/token");
  EXPECT_EQ(gone.json["kind"], "Status");
  EXPECT_EQ(gone.json["details"]["kind"], "secrets");

  const std::string claims = "/api/v1/namespaces/default/persistentvolumeclaims";
  TestResponse claim = client_->Post(claims, json::parse(R"({"apiVersion":"v1","kind":"PersistentVolumeClaim",
      "metadata":{"name":"ckpt"},"spec":{"accessModes":["ReadWriteOnce"],"resources":{"requests":{"storage":"1Gi"}}}})"));
  ASSERT_EQ(claim.status, 201) << claim.body;
  EXPECT_EQ(claim.json["status"]["phase"], "Pending");
  EXPECT_EQ(client_->Post(claims, json::parse(R"({"apiVersion":"v1","kind":"PersistentVolumeClaim",
      "metadata":{"name":"x"},"spec":{}})")).status, 422);
}

TEST_F(ApiSemanticsTest, ListsSelectByLabelsAndFields) {
  client_->Post(kPods, PodBody("t0", {{"job", "mnist"}, {"type", "trainer"}}, "node-1"));
  client_->Post(kPods, PodBody("t1", {{"job", "mnist"}, {"type", "trainer"}}));
  client_->Post(kPods, PodBody("e0", {{"job", "mnist"}, {"type", "evaluator"}}));
  client_->Post(kPods, PodBody("x0", {{"job", "other"}}));
  auto names = [&](const std::string& query) {
    std::set<std::string> out;
    TestResponse r = client_->Get(std::string(kPods) + "?" + query);
    EXPECT_EQ(r.status, 200) << query << ": " << r.body;
    for (const json& item : r.json["items"]) out.insert(item["metadata"]["name"].get<std::string>());
    return out;
  };
  EXPECT_EQ(names("labelSelector=job%3Dmnist"), (std::set<std::string>{"e0", "t0", "t1"}));
  EXPECT_EQ(names("labelSelector=job%3Dmnist,type!%3Dtrainer"), (std::set<std::string>{"e0"}));
  EXPECT_EQ(names("labelSelector=type+in+(trainer,evaluator)"), (std::set<std::string>{"e0", "t0", "t1"}));
  EXPECT_EQ(names("labelSelector=type+notin+(trainer)"), (std::set<std::string>{"e0", "x0"}));
  EXPECT_EQ(names("labelSelector=!type"), (std::set<std::string>{"x0"}));
  EXPECT_EQ(names("fieldSelector=metadata.name%3Dt1"), (std::set<std::string>{"t1"}));
  EXPECT_EQ(names("fieldSelector=spec.nodeName%3Dnode-1"), (std::set<std::string>{"t0"}));
  EXPECT_EQ(names("fieldSelector=spec.nodeName%3D"), (std::set<std::string>{"e0", "t1", "x0"}));
  // Across namespaces.
  TestResponse all = client_->Get("/api/v1/pods?labelSelector=job%3Dother");
  ASSERT_EQ(all.json["items"].size(), 1u);
  EXPECT_EQ(all.json["kind"], "PodList");

  TestResponse bad = client_->Get(std::string(kPods) + "?labelSelector=job%3D%3D%3D");
  EXPECT_EQ(bad.status, 400);
  bad = client_->Get(std::string(kPods) + "?fieldSelector=spec.image%3Dx");
  EXPECT_EQ(bad.status, 400);
  EXPECT_EQ(bad.json["message"], "field label not supported: spec.image");
  bad = client_->Get(std::string(kJobs) + "?fieldSelector=spec.nodeName%3Dx");
  EXPECT_EQ(bad.status, 400);
}

TEST_F(ApiSemanticsTest, PaginationServesAConsistentSnapshot) {
  for (int i = 0; i < 5; ++i) client_->Post(kPods, PodBody("p" + std::to_string(i)));
  TestResponse page1 = client_->Get(std::string(kPods) + "?limit=2");
  ASSERT_EQ(page1.json["items"].size(), 2u);
  EXPECT_EQ(page1.json["metadata"]["remainingItemCount"], 3);
  const std::string token = page1.json["metadata"]["continue"];
  ASSERT_FALSE(token.empty());
  const std::string rv = page1.json["metadata"]["resourceVersion"];
  // A write between pages does not show in them.
  client_->Post(kPods, PodBody("p2a"));
  client_->Delete(PodPath("p4"));
  TestResponse page2 = client_->Get(std::string(kPods) + "?limit=2&continue=" + token);
  ASSERT_EQ(page2.status, 200) << page2.body;
  EXPECT_EQ(page2.json["metadata"]["resourceVersion"], rv);
  const std::string token2 = page2.json["metadata"]["continue"];
  TestResponse page3 = client_->Get(std::string(kPods) + "?limit=2&continue=" + token2);
  std::vector<std::string> names;
  for (const TestResponse* page : {&page1, &page2, &page3}) {
    for (const json& item : page->json["items"]) names.push_back(item["metadata"]["name"]);
  }
  EXPECT_EQ(names, (std::vector<std::string>{"p0", "p1", "p2", "p3", "p4"}));
  EXPECT_FALSE(page3.json["metadata"].contains("continue"));

  EXPECT_EQ(client_->Get(std::string(kPods) + "?limit=2&continue=%%%").status, 400);
  EXPECT_EQ(client_->Get(std::string(kPods) + "?limit=x").status, 400);
  // Old snapshots are forgotten: 410.
  for (int i = 0; i < 70; ++i) client_->Get(std::string(kPods) + "?limit=1");
  TestResponse expired = client_->Get(std::string(kPods) + "?limit=2&continue=" + token);
  EXPECT_EQ(expired.status, 410);
  EXPECT_EQ(expired.json["reason"], "Expired");
}

TEST_F(ApiSemanticsTest, CrdsInstalledThroughTheApiServeTheirResources) {
  const std::string crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
  json crd = json::parse(R"({"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",
      "metadata":{"name":"widgets.example.com"},
      "spec":{"group":"example.com","scope":"Cluster","names":{"plural":"widgets","kind":"Widget"},
        "versions":[{"name":"v1","served":true,"storage":true,
          "schema":{"openAPIV3Schema":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}]}})");
  TestResponse created = client_->Post(crds, crd);
  ASSERT_EQ(created.status, 201) << created.body;
  EXPECT_EQ(created.json["status"]["conditions"][1]["type"], "Established");
  EXPECT_EQ(created.json["spec"]["names"]["listKind"], "WidgetList");
  TestResponse widget = client_->Post("/apis/example.com/v1/widgets",
                                      json::parse(R"({"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"},"size":3})"));
  ASSERT_EQ(widget.status, 201) << widget.body;
  EXPECT_FALSE(widget.json["metadata"].contains("namespace"));
  EXPECT_EQ(client_->Get("/apis/example.com/v1/widgets/w").json["size"], 3);
  EXPECT_EQ(client_->Get("/apis/example.com/v1/namespaces/default/widgets").status, 404);
  TestResponse discovery = client_->Get("/apis/example.com/v1");
  EXPECT_EQ(discovery.json["resources"][0]["name"], "widgets");

  // Deleting the CRD deletes its resources and stops serving them.
  EXPECT_EQ(client_->Delete(crds + "/widgets.example.com").status, 200);
  EXPECT_EQ(client_->Get("/apis/example.com/v1/widgets").status, 404);
  json ignored;
  EXPECT_EQ(server_->Get("widgets.example.com", "", "w", &ignored).code(), Status::Code::kNotFound);

  json invalid = crd;
  invalid["metadata"]["name"] = "wrong";
  TestResponse rejected = client_->Post(crds, invalid);
  EXPECT_EQ(rejected.status, 422);
  EXPECT_EQ(rejected.json["details"]["causes"][0]["field"], "metadata.name");
}

TEST_F(ApiSemanticsTest, TablesForCustomResourceLists) {
  client_->Post(kJobs, TrainingJobBody("a"));
  client_->Post(kJobs, TrainingJobBody("b"));
  client_->MergePatch(JobPath("b") + "/status",
                      {{"status", {{"conditions", json::array({{{"type", "Created"}, {"status", "True"}},
                                                               {{"type", "Running"}, {"status", "True"}}})},
                                   {"progress", {{"epoch", 2}}}}}});
  TestResponse table = client_->Send("GET", std::string(kJobs) + "?includeObject=None", "", "",
                                     {{"Accept", "application/json;as=Table;v=v1;g=meta.k8s.io"}});
  ASSERT_EQ(table.status, 200);
  EXPECT_EQ(table.json["kind"], "Table");
  ASSERT_EQ(table.json["rows"].size(), 2u);
  EXPECT_FALSE(table.json["rows"][0].contains("object"));
  const json& cells = table.json["rows"][1]["cells"];
  EXPECT_EQ(cells[0], "b");
  EXPECT_EQ(cells[1], "Running");
  EXPECT_EQ(cells[3], 2);
  EXPECT_TRUE(table.json["rows"][0]["cells"][1].is_null());
}

TEST_F(ApiSemanticsTest, DiscoveryAndVersion) {
  TestResponse api = client_->Get("/api");
  EXPECT_EQ(api.json["versions"], json::array({"v1"}));
  TestResponse groups = client_->Get("/apis");
  std::set<std::string> names;
  for (const json& g : groups.json["groups"]) names.insert(g["name"].get<std::string>());
  EXPECT_TRUE(names.count("gaptrain.io"));
  EXPECT_TRUE(names.count("coordination.k8s.io"));
  TestResponse core = client_->Get("/api/v1");
  std::set<std::string> resources;
  for (const json& r : core.json["resources"]) resources.insert(r["name"].get<std::string>());
  for (const char* r : {"pods", "pods/status", "pods/eviction", "pods/binding", "services",
                        "secrets", "configmaps", "persistentvolumeclaims", "serviceaccounts"}) {
    EXPECT_TRUE(resources.count(r)) << r;
  }
  EXPECT_EQ(client_->Get("/apis/gaptrain.io").json["preferredVersion"]["version"], "v1alpha1");
  EXPECT_EQ(client_->Get("/version").json["minor"], "26");
  EXPECT_EQ(client_->Get("/apis/nothing.io/v1").status, 404);
}

TEST_F(ApiSemanticsTest, DeleteCollectionDeletesWhatTheSelectorSelects) {
  client_->Post(kPods, PodBody("a", {{"job", "x"}}));
  client_->Post(kPods, PodBody("b", {{"job", "x"}}));
  client_->Post(kPods, PodBody("c", {{"job", "y"}}));
  TestResponse r = client_->Delete(std::string(kPods) + "?labelSelector=job%3Dx");
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.json["kind"], "PodList");
  EXPECT_EQ(r.json["items"].size(), 2u);
  EXPECT_EQ(client_->Get(kPods).json["items"].size(), 1u);
}

}  // namespace
}  // namespace kube_testing
}  // namespace gaptrain
