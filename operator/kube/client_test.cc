// Tests, against the ScriptedServer, what a real server cannot show or
// cannot be made to do on demand: the exact requests the Client sends
// (method, path, query encoding, headers, bodies; where a recorded
// exchange of a real kube-apiserver exists, the request must match it),
// calls refused before sending, answers a healthy server does not give
// (not JSON, cut short, garbage, a repeated or expired continue token, a
// watch request answered 410, an apply conflict, which the Client's forced
// applies never meet), deadlines, cancellation, keep-alive reuse and
// concurrent calls. The API's semantics (answers and errors, conflicts,
// preconditions, server-side apply, subresources, paging, selectors,
// watches and a real 410) are tested against the real server in
// client_api_test.

#include "operator/kube/client.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <thread>
#include <vector>

#include "operator/kube/api_error.h"
#include "operator/kube/json_text.h"
#include "operator/testing/kube_test_support.h"
#include "operator/testing/scripted_server.h"
#include "services/testing/yaml_to_json.h"

namespace gaptrain {
namespace kube {
namespace {

// A recording's YAML request body (a server-side apply) as JSON.
nlohmann::json RequestYaml(const Recording& r) {
  nlohmann::json out;
  const Status s = kube_testing::YamlToJson(r.request_body.get<std::string>(), &out);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return out;
}

using Code = Status::Code;
using std::chrono::milliseconds;

ScriptedReply ReplyOf(const Recording& r) {
  ScriptedReply reply;
  reply.status = r.status;
  reply.body = r.ResponseBytes();
  return reply;
}

nlohmann::json Parse(const std::string& text) {
  nlohmann::json json;
  Status s = ParseJson(text, &json);
  EXPECT_TRUE(s.ok()) << s.ToString() << ": " << text;
  return json;
}

class ClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(ScriptedServer::Start({}, &server_).ok());
    config_.server = server_->url();
    config_.token = "test-token";
    options_.request_timeout = milliseconds(5000);
    NewClient();
  }

  void NewClient() {
    Status s = Client::New(config_, options_, &client_);
    ASSERT_TRUE(s.ok()) << s.ToString();
  }

  Recording Serve(const std::string& name) {
    Recording r;
    Status s = LoadRecording(name, &r);
    EXPECT_TRUE(s.ok()) << s.ToString();
    server_->Push(ReplyOf(r));
    return r;
  }

  ReceivedRequest Last() {
    std::vector<ReceivedRequest> all = server_->requests();
    EXPECT_FALSE(all.empty());
    return all.empty() ? ReceivedRequest() : all.back();
  }

  // The last request is the recorded one, as far as the API server cares.
  void ExpectSent(const Recording& r) {
    ReceivedRequest got = Last();
    EXPECT_EQ(got.method, r.method);
    EXPECT_EQ(got.path, r.path);
    EXPECT_EQ(got.query, r.query);
    EXPECT_EQ(got.headers["authorization"], "Bearer test-token");
    EXPECT_EQ(got.headers["accept"], "application/json");
    auto content_type = r.request_headers.find("Content-Type");
    EXPECT_EQ(got.headers["content-type"],
              content_type == r.request_headers.end() ? "" : content_type->second);
    if (r.request_body.is_null()) {
      EXPECT_EQ(got.body, "");
    } else if (r.request_body.is_string()) {
      EXPECT_EQ(Parse(got.body), RequestYaml(r));
    } else {
      EXPECT_EQ(Parse(got.body), r.request_body);
    }
  }

  std::unique_ptr<ScriptedServer> server_;
  ClusterConfig config_;
  ClientOptions options_;
  std::unique_ptr<Client> client_;
};

TEST_F(ClientTest, ListByLabelSelectorEncodesTheQueryAsKubectlDoes) {
  const Recording r = Serve("pod-list-selector");
  ListOptions options;
  options.label_selector = "gaptrain.io/job-name=mnist";
  options.page_size = 0;
  ObjectList list;
  ASSERT_TRUE(client_->List(kPods, "default", options, &list).ok());
  ExpectSent(r);
  EXPECT_EQ(Last().target, "/api/v1/namespaces/default/pods?labelSelector=gaptrain.io%2Fjob-name%3Dmnist");
  EXPECT_TRUE(list.items.empty());
  EXPECT_EQ(list.resource_version, "226");
}

TEST_F(ClientTest, ApplyToTheStatusSubresource) {
  server_->Push(ScriptedReply{});
  const nlohmann::json status = {{"metadata", {{"name", "mnist"}}},
                                 {"status", {{"phase", "Running"}}}};
  ASSERT_TRUE(client_->Apply(kTrainingJobs.Subresource("status"), "default", status, nullptr).ok());
  ReceivedRequest sent = Last();
  EXPECT_EQ(sent.method, "PATCH");
  EXPECT_EQ(sent.path, "/apis/gaptrain.io/v1alpha1/namespaces/default/trainingjobs/mnist/status");
  EXPECT_EQ(sent.query, (std::map<std::string, std::string>{{"fieldManager", "gaptrain-operator"},
                                                           {"force", "true"}}));
  EXPECT_EQ(sent.headers["content-type"], "application/apply-patch+yaml");
  const nlohmann::json body = Parse(sent.body);
  EXPECT_EQ(body["apiVersion"], "gaptrain.io/v1alpha1");
  EXPECT_EQ(body["kind"], "TrainingJob");
  EXPECT_EQ(body["status"]["phase"], "Running");
}

TEST_F(ClientTest, AServerUrlWithAPathPrefixesEveryRequest) {
  config_.server = server_->url() + "/k8s/clusters/c1/";
  NewClient();
  server_->Push(ScriptedReply{});
  ASSERT_TRUE(client_->Get(kPods, "", "p", nullptr).ok());
  EXPECT_EQ(Last().path, "/k8s/clusters/c1/api/v1/namespaces/default/pods/p");
}

TEST_F(ClientTest, ApplyConflictsNameTheField) {
  Recording r;
  ASSERT_TRUE(LoadRecording("pod-apply-conflict", &r).ok());
  server_->Push(ReplyOf(r));
  options_.field_manager = "someone-else";
  NewClient();
  ApiError error;
  Status s = client_->Apply(kPods, "default",
                            RequestYaml(r), nullptr,
                            &error);
  EXPECT_TRUE(IsConflict(s)) << s.ToString();
  EXPECT_EQ(Last().query.at("fieldManager"), "someone-else");
  ASSERT_FALSE(error.causes.empty());
  EXPECT_FALSE(error.causes[0].field.empty());
}

TEST_F(ClientTest, DeleteSendsItsOptions) {
  const Recording foreground = Serve("delete-foreground");
  DeleteOptions options;
  options.propagation_policy = "Foreground";
  nlohmann::json deleted;
  ASSERT_TRUE(client_->Delete(kTrainingJobs, "default", "mnist", options, &deleted).ok());
  ExpectSent(foreground);
  EXPECT_EQ(deleted["metadata"]["finalizers"][0], "foregroundDeletion");
  EXPECT_TRUE(deleted["metadata"].contains("deletionTimestamp"));

  const Recording plain = Serve("w-delete-second");
  ASSERT_TRUE(client_->Delete(kTrainingJobs, "default", "fmnist", {}).ok());
  ExpectSent(plain);

  server_->Push(ScriptedReply{});
  options.propagation_policy = "Background";
  options.grace_period_seconds = 0;
  options.precondition_uid = "u-1";
  options.precondition_resource_version = "42";
  ASSERT_TRUE(client_->Delete(kPods, "default", "p", options).ok());
  EXPECT_EQ(Parse(Last().body),
            nlohmann::json::parse(R"({"apiVersion":"v1","kind":"DeleteOptions",
              "propagationPolicy":"Background","gracePeriodSeconds":0,
              "preconditions":{"uid":"u-1","resourceVersion":"42"}})"));
  options.propagation_policy = "Later";
  EXPECT_TRUE(IsInvalid(client_->Delete(kPods, "default", "p", options)));
}

TEST_F(ClientTest, ClusterScopedResourcesHaveNoNamespace) {
  constexpr Resource kCrds{"apiextensions.k8s.io", "v1", "customresourcedefinitions",
                           "CustomResourceDefinition", false, ""};
  const Recording r = Serve("crd-get");
  nlohmann::json crd;
  ASSERT_TRUE(client_->Get(kCrds, "ignored", "trainingjobs.gaptrain.io", &crd).ok());
  ExpectSent(r);
  EXPECT_EQ(crd["spec"]["names"]["kind"], "TrainingJob");
}

// An operator installed cluster-wide lists and watches every namespace at
// once: /api/v1/pods, as `kubectl get pods -A` asks.
TEST_F(ClientTest, ListAndWatchSpanAllNamespaces) {
  server_->Push(ListReply("PodList", "v1",
                          {{{"metadata", {{"name", "a"}, {"namespace", "x"}}}},
                           {{"metadata", {{"name", "b"}, {"namespace", "y"}}}}},
                          "7"));
  ListOptions list_options;
  list_options.label_selector = "gaptrain.io/job-name";
  ObjectList list;
  Status s = client_->List(kPods, kAllNamespaces, list_options, &list);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(Last().path, "/api/v1/pods");
  EXPECT_EQ(Last().query.at("labelSelector"), "gaptrain.io/job-name");
  ASSERT_EQ(list.items.size(), 2u);
  EXPECT_EQ(list.items[1]["metadata"]["namespace"], "y");

  const nlohmann::json added = {
      {"type", "ADDED"},
      {"object",
       {{"apiVersion", "gaptrain.io/v1alpha1"},
        {"kind", "TrainingJob"},
        {"metadata", {{"name", "j"}, {"namespace", "z"}, {"resourceVersion", "8"}}}}}};
  server_->Push(WatchReply({added.dump()}, /*end=*/true));
  WatchOptions watch_options;
  watch_options.resource_version = "7";
  std::unique_ptr<WatchStream> stream;
  s = client_->Watch(kTrainingJobs, kAllNamespaces, watch_options, &stream);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(Last().path, "/apis/gaptrain.io/v1alpha1/trainingjobs");
  WatchEvent event;
  ASSERT_TRUE(stream->Next(&event));
  EXPECT_EQ(event.object["metadata"]["namespace"], "z");
}

TEST_F(ClientTest, OnlyListAndWatchSpanAllNamespaces) {
  const size_t sent = server_->requests().size();
  Status s = client_->Get(kPods, kAllNamespaces, "a", nullptr);
  EXPECT_EQ(s.message(), "get pods in all namespaces (a): only list and watch span all namespaces");
  EXPECT_TRUE(IsInvalid(client_->Create(kPods, kAllNamespaces, {{"metadata", {{"name", "a"}}}},
                                        nullptr)));
  EXPECT_TRUE(IsInvalid(client_->Delete(kPods, kAllNamespaces, "a", {})));
  EXPECT_TRUE(IsInvalid(client_->Apply(kPods, kAllNamespaces, {{"metadata", {{"name", "a"}}}},
                                       nullptr)));
  EXPECT_EQ(server_->requests().size(), sent);
}

TEST_F(ClientTest, BadArgumentsAreRefusedBeforeSending) {
  EXPECT_TRUE(IsInvalid(client_->Get(kPods, "default", "a/b", nullptr)));
  EXPECT_TRUE(IsInvalid(client_->Get(kPods, "default", "", nullptr)));
  EXPECT_TRUE(IsInvalid(client_->Get(kPods, "de fault", "a", nullptr)));
  EXPECT_TRUE(IsInvalid(client_->Update(kPods, "default", {{"metadata", {}}}, nullptr)));
  ObjectList list;
  Status s = client_->List(kTrainingJobs.Subresource("status"), "default", {}, &list);
  EXPECT_EQ(s.message(),
            "list trainingjobs/status default: the client does not list the subresource status");
  EXPECT_TRUE(IsInvalid(client_->MergePatch(kPods, "default", "a", nlohmann::json::array(), nullptr)));
  EXPECT_TRUE(server_->requests().empty());
}

TEST_F(ClientTest, ListFollowsContinueToTheLastPage) {
  auto page = [](const std::vector<std::string>& names, const std::string& next,
                 const std::string& rv) {
    nlohmann::json items = nlohmann::json::array();
    for (const std::string& n : names) items.push_back({{"metadata", {{"name", n}}}});
    nlohmann::json body = {{"kind", "PodList"}, {"apiVersion", "v1"},
                           {"metadata", {{"resourceVersion", rv}}}, {"items", items}};
    if (!next.empty()) body["metadata"]["continue"] = next;
    ScriptedReply reply;
    reply.body = body.dump();
    return reply;
  };
  server_->Push(page({"a", "b"}, "token/1", "10"));
  server_->Push(page({"c", "d"}, "token/2", "10"));
  server_->Push(page({"e"}, "", "11"));
  ListOptions options;
  options.page_size = 2;
  options.field_selector = "status.phase=Running";
  ObjectList list;
  ASSERT_TRUE(client_->List(kPods, "default", options, &list).ok());
  ASSERT_EQ(list.items.size(), 5u);
  EXPECT_EQ(list.items[4]["metadata"]["name"], "e");
  EXPECT_EQ(list.items[0]["kind"], "Pod");
  EXPECT_EQ(list.items[0]["apiVersion"], "v1");
  EXPECT_EQ(list.resource_version, "11");
  const std::vector<ReceivedRequest> sent = server_->requests();
  ASSERT_EQ(sent.size(), 3u);
  EXPECT_EQ(sent[0].query, (std::map<std::string, std::string>{
                               {"limit", "2"}, {"fieldSelector", "status.phase=Running"}}));
  EXPECT_EQ(sent[1].query.at("continue"), "token/1");
  EXPECT_EQ(sent[2].query.at("continue"), "token/2");

  // An expired continue token: everything again, at once.
  server_->Push(page({"a"}, "old", "10"));
  ScriptedReply expired;
  expired.status = 410;
  expired.body = R"({"kind":"Status","apiVersion":"v1","status":"Failure","message":"The provided continue parameter is too old","reason":"Expired","code":410})";
  server_->Push(expired);
  server_->Push(page({"a", "b", "c"}, "", "12"));
  ASSERT_TRUE(client_->List(kPods, "default", options, &list).ok());
  EXPECT_EQ(list.items.size(), 3u);
  EXPECT_EQ(server_->requests().back().query.count("limit"), 0u);

  // A server that repeats a continue token must not loop forever.
  server_->Push(page({"a"}, "same", "10"));
  server_->Push(page({"b"}, "same", "10"));
  EXPECT_EQ(client_->List(kPods, "default", options, &list).code(), Code::kDataLoss);
}

TEST_F(ClientTest, ResponsesThatAreNotJsonOrAreCutShortAreErrors) {
  ScriptedReply not_json;
  not_json.body = "<html>hello</html>";
  server_->Push(not_json);
  Status s = client_->Get(kPods, "default", "p", nullptr);
  EXPECT_EQ(s.code(), Code::kDataLoss);
  EXPECT_EQ(s.message(),
            "get pods default/p: the 200 response is not a JSON object: <html>hello</html>");

  ScriptedReply proxy_error;
  proxy_error.status = 502;
  proxy_error.content_type = "text/html";
  proxy_error.body = "<html>Bad Gateway</html>";
  server_->Push(proxy_error);
  ApiError error;
  s = client_->Get(kPods, "default", "p", nullptr, &error);
  EXPECT_TRUE(IsRetryable(s));
  EXPECT_EQ(s.message(), "get pods default/p: 502: (not a Status) <html>Bad Gateway</html>");
  EXPECT_EQ(error.http_status, 502);

  ScriptedReply truncated;
  truncated.body = R"({"kind":"Pod","metadata":{"name":"p"}})";
  truncated.cut_after = 70;  // inside the body
  server_->Push(truncated);
  s = client_->Get(kPods, "default", "p", nullptr);
  EXPECT_EQ(s.code(), Code::kUnavailable);
  EXPECT_NE(s.message().find("closed the connection before a complete response (truncated)"),
            std::string::npos)
      << s.message();

  ScriptedReply garbage;
  garbage.raw = "SMTP ready\r\n\r\n";
  server_->Push(garbage);
  s = client_->Get(kPods, "default", "p", nullptr);
  EXPECT_EQ(s.code(), Code::kDataLoss);
}

TEST_F(ClientTest, EveryCallEndsByItsDeadline) {
  options_.request_timeout = milliseconds(300);
  NewClient();
  ScriptedReply slow;
  slow.delay = std::chrono::seconds(30);  // the server's Stop() ends the wait
  server_->Push(slow);
  const auto start = std::chrono::steady_clock::now();
  Status s = client_->Get(kPods, "default", "p", nullptr);
  EXPECT_EQ(s.code(), Code::kDeadlineExceeded) << s.ToString();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_TRUE(IsRetryable(s));
}

TEST_F(ClientTest, ShutdownCancelsCallsInFlightAndLaterOnes) {
  ScriptedReply hang;
  hang.hang = true;
  server_->Push(hang);
  Status in_flight;
  std::thread caller([&] { in_flight = client_->Get(kPods, "default", "p", nullptr); });
  ASSERT_TRUE(server_->WaitForRequests(1, milliseconds(5000)));
  client_->Shutdown();
  caller.join();
  EXPECT_EQ(in_flight.code(), Code::kCancelled) << in_flight.ToString();
  EXPECT_EQ(client_->Get(kPods, "default", "p", nullptr).code(), Code::kCancelled);
}

TEST_F(ClientTest, ConnectionsAreKeptAliveAndReplacedWhenTheServerDropsThem) {
  for (int i = 0; i < 3; ++i) {
    server_->Push(ScriptedReply{});
    ASSERT_TRUE(client_->Get(kPods, "default", "p", nullptr).ok());
  }
  EXPECT_EQ(server_->connections(), 1);

  ScriptedReply vanish;
  vanish.vanish = true;
  server_->Push(vanish);
  ASSERT_TRUE(client_->Get(kPods, "default", "p", nullptr).ok());
  server_->Push(ScriptedReply{});
  Status s = client_->Get(kPods, "default", "p", nullptr);
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(server_->connections(), 2);
}

TEST_F(ClientTest, ConcurrentCallsEachGetTheirOwnAnswer) {
  server_->SetHandler([](const ReceivedRequest& request) {
    ScriptedReply reply;
    const std::string name = request.path.substr(request.path.rfind('/') + 1);
    reply.body = nlohmann::json({{"metadata", {{"name", name}}}}).dump();
    reply.delay = milliseconds(2);
    return reply;
  });
  std::atomic<int> right{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 6; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 5; ++i) {
        const std::string name = "p-" + std::to_string(t) + "-" + std::to_string(i);
        nlohmann::json pod;
        if (client_->Get(kPods, "default", name, &pod).ok() && pod["metadata"]["name"] == name) {
          ++right;
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(right.load(), 30);
  EXPECT_LE(server_->connections(), 6);
}

TEST_F(ClientTest, WatchDeliversTheRecordedStream) {
  ScriptedReply watch;
  ASSERT_TRUE(ReadRecordedFile("watch-trainingjobs.http", &watch.raw).ok());
  server_->Push(watch);
  WatchOptions options;
  options.resource_version = "214";
  options.timeout_seconds = 3;
  std::unique_ptr<WatchStream> stream;
  Status s = client_->Watch(kTrainingJobs, "default", options, &stream);
  ASSERT_TRUE(s.ok()) << s.ToString();
  // As recorded: ?watch=1&allowWatchBookmarks=true&resourceVersion=214&timeoutSeconds=3
  EXPECT_EQ(Last().path, "/apis/gaptrain.io/v1alpha1/namespaces/default/trainingjobs");
  EXPECT_EQ(Last().query, (std::map<std::string, std::string>{{"watch", "1"},
                                                             {"allowWatchBookmarks", "true"},
                                                             {"resourceVersion", "214"},
                                                             {"timeoutSeconds", "3"}}));
  std::vector<std::string> seen;
  WatchEvent event;
  while (stream->Next(&event)) {
    seen.push_back(std::string(WatchEventTypeName(event.type)) + " " + event.ResourceVersion());
  }
  EXPECT_TRUE(stream->status().ok()) << stream->status().ToString();
  EXPECT_EQ(seen, (std::vector<std::string>{"MODIFIED 215", "MODIFIED 216", "MODIFIED 217",
                                            "ADDED 218", "DELETED 219", "BOOKMARK 219"}));
}

TEST_F(ClientTest, WatchRefusedByTheServer) {
  Serve("forbidden");
  std::unique_ptr<WatchStream> stream;
  Status s = client_->Watch(kTrainingJobs, "default", {}, &stream);
  EXPECT_EQ(s.code(), Code::kPermissionDenied);
  EXPECT_EQ(s.message().rfind("watch trainingjobs default: 403 Forbidden: ", 0), 0u);
  ScriptedReply gone;
  gone.status = 410;
  gone.body = R"({"kind":"Status","apiVersion":"v1","status":"Failure","message":"too old","reason":"Gone","code":410})";
  server_->Push(gone);
  EXPECT_TRUE(IsGone(client_->Watch(kTrainingJobs, "default", {}, &stream)));
}

TEST_F(ClientTest, AWatchCutShortIsUnavailableAfterTheEventsBeforeTheCut) {
  ScriptedReply watch;
  ASSERT_TRUE(ReadRecordedFile("watch-trainingjobs.http", &watch.raw).ok());
  watch.cut_after = watch.raw.find("\"ADDED\"");  // within the fourth event's chunk
  server_->Push(watch);
  std::unique_ptr<WatchStream> stream;
  ASSERT_TRUE(client_->Watch(kTrainingJobs, "default", {}, &stream).ok());
  int events = 0;
  WatchEvent event;
  while (stream->Next(&event)) ++events;
  EXPECT_EQ(events, 3);
  EXPECT_EQ(stream->status().code(), Code::kUnavailable) << stream->status().ToString();
  EXPECT_TRUE(IsRetryable(stream->status()));
}

TEST_F(ClientTest, AnIdleWatchTimesOutAndAnyWatchCanBeCancelled) {
  const std::string header =
      "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n";
  ScriptedReply idle;
  idle.raw = header;
  idle.hang = true;
  server_->Push(idle);
  WatchOptions options;
  options.idle_timeout = milliseconds(200);
  std::unique_ptr<WatchStream> stream;
  ASSERT_TRUE(client_->Watch(kPods, "default", options, &stream).ok());
  WatchEvent event;
  EXPECT_FALSE(stream->Next(&event));
  EXPECT_EQ(stream->status().code(), Code::kDeadlineExceeded);
  EXPECT_EQ(stream->status().message(), "watch pods default: no data for 200 ms");

  server_->Push(idle);
  options.idle_timeout = milliseconds(60000);
  ASSERT_TRUE(client_->Watch(kPods, "default", options, &stream).ok());
  std::thread canceller([&] {
    ASSERT_TRUE(server_->WaitForRequests(2, milliseconds(5000)));
    stream->Cancel();
  });
  EXPECT_FALSE(stream->Next(&event));
  canceller.join();
  EXPECT_EQ(stream->status().code(), Code::kCancelled) << stream->status().ToString();
}

TEST(QueryTest, EncodesReservedCharacters) {
  EXPECT_EQ(EncodeQuery({{"labelSelector", "a in (x, y),b!=c"}, {"limit", "5"}}),
            "labelSelector=a%20in%20%28x%2C%20y%29%2Cb%21%3Dc&limit=5");
}

TEST(WarningTextTest, IsTheQuotedTextUnescaped) {
  EXPECT_EQ(WarningText(R"(299 - "unknown field \"dataa\"")"), R"(unknown field "dataa")");
  EXPECT_EQ(WarningText(R"(299 - "a" "Sat, 28 Nov 2026 07:00:00 GMT")"), "a");
  EXPECT_EQ(WarningText("no quotes"), "no quotes");
  EXPECT_EQ(WarningText(R"(299 - "unterminated)"), R"(299 - "unterminated)");
}

}  // namespace
}  // namespace kube
}  // namespace gaptrain
