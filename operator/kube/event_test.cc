// Tests Events against the recorded event-create exchange, and the
// resource table (paths, RBAC names, the permissions the client can use).

#include "operator/kube/event.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "operator/kube/api_time.h"
#include "operator/kube/json_text.h"
#include "operator/kube/resource.h"
#include "operator/testing/scripted_server.h"
#include "operator/testing/kube_test_support.h"

namespace gaptrain {
namespace kube {
namespace {

// 2026-11-23T06:06:00Z
std::chrono::system_clock::time_point RecordedEventTime() {
  std::tm t{};
  t.tm_year = 2026 - 1900;
  t.tm_mon = 10;
  t.tm_mday = 23;
  t.tm_hour = 6;
  t.tm_min = 6;
  return std::chrono::system_clock::from_time_t(timegm(&t));
}

EventSpec RecordedSpec() {
  EventSpec spec;
  spec.regarding = {{"apiVersion", "gaptrain.io/v1alpha1"},
                    {"kind", "TrainingJob"},
                    {"metadata",
                     {{"name", "mnist"},
                      {"namespace", "default"},
                      {"uid", "ead6b621-1939-4817-8ffa-71c9621c5271"},
                      {"resourceVersion", "214"}}},
                    {"spec", {{"workers", {{"replicas", 4}}}}}};
  spec.type = "Normal";
  spec.reason = "WorkerPreempted";
  spec.action = "Preempted";
  spec.note = "trainer mnist-trainer-0 was preempted (DisruptionTarget); recreated";
  spec.reporting_controller = "gaptrain.io/operator";
  spec.reporting_instance = "gaptrain-operator-0";
  spec.event_time = RecordedEventTime();
  return spec;
}

TEST(EventTest, BuildsWhatTheApiServerAccepted) {
  Recording r;
  ASSERT_TRUE(LoadRecording("event-create", &r).ok());
  nlohmann::json event;
  std::string ns;
  Status s = BuildEvent(RecordedSpec(), &event, &ns);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(event, r.request_body);
  EXPECT_EQ(ns, "default");
}

TEST(EventTest, CreateEventPostsToTheRegardingNamespace) {
  Recording r;
  ASSERT_TRUE(LoadRecording("event-create", &r).ok());
  std::unique_ptr<ScriptedServer> server;
  ASSERT_TRUE(ScriptedServer::Start({}, &server).ok());
  ScriptedReply reply;
  reply.status = r.status;
  reply.body = r.ResponseBytes();
  server->Push(reply);
  ClusterConfig config;
  config.server = server->url();
  config.default_namespace = "elsewhere";
  std::unique_ptr<Client> client;
  ASSERT_TRUE(Client::New(config, {}, &client).ok());
  nlohmann::json created;
  Status s = CreateEvent(client.get(), RecordedSpec(), &created);
  ASSERT_TRUE(s.ok()) << s.ToString();
  const ReceivedRequest sent = server->requests().at(0);
  EXPECT_EQ(sent.method, "POST");
  EXPECT_EQ(sent.path, r.path);
  nlohmann::json body;
  ASSERT_TRUE(ParseJson(sent.body, &body).ok());
  EXPECT_EQ(body, r.request_body);
  EXPECT_EQ(created["metadata"]["name"], "mnist-msmwl");
}

TEST(EventTest, BadEventsAreRefusedNamingTheField) {
  nlohmann::json event;
  std::string ns;
  EventSpec spec = RecordedSpec();
  spec.type = "Info";
  EXPECT_EQ(BuildEvent(spec, &event, &ns).message(),
            "event type: must be Normal or Warning, got 'Info'");
  spec = RecordedSpec();
  spec.reason = "";
  EXPECT_EQ(BuildEvent(spec, &event, &ns).message(), "event reason: is required");
  spec = RecordedSpec();
  spec.reporting_instance = std::string(200, 'x');
  EXPECT_EQ(BuildEvent(spec, &event, &ns).message(),
            "event reportingInstance: is longer than 128 bytes");
  spec = RecordedSpec();
  spec.regarding["metadata"]["name"] = "Not_A_DNS_Name";
  EXPECT_EQ(BuildEvent(spec, &event, &ns).message(),
            "event metadata.generateName: 'Not_A_DNS_Name-' is not the start of a DNS subdomain "
            "(from regarding.metadata.name)");
  spec = RecordedSpec();
  spec.regarding = "mnist";
  EXPECT_EQ(BuildEvent(spec, &event, &ns).message(), "event regarding: must be the object (JSON)");
}

TEST(EventTest, LongNotesAndNamesAreCutToTheApiLimits) {
  EventSpec spec = RecordedSpec();
  spec.note = std::string(1023, 'a') + "\xc3\xa9";  // 'é' would straddle byte 1024
  spec.regarding["metadata"]["name"] = std::string(100, 'n');
  spec.regarding["metadata"].erase("namespace");
  nlohmann::json event;
  std::string ns;
  ASSERT_TRUE(BuildEvent(spec, &event, &ns).ok());
  EXPECT_EQ(event["note"].get<std::string>(), std::string(1023, 'a'));
  EXPECT_EQ(event["metadata"]["generateName"], std::string(57, 'n') + "-");
  EXPECT_EQ(ns, "default") << "cluster-scoped objects' events go to default";
}

TEST(EventTest, MicroTimeFormat) {
  EXPECT_EQ(FormatMicroTime(RecordedEventTime() + std::chrono::microseconds(1234)),
            "2026-11-23T06:06:00.001234Z");
  EXPECT_EQ(FormatMicroTime(std::chrono::system_clock::time_point()),
            "1970-01-01T00:00:00.000000Z");
}

TEST(ResourceTest, PathsAsTheApiServerServesThem) {
  EXPECT_EQ(kPods.ObjectPath("default", "p"), "/api/v1/namespaces/default/pods/p");
  EXPECT_EQ(kTrainingJobs.Subresource("scale").ObjectPath("ns", "mnist"),
            "/apis/gaptrain.io/v1alpha1/namespaces/ns/trainingjobs/mnist/scale");
  EXPECT_EQ(kLeases.CollectionPath("kube-system"),
            "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases");
  EXPECT_EQ(kEvents.ApiVersion(), "events.k8s.io/v1");
  EXPECT_EQ(kConfigMaps.ApiVersion(), "v1");
  EXPECT_EQ(kTrainingJobs.Subresource("status").RbacName(), "trainingjobs/status");
}

TEST(ResourceTest, PermissionsTableCoversEveryCall) {
  const std::vector<RbacPermission> all = ClientPermissions();
  EXPECT_TRUE(std::is_sorted(all.begin(), all.end()));
  auto has = [&all](const std::string& group, const std::string& resource,
                    const std::string& verb) {
    return std::find(all.begin(), all.end(), RbacPermission{group, resource, verb}) != all.end();
  };
  // 13 resources x 7 verbs, plus 4 subresources x {get, update, patch}.
  EXPECT_EQ(all.size(), 13u * 7u + 4u * 3u);
  EXPECT_TRUE(has("scheduling.k8s.io", "priorityclasses", "watch"));
  EXPECT_TRUE(has("kueue.x-k8s.io", "workloads/status", "patch"));
  EXPECT_TRUE(has("networking.k8s.io", "networkpolicies", "patch"));
  EXPECT_TRUE(has("", "pods", "watch"));
  EXPECT_TRUE(has("", "pods/status", "patch"));
  EXPECT_TRUE(has("gaptrain.io", "trainingjobs/scale", "update"));
  EXPECT_TRUE(has("coordination.k8s.io", "leases", "update"));
  EXPECT_TRUE(has("events.k8s.io", "events", "create"));
  EXPECT_FALSE(has("gaptrain.io", "trainingjobs/status", "list"));
  EXPECT_FALSE(has("", "events", "create")) << "Events are events.k8s.io, not core";

  // A server-side apply may create the object, which kube-apiserver
  // authorizes as "create" as well as "patch"; an apply to a subresource
  // creates nothing.
  EXPECT_EQ(Permissions(kPods, Call::kApply),
            (std::vector<RbacPermission>{{"", "pods", "patch"}, {"", "pods", "create"}}));
  EXPECT_EQ(Permissions(kTrainingJobs.Subresource("status"), Call::kApply),
            (std::vector<RbacPermission>{{"gaptrain.io", "trainingjobs/status", "patch"}}));
  EXPECT_EQ(Permissions(kPods, Call::kMergePatch),
            (std::vector<RbacPermission>{{"", "pods", "patch"}}));
  EXPECT_STREQ(RbacVerb(Call::kMergePatch), "patch");
  EXPECT_STREQ(CallName(Call::kApply), "apply");
  EXPECT_FALSE(AllowedOn(kPods.Subresource("status"), Call::kDelete));
  EXPECT_TRUE(AllowedOn(kPods, Call::kDelete));
}

}  // namespace
}  // namespace kube
}  // namespace gaptrain
