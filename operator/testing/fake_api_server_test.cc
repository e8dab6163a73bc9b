// The server as a server: authentication, limits, garbage, keep-alive and
// pipelining, concurrent clients, Stop(), fault injection, the request log
// and the C++ hooks.

#include "operator/testing/fake_api_server.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <sys/socket.h>

#include "operator/testing/server_test_base.h"
#include "services/common/http_client.h"
#include "services/testing/test_files.h"

namespace gaptrain {
namespace kube_testing {
namespace {

using nlohmann::json;

class FakeApiServerTransportTest : public FakeApiServerTest {
 protected:
  void Configure(FakeApiServer::Options* options) override { options->max_body_bytes = 4096; }

  std::unique_ptr<HttpConnection> Connect() {
    std::unique_ptr<HttpConnection> c;
    Status s = HttpConnection::Connect("127.0.0.1", server_->port(), 10, &c);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return c;
  }
};

TEST_F(FakeApiServerTransportTest, AuthenticationAsRecorded) {
  TestClient anonymous(server_->port(), "");
  TestResponse r = anonymous.Get(kPods);
  EXPECT_EQ(r.status, 403);
  EXPECT_EQ(r.json["message"], "pods is forbidden: User \"system:anonymous\" cannot list resource "
                               "\"pods\" in API group \"\" in the namespace \"default\"");
  r = anonymous.Send("PATCH", std::string(kJobs) + "/mnist/status", "{}", "application/merge-patch+json");
  EXPECT_EQ(r.json["message"],
            "trainingjobs.gaptrain.io \"mnist\" is forbidden: User \"system:anonymous\" cannot "
            "patch resource \"trainingjobs/status\" in API group \"gaptrain.io\" in the namespace "
            "\"default\"");
  r = anonymous.Get("/apis");
  EXPECT_EQ(r.status, 403);
  EXPECT_EQ(r.json["message"], "forbidden: User \"system:anonymous\" cannot get path \"/apis\"");
  EXPECT_EQ(anonymous.Get("/healthz").status, 200);
  EXPECT_EQ(anonymous.Get("/version").status, 200);
  TestClient wrong(server_->port(), "wrong");
  r = wrong.Get(kPods);
  EXPECT_EQ(r.status, 401);
  EXPECT_EQ(r.json["reason"], "Unauthorized");
}

TEST_F(FakeApiServerTransportTest, BodiesAboveTheLimitGet413) {
  json big = PodBody("big");
  big["metadata"]["annotations"] = {{"a", std::string(5000, 'x')}};
  std::unique_ptr<HttpConnection> c = Connect();
  const std::string body = big.dump();
  ASSERT_TRUE(c->Send("POST " + std::string(kPods) + " HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " +
                      kTestToken + "\r\nContent-Type: application/json\r\nContent-Length: " +
                      std::to_string(body.size()) + "\r\n\r\n" + body)
                  .ok());
  HttpClientResponse r;
  ASSERT_TRUE(c->ReadResponse(&r).ok());
  EXPECT_EQ(r.status, 413);
  const json status = json::parse(r.body);
  EXPECT_EQ(status["reason"], "RequestEntityTooLarge");
  EXPECT_EQ(status["message"], "Request entity too large: limit is 4096");
  EXPECT_TRUE(c->WaitForClose().ok());
}

TEST_F(FakeApiServerTransportTest, MalformedInputGetsErrorsNotCrashes) {
  TestResponse r = client_->Send("POST", kPods, "{not json");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.json["reason"], "BadRequest");
  EXPECT_EQ(r.json["kind"], "Status");
  EXPECT_EQ(client_->Send("POST", kPods, "[1,2]").status, 400);
  EXPECT_EQ(client_->Send("POST", kPods, R"({"kind":"Pod"})").status, 400);
  EXPECT_EQ(client_->Send("POST", kPods, R"({"apiVersion":"v1","kind":"Pod","spec":7})").status, 400);
  EXPECT_EQ(client_->Send("POST", kPods, R"({"apiVersion":"v1","kind":"Pod","metadata":[]})").status, 400);
  EXPECT_EQ(client_->Send("POST", kPods, "{}", "application/vnd.kubernetes.protobuf").status, 415);
  EXPECT_EQ(client_->Send("DELETE", PodPath("x"), "{bad").status, 400);
  EXPECT_EQ(client_->Send("PATCH", PodPath("x"), "{bad", "application/merge-patch+json").status, 400);
  EXPECT_EQ(client_->Get("/api/v1/namespaces/default/widgets").status, 404);
  EXPECT_EQ(client_->Get("/nothing/here").json["message"], "the server could not find the requested resource");
  EXPECT_EQ(client_->Send("POST", PodPath("x"), "{}").status, 405);
  EXPECT_EQ(client_->Send("POST", "/api", "{}").status, 405);
  EXPECT_EQ(client_->Get(PodPath("x") + "/log").status, 404);
  EXPECT_EQ(client_->Get(PodPath("x") + "/status/extra").status, 404);
  EXPECT_EQ(client_->Get("/api/v1/namespaces/default/pods?dryRun=All").status, 400);

  // Bytes that are not HTTP: 400 and the connection closes.
  std::unique_ptr<HttpConnection> c = Connect();
  ASSERT_TRUE(c->Send("\x01\x02 garbage garbage\r\n\r\n").ok());
  HttpClientResponse r2;
  ASSERT_TRUE(c->ReadResponse(&r2).ok());
  EXPECT_EQ(r2.status, 400);
  EXPECT_TRUE(c->WaitForClose().ok());
  // And the server still serves.
  EXPECT_EQ(client_->Get(kPods).status, 200);
}

TEST_F(FakeApiServerTransportTest, KeepAlivePipeliningAndConnectionClose) {
  std::unique_ptr<HttpConnection> c = Connect();
  const std::string get = "GET " + std::string(kPods) + " HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " +
                          kTestToken + "\r\n\r\n";
  ASSERT_TRUE(c->Send(get + get).ok());
  HttpClientResponse a, b;
  ASSERT_TRUE(c->ReadResponse(&a).ok());
  ASSERT_TRUE(c->ReadResponse(&b).ok());
  EXPECT_EQ(a.status, 200);
  EXPECT_EQ(b.status, 200);
  ASSERT_TRUE(c->Send("GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").ok());
  HttpClientResponse last;
  ASSERT_TRUE(c->ReadResponse(&last).ok());
  EXPECT_EQ(last.body, "ok");
  EXPECT_TRUE(c->WaitForClose().ok());
}

TEST_F(FakeApiServerTransportTest, FaultsFailTheNextMatchingRequests) {
  server_->InjectFault({"", std::string(kPods) + "*", 2, 503, "etcd is on fire"});
  TestResponse r = client_->Get(kPods);
  EXPECT_EQ(r.status, 503);
  EXPECT_EQ(r.json["message"], "etcd is on fire");
  EXPECT_EQ(r.json["reason"], "ServiceUnavailable");
  EXPECT_EQ(r.Header("Retry-After"), "1");
  EXPECT_EQ(client_->Get(PodPath("x")).status, 503);  // the prefix matches
  EXPECT_EQ(client_->Get(kPods).status, 200);          // two, then over

  server_->InjectFault({"PUT", PodPath("p"), 1, 409, "conflict"});
  server_->InjectFault({"", PodPath("p"), 1, 500, "boom"});
  EXPECT_EQ(client_->Get(PodPath("p")).status, 500);
  EXPECT_EQ(client_->Get(PodPath("p")).status, 404);  // the 500 is used up; the PUT fault waits
  EXPECT_EQ(client_->Put(PodPath("p"), PodBody("p")).status, 409);
  server_->InjectFault({"", "/api*", 5, 429, "slow down"});
  server_->ClearFaults();
  EXPECT_EQ(client_->Get(kPods).status, 200);
}

TEST_F(FakeApiServerTransportTest, TheRequestLogCountsWhatWasAsked) {
  server_->ClearRequestLog();
  client_->Post(kPods, PodBody("p"));
  client_->Get(PodPath("p"));
  client_->Get(kPods);
  client_->MergePatch(PodPath("p") + "/status", {{"status", {{"phase", "Running"}}}});
  client_->Get(std::string(kPods) + "?watch=1&timeoutSeconds=1");
  EXPECT_EQ(server_->CountRequests("create", "pods"), 1u);
  EXPECT_EQ(server_->CountRequests("get", "pods"), 1u);
  EXPECT_EQ(server_->CountRequests("list", "pods"), 1u);
  EXPECT_EQ(server_->CountRequests("watch", "pods"), 1u);
  EXPECT_EQ(server_->CountRequests("patch", "pods", "status"), 1u);
  EXPECT_EQ(server_->CountRequests("patch", "pods", ""), 0u);
  EXPECT_EQ(server_->CountRequests("", ""), 5u);
  EXPECT_EQ(server_->CountWriteRequests(), 2u);
  const std::vector<RequestRecord> log = server_->RequestLog();
  ASSERT_EQ(log.size(), 5u);
  EXPECT_EQ(log[3].method, "PATCH");
  EXPECT_EQ(log[3].namespace_name, "default");
  EXPECT_EQ(log[3].name, "p");
  EXPECT_EQ(log[3].code, 200);
  EXPECT_EQ(log[4].query, "watch=1&timeoutSeconds=1");

  // What a reconcile that finds nothing to change looks like.
  const std::string apply = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  k: v\n";
  client_->Apply("/api/v1/namespaces/default/configmaps/c?fieldManager=op", apply);
  const uint64_t rv = server_->resource_version();
  client_->Apply("/api/v1/namespaces/default/configmaps/c?fieldManager=op", apply);
  EXPECT_EQ(server_->resource_version(), rv);
}

TEST_F(FakeApiServerTransportTest, HooksReadAndWriteTheStore) {
  json created;
  ASSERT_TRUE(server_->Create(TrainingJobBody("mnist"), &created).ok());
  EXPECT_EQ(created["spec"]["data"]["format"], "mnist-idx");  // defaults apply
  EXPECT_EQ(server_->Create(TrainingJobBody("mnist")).code(), Status::Code::kAlreadyExists);
  EXPECT_EQ(server_->Create(TrainingJobBody("bad", 0)).code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(server_->Create(json{{"apiVersion", "v9"}, {"kind", "Nope"}}).code(), Status::Code::kNotFound);

  json updated;
  ASSERT_TRUE(server_->Update("tj", "default", "mnist", [](json* job) {
    (*job)["status"] = {{"phase", "Running"}};
  }, &updated).ok());
  EXPECT_EQ(updated["status"]["phase"], "Running");
  EXPECT_EQ(updated["metadata"]["generation"], 1);
  TestResponse seen = client_->Get(std::string(kJobs) + "/mnist");
  EXPECT_EQ(seen.json["status"]["phase"], "Running");

  ASSERT_TRUE(server_->Create(PodBody("a", {{"job", "mnist"}})).ok());
  ASSERT_TRUE(server_->Create(PodBody("b", {{"job", "other"}})).ok());
  std::vector<json> pods;
  ASSERT_TRUE(server_->List("pods", "default", "job=mnist", &pods).ok());
  ASSERT_EQ(pods.size(), 1u);
  EXPECT_EQ(pods[0]["metadata"]["name"], "a");
  EXPECT_FALSE(server_->List("pods", "", "=bad", &pods).ok());
  EXPECT_EQ(server_->Get("gadgets", "default", "x", &updated).code(), Status::Code::kNotFound);

  EXPECT_EQ(server_->Delete("pods", "default", "a", 0, "", "not-its-uid").code(),
            Status::Code::kAborted);  // 409 Conflict: the uid precondition failed
  ASSERT_TRUE(server_->Delete("pods", "default", "a", 0, "", pods[0]["metadata"]["uid"]).ok());
  EXPECT_EQ(server_->Delete("pods", "default", "a").code(), Status::Code::kNotFound);
  EXPECT_EQ(server_->Now().size(), std::string("2026-11-23T06:32:57Z").size());
  EXPECT_EQ(server_->CountRequests("", ""), 1u);  // only the GET above went over HTTP
}

TEST_F(FakeApiServerTransportTest, WaitForSeesWritesFromOtherThreads) {
  std::thread writer([this] {
    TestClient client(server_->port(), kTestToken);
    for (int i = 0; i < 5; ++i) client.Post(kPods, PodBody("p" + std::to_string(i)));
  });
  EXPECT_TRUE(server_->WaitFor([](const StoreView& view) {
    return view.List("pods", "default").size() == 5;
  }, kWait));
  writer.join();
  EXPECT_TRUE(server_->WaitForObject("pods", "default", "p4",
                                     [](const json* pod) { return pod != nullptr; }, kWait));
  const auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(server_->WaitForObject("pods", "default", "never",
                                      [](const json* pod) { return pod != nullptr; },
                                      std::chrono::milliseconds(100)));
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(100));
}

TEST_F(FakeApiServerTransportTest, ConcurrentClientsAndAWatcherAgree) {
  constexpr int kThreads = 8;
  constexpr int kPerThread = 15;
  std::unique_ptr<WatchReader> watch = OpenWatch(
      std::string(kPods) + "?watch=1&resourceVersion=" + std::to_string(server_->resource_version()));
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      TestClient client(server_->port(), kTestToken);
      for (int i = 0; i < kPerThread; ++i) {
        const std::string name = "p-" + std::to_string(t) + "-" + std::to_string(i);
        if (client.Post(kPods, PodBody(name)).status != 201) ++failures;
        if (client.MergePatch(PodPath(name), {{"metadata", {{"labels", {{"n", "1"}}}}}}).status != 200) {
          ++failures;
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(failures, 0);
  uint64_t last = 0;
  std::set<std::string> added;
  for (int i = 0; i < kThreads * kPerThread * 2; ++i) {
    json event;
    ASSERT_TRUE(watch->Next(kWait, &event).ok()) << i;
    const uint64_t rv = std::stoull(event["object"]["metadata"]["resourceVersion"].get<std::string>());
    EXPECT_GT(rv, last);
    last = rv;
    if (event["type"] == "ADDED") added.insert(event["object"]["metadata"]["name"]);
  }
  EXPECT_EQ(added.size(), static_cast<size_t>(kThreads * kPerThread));
  EXPECT_EQ(last, server_->resource_version());
}

TEST_F(FakeApiServerTransportTest, StopClosesEverythingPromptly) {
  std::unique_ptr<WatchReader> watch = OpenWatch(std::string(kPods) + "?watch=1");
  std::unique_ptr<HttpConnection> idle = Connect();
  ASSERT_TRUE(idle->Send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n").ok());
  HttpClientResponse r;
  ASSERT_TRUE(idle->ReadResponse(&r).ok());
  const auto start = std::chrono::steady_clock::now();
  server_->Stop();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  json event;
  EXPECT_EQ(watch->Next(kWait, &event).code(), Status::Code::kOutOfRange);
  EXPECT_TRUE(idle->WaitForClose().ok());
  std::unique_ptr<HttpConnection> refused;
  EXPECT_FALSE(HttpConnection::Connect("127.0.0.1", server_->port(), 1, &refused).ok());
  server_->Stop();  // idempotent
  // The hooks still work.
  EXPECT_TRUE(server_->Create(PodBody("after")).ok());
}

TEST(FakeApiServerStartTest, BadOptionsAreErrors) {
  FakeApiServer::Options options;
  std::unique_ptr<FakeApiServer> server;
  options.address = "not-an-ip";
  EXPECT_EQ(FakeApiServer::Start(options, &server).code(), Status::Code::kInvalidArgument);
  options.address = "127.0.0.1";
  options.custom_resource_definitions = {"kind: CustomResourceDefinition\napiVersion: apiextensions.k8s.io/v1\nmetadata: {name: x}\n"};
  Status s = FakeApiServer::Start(options, &server);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(s.message().find("custom_resource_definitions[0]"), std::string::npos) << s.message();
  options.custom_resource_definitions.clear();
  ASSERT_TRUE(FakeApiServer::Start(options, &server).ok());
  std::unique_ptr<FakeApiServer> second;
  options.port = server->port();
  EXPECT_EQ(FakeApiServer::Start(options, &second).code(), Status::Code::kUnavailable);
  // Without a token every request is served.
  TestClient client(server->port(), "");
  EXPECT_EQ(client.Get(kPods).status, 200);
  const std::string kubeconfig = server->Kubeconfig("team-a");
  EXPECT_NE(kubeconfig.find("server: " + server->url()), std::string::npos);
  EXPECT_NE(kubeconfig.find("namespace: team-a"), std::string::npos);
  EXPECT_EQ(KubeconfigFor("http://h:1", "tok", "ns").find("token: tok") != std::string::npos, true);
}

TEST(FakeApiServerTlsTest, ServesHttpsWithTheGivenCertificate) {
  namespace asio = boost::asio;
  namespace http = boost::beast::http;
  const std::string dir = TestDir("tls");
  const std::string cert = dir + "/cert.pem";
  const std::string key = dir + "/key.pem";
  const std::string cmd = "openssl req -x509 -newkey rsa:2048 -nodes -subj /CN=localhost -days 1 "
                          "-addext subjectAltName=DNS:localhost -keyout '" + key + "' -out '" +
                          cert + "' >/dev/null 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << "openssl could not make a test certificate";
  FakeApiServer::Options options;
  options.bearer_token = kTestToken;
  options.tls_cert_file = cert;
  options.tls_key_file = key;
  std::unique_ptr<FakeApiServer> server;
  ASSERT_TRUE(FakeApiServer::Start(options, &server).ok());
  EXPECT_EQ(server->url().rfind("https://127.0.0.1:", 0), 0u);
  EXPECT_NE(server->Kubeconfig().find("certificate-authority: " + cert), std::string::npos);

  asio::io_context ioc;
  asio::ssl::context context(asio::ssl::context::tls_client);
  context.load_verify_file(cert);
  context.set_verify_mode(asio::ssl::verify_peer);
  asio::ssl::stream<asio::ip::tcp::socket> stream(ioc, context);
  stream.set_verify_callback(asio::ssl::host_name_verification("localhost"));
  stream.next_layer().connect({asio::ip::make_address("127.0.0.1"), server->port()});
  const timeval timeout{10, 0};  // a broken server fails the test, not hangs it
  ::setsockopt(stream.next_layer().native_handle(), SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  stream.handshake(asio::ssl::stream_base::client);
  http::request<http::string_body> request(http::verb::get, kPods, 11);
  request.set(http::field::host, "localhost");
  request.set(http::field::authorization, std::string("Bearer ") + kTestToken);
  http::write(stream, request);
  boost::beast::flat_buffer buffer;
  http::response<http::string_body> response;
  http::read(stream, buffer, response);
  EXPECT_EQ(response.result_int(), 200u);
  EXPECT_EQ(json::parse(response.body())["kind"], "PodList");

  // Plain HTTP on the TLS port gets nothing useful.
  std::unique_ptr<HttpConnection> plain;
  ASSERT_TRUE(HttpConnection::Connect("127.0.0.1", server->port(), 5, &plain).ok());
  ASSERT_TRUE(plain->Send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n").ok());
  HttpClientResponse r;
  EXPECT_FALSE(plain->ReadResponse(&r).ok());
  FakeApiServer::Options half = options;
  half.tls_key_file.clear();
  std::unique_ptr<FakeApiServer> none;
  EXPECT_EQ(FakeApiServer::Start(half, &none).code(), Status::Code::kInvalidArgument);
  half.tls_key_file = dir + "/missing.pem";
  EXPECT_EQ(FakeApiServer::Start(half, &none).code(), Status::Code::kInvalidArgument);
}

}  // namespace
}  // namespace kube_testing
}  // namespace gaptrain
