// Tests FaultProxy in front of a real kube-apiserver (operator/envtest),
// with the project's kube::Client talking plain HTTP to the proxy: requests
// and watch events pass through as the real server answers them, and each
// fault (injected errors, expired, closed and dropped watches) reaches the
// client as the client's own fault handling expects it. One control plane
// for the binary; a proxy, a client and a namespace per test.

#include "operator/testing/fault_proxy.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "operator/envtest/control_plane.h"
#include "operator/envtest/shared_control_plane.h"
#include "operator/kube/client.h"
#include "operator/testing/kube_test_support.h"
#include "services/testing/missing_requirement.h"
#include "services/testing/status_assertions.h"
#include "services/testing/test_processes.h"

namespace gaptrain {
namespace kube_testing {
namespace {

using kube::kConfigMaps;
using kube::WatchEvent;
using nlohmann::json;

json ConfigMap(const std::string& name, const std::string& value = "v") {
  return {{"apiVersion", "v1"},
          {"kind", "ConfigMap"},
          {"metadata", {{"name", name}, {"labels", {{"app", "fault-proxy-test"}}}}},
          {"data", {{"key", value}}}};
}

Status StartProxy(const std::string& upstream_url, const std::string& ca_pem,
                  std::unique_ptr<FaultProxy>* proxy) {
  FaultProxy::Options options;
  options.upstream_url = upstream_url;
  options.upstream_ca_pem = ca_pem;
  return FaultProxy::Start(options, proxy);
}

// Plain bytes to and from the proxy, for what the client does not show
// (header fields, chunk framing). Reads until `complete` holds or the
// proxy closes the connection; a read blocks at most 30 s.
std::string RawExchange(const std::string& url, const std::string& request,
                        bool (*complete)(const std::string&) = nullptr) {
  const int port = std::stoi(url.substr(url.rfind(':') + 1));
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  timeval timeout{30, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string response;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      ::send(fd, request.data(), request.size(), MSG_NOSIGNAL) ==
          static_cast<ssize_t>(request.size())) {
    char buffer[4096];
    while (complete == nullptr || !complete(response)) {
      const ssize_t n = ::recv(fd, buffer, sizeof(buffer), 0);
      if (n <= 0) break;
      response.append(buffer, static_cast<size_t>(n));
    }
  }
  ::close(fd);
  return response;
}

// The header lines of an HTTP response, without Date.
std::vector<std::string> HeaderLinesWithoutDate(const std::string& response) {
  std::vector<std::string> lines;
  const std::string head = response.substr(0, response.find("\r\n\r\n"));
  size_t start = 0;
  while (start < head.size()) {
    size_t end = head.find("\r\n", start);
    if (end == std::string::npos) end = head.size();
    const std::string line = head.substr(start, end - start);
    if (line.compare(0, 5, "Date:") != 0) lines.push_back(line);
    start = end + 2;
  }
  return lines;
}

std::string BodyOf(const std::string& response) {
  const size_t end = response.find("\r\n\r\n");
  return end == std::string::npos ? "" : response.substr(end + 4);
}

// The threads of this process.
int ThreadCount() {
  int count = 0;
  DIR* dir = ::opendir("/proc/self/task");
  if (dir == nullptr) return -1;
  while (const dirent* entry = ::readdir(dir)) {
    if (entry->d_name[0] != '.') ++count;
  }
  ::closedir(dir);
  return count;
}

// A namespace per test, named after it: "passesrequeststhrough".
class FaultProxyTest : public envtest::SharedControlPlaneTest<FaultProxyTest> {
 protected:
  void SetUpOnCluster() override {
    ASSERT_OK(StartProxy(cluster_->url(), cluster_->ca_pem(), &proxy_));
    ASSERT_OK(NewClient(proxy_->url(), &client_));
  }

  void TearDown() override {
    client_.reset();
    proxy_.reset();
  }

  Status NewClient(const std::string& url, std::unique_ptr<kube::Client>* client) {
    kube::ClusterConfig config;
    config.server = url;
    config.token = cluster_->admin_token();
    kube::ClientOptions options;
    options.field_manager = "fault-proxy-test";
    options.request_timeout = std::chrono::seconds(30);
    return kube::Client::New(config, options, client);
  }

  // A watch of the test's ConfigMaps from `resource_version`.
  Status Watch(const std::string& resource_version, std::unique_ptr<kube::WatchStream>* stream,
               kube::ApiError* error = nullptr) {
    kube::WatchOptions options;
    options.resource_version = resource_version;
    options.allow_bookmarks = false;
    options.idle_timeout = std::chrono::seconds(30);  // a relay that stalls fails the test
    return client_->Watch(kConfigMaps, ns_, options, stream, error);
  }

  // Where a watch starts so that it sees only what happens next.
  std::string CurrentVersion() {
    kube::ObjectList list;
    EXPECT_OK(client_->List(kConfigMaps, ns_, {}, &list));
    return list.resource_version;
  }

  std::string Path(const std::string& rest = "") const {
    return "/api/v1/namespaces/" + ns_ + "/configmaps" + rest;
  }

  std::unique_ptr<FaultProxy> proxy_;
  std::unique_ptr<kube::Client> client_;
};

// The next event that is not a BOOKMARK; fails the test when the watch ends.
WatchEvent NextEvent(kube::WatchStream* stream) {
  WatchEvent event;
  while (stream->Next(&event)) {
    if (event.type != WatchEvent::Type::kBookmark) return event;
  }
  ADD_FAILURE() << "the watch ended: " << stream->status().ToString();
  return event;
}

TEST_F(FaultProxyTest, PassesRequestsThrough) {
  json created;
  ASSERT_OK(client_->Create(kConfigMaps, ns_, ConfigMap("a"), &created));
  EXPECT_FALSE(created["metadata"]["uid"].get<std::string>().empty());

  kube::ApiError error;
  Status s = client_->Create(kConfigMaps, ns_, ConfigMap("a"), nullptr, &error);
  EXPECT_TRUE(kube::IsAlreadyExists(s)) << s.ToString();
  EXPECT_EQ(error.http_status, 409);
  EXPECT_EQ(error.reason, "AlreadyExists");
  EXPECT_EQ(error.message, "configmaps \"a\" already exists");

  json got;
  ASSERT_OK(client_->Get(kConfigMaps, ns_, "a", &got));
  EXPECT_EQ(got["metadata"]["uid"], created["metadata"]["uid"]);
  EXPECT_EQ(got["data"]["key"], "v");

  json patched;
  ASSERT_OK(
      client_->MergePatch(kConfigMaps, ns_, "a", {{"data", {{"key", "w"}}}}, &patched));
  EXPECT_EQ(patched["data"]["key"], "w");

  json applied;
  ASSERT_OK(client_->Apply(kConfigMaps, ns_, ConfigMap("b", "applied"), &applied));
  EXPECT_EQ(applied["data"]["key"], "applied");

  // Large enough for the response to be relayed in many reads.
  const std::string big(512 * 1024, 'x');
  json big_created;
  ASSERT_OK(client_->Create(kConfigMaps, ns_, ConfigMap("big", big), &big_created));
  EXPECT_EQ(big_created["data"]["key"], big);

  kube::ObjectList list;
  ASSERT_OK(client_->List(kConfigMaps, ns_, {}, &list));
  EXPECT_EQ(list.items.size(), 3u);
  EXPECT_FALSE(list.resource_version.empty());

  // What the proxy passed on is on the real server.
  json direct;
  ASSERT_OK(cluster_->admin()->Get(kConfigMaps, ns_, "b", &direct));
  EXPECT_EQ(direct["data"]["key"], "applied");

  ASSERT_OK(client_->Delete(kConfigMaps, ns_, "a", {}));
  s = client_->Get(kConfigMaps, ns_, "a", nullptr, &error);
  EXPECT_TRUE(kube::IsNotFound(s)) << s.ToString();
  EXPECT_EQ(error.http_status, 404);
  EXPECT_EQ(error.reason, "NotFound");
  EXPECT_EQ(error.message, "configmaps \"a\" not found");

  for (const ProxiedRequest& r : proxy_->RequestLog()) EXPECT_FALSE(r.injected) << r.path;
}

TEST_F(FaultProxyTest, RelaysWatchEventsAsTheyHappen) {
  std::unique_ptr<kube::WatchStream> watch;
  ASSERT_OK(Watch(CurrentVersion(), &watch));
  // Each event is written after the previous one arrived: the relay must
  // pass them on as they come, not at the end of the response.
  kube::Client* admin = cluster_->admin();
  ASSERT_OK(admin->Create(kConfigMaps, ns_, ConfigMap("w"), nullptr));
  WatchEvent event = NextEvent(watch.get());
  EXPECT_EQ(event.type, WatchEvent::Type::kAdded);
  EXPECT_EQ(event.object["metadata"]["name"], "w");

  ASSERT_OK(admin->MergePatch(kConfigMaps, ns_, "w", {{"data", {{"key", "2"}}}}, nullptr));
  event = NextEvent(watch.get());
  EXPECT_EQ(event.type, WatchEvent::Type::kModified);
  EXPECT_EQ(event.object["data"]["key"], "2");

  ASSERT_OK(admin->Delete(kConfigMaps, ns_, "w", {}));
  event = NextEvent(watch.get());
  EXPECT_EQ(event.type, WatchEvent::Type::kDeleted);
  EXPECT_EQ(event.object["metadata"]["name"], "w");

  const std::vector<ProxiedRequest> log = proxy_->RequestLog();
  ASSERT_FALSE(log.empty());
  EXPECT_TRUE(log.back().watch);
  EXPECT_EQ(log.back().code, 200);
  EXPECT_FALSE(log.back().injected);
}

TEST_F(FaultProxyTest, AWatchTheClientLeavesEndsAtOnce) {
  const std::string version = CurrentVersion();  // its connection's thread stays
  const int threads = ThreadCount();
  std::unique_ptr<kube::WatchStream> watch;
  ASSERT_OK(Watch(version, &watch));
  EXPECT_EQ(ThreadCount(), threads + 1);
  // The relay notices the client's close, not only the server's next event.
  watch.reset();
  EXPECT_TRUE(Eventually([&] { return ThreadCount() == threads; }, std::chrono::seconds(30)))
      << ThreadCount() << " threads, " << threads << " before the watch";
}

TEST_F(FaultProxyTest, InjectedFaultsAnswerMatchingRequestsThenPass) {
  ASSERT_OK(cluster_->admin()->Create(kConfigMaps, ns_, ConfigMap("x"), nullptr));

  proxy_->InjectFault({"GET", Path("*"), 2, 503, "try later"});
  // Another method on the same path passes.
  ASSERT_OK(client_->Create(kConfigMaps, ns_, ConfigMap("y"), nullptr));
  for (int i = 0; i < 2; ++i) {
    kube::ApiError error;
    const Status s = client_->Get(kConfigMaps, ns_, "x", nullptr, &error);
    EXPECT_EQ(s.code(), Status::Code::kUnavailable) << s.ToString();
    EXPECT_TRUE(kube::IsRetryable(s));
    EXPECT_EQ(error.http_status, 503);
    EXPECT_EQ(error.reason, "ServiceUnavailable");
    EXPECT_EQ(error.message, "try later");
  }
  EXPECT_OK(client_->Get(kConfigMaps, ns_, "x", nullptr));

  // An exact path matches only itself; faults are taken in the order injected.
  proxy_->InjectFault({"", Path("/x"), 1, 500, "first"});
  proxy_->InjectFault({"", Path("/x"), 1, 429, "second"});
  EXPECT_TRUE(kube::IsNotFound(client_->Get(kConfigMaps, ns_, "xy", nullptr)));
  kube::ApiError error;
  Status s = client_->Get(kConfigMaps, ns_, "x", nullptr, &error);
  EXPECT_EQ(s.code(), Status::Code::kUnavailable) << s.ToString();
  EXPECT_EQ(error.http_status, 500);
  EXPECT_EQ(error.reason, "InternalError");
  EXPECT_EQ(error.message, "first");
  s = client_->Get(kConfigMaps, ns_, "x", nullptr, &error);
  EXPECT_EQ(s.code(), Status::Code::kResourceExhausted) << s.ToString();
  EXPECT_TRUE(kube::IsRetryable(s));
  EXPECT_EQ(error.reason, "TooManyRequests");
  EXPECT_OK(client_->Get(kConfigMaps, ns_, "x", nullptr));

  // 429 carries Retry-After, as kube-apiserver's does.
  proxy_->InjectFault({"", Path("/x"), 1, 429, "slow down"});
  const std::string raw = RawExchange(
      proxy_->url(), "GET " + Path("/x") + " HTTP/1.1\r\nHost: proxy\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(raw.compare(0, 13, "HTTP/1.1 429 "), 0) << raw;
  EXPECT_NE(raw.find("\r\nRetry-After: 1\r\n"), std::string::npos) << raw;
  const json body = json::parse(BodyOf(raw), nullptr, false);
  EXPECT_EQ(body["kind"], "Status");
  EXPECT_EQ(body["code"], 429);

  proxy_->InjectFault({"", Path("*"), 5, 500});
  proxy_->ClearFaults();
  EXPECT_OK(client_->Get(kConfigMaps, ns_, "x", nullptr));
}

TEST_F(FaultProxyTest, ExpireNextWatchesDeliversGoneThenWatchesWork) {
  proxy_->ExpireNextWatches(1);
  std::unique_ptr<kube::WatchStream> watch;
  ASSERT_OK(Watch("1", &watch));
  WatchEvent event;
  ASSERT_TRUE(watch->Next(&event)) << watch->status().ToString();
  ASSERT_EQ(event.type, WatchEvent::Type::kError);
  const Status gone = kube::WatchErrorStatus("watch", event);
  EXPECT_TRUE(kube::IsGone(gone)) << gone.ToString();
  EXPECT_EQ(event.object["code"], 410);
  EXPECT_FALSE(watch->Next(&event));
  EXPECT_TRUE(watch->status().ok()) << watch->status().ToString();
  std::vector<ProxiedRequest> log = proxy_->RequestLog();
  ASSERT_FALSE(log.empty());
  EXPECT_TRUE(log.back().watch);
  EXPECT_EQ(log.back().code, 200);
  EXPECT_TRUE(log.back().injected);

  // The next watch reaches the server.
  ASSERT_OK(Watch(CurrentVersion(), &watch));
  ASSERT_OK(cluster_->admin()->Create(kConfigMaps, ns_, ConfigMap("after"), nullptr));
  event = NextEvent(watch.get());
  EXPECT_EQ(event.type, WatchEvent::Type::kAdded);
  EXPECT_EQ(event.object["metadata"]["name"], "after");
}

TEST_F(FaultProxyTest, ExpiredWatchIsWhatKubeApiserverSends) {
  std::string recorded;
  ASSERT_OK(kube::ReadRecordedFile("watch-too-old.http", &recorded));
  proxy_->ExpireNextWatches(1);
  const std::string raw = RawExchange(
      proxy_->url(), "GET " + Path("?watch=true&resourceVersion=1") +
                         " HTTP/1.1\r\nHost: proxy\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(HeaderLinesWithoutDate(raw), HeaderLinesWithoutDate(recorded));
  EXPECT_NE(raw.find("\r\nDate: "), std::string::npos);
  EXPECT_EQ(BodyOf(raw), BodyOf(recorded));
}

TEST_F(FaultProxyTest, CloseAllWatchesEndsOpenWatchesCleanly) {
  const std::string version = CurrentVersion();
  std::unique_ptr<kube::WatchStream> first, second;
  ASSERT_OK(Watch(version, &first));
  ASSERT_OK(Watch(version, &second));
  ASSERT_OK(cluster_->admin()->Create(kConfigMaps, ns_, ConfigMap("c"), nullptr));
  EXPECT_EQ(NextEvent(first.get()).type, WatchEvent::Type::kAdded);
  EXPECT_EQ(NextEvent(second.get()).type, WatchEvent::Type::kAdded);

  proxy_->CloseAllWatches();
  WatchEvent event;
  EXPECT_FALSE(first->Next(&event));
  EXPECT_TRUE(first->status().ok()) << first->status().ToString();
  EXPECT_FALSE(second->Next(&event));
  EXPECT_TRUE(second->status().ok()) << second->status().ToString();

  // Requests and new watches go on working.
  ASSERT_OK(client_->Get(kConfigMaps, ns_, "c", nullptr));
  ASSERT_OK(Watch(CurrentVersion(), &first));
  ASSERT_OK(cluster_->admin()->Delete(kConfigMaps, ns_, "c", {}));
  EXPECT_EQ(NextEvent(first.get()).type, WatchEvent::Type::kDeleted);
}

TEST_F(FaultProxyTest, DropAllConnectionsBreaksOpenWatches) {
  std::unique_ptr<kube::WatchStream> watch;
  ASSERT_OK(Watch(CurrentVersion(), &watch));
  ASSERT_OK(client_->Create(kConfigMaps, ns_, ConfigMap("d"), nullptr));
  EXPECT_EQ(NextEvent(watch.get()).type, WatchEvent::Type::kAdded);

  proxy_->DropAllConnections();
  WatchEvent event;
  EXPECT_FALSE(watch->Next(&event));
  EXPECT_EQ(watch->status().code(), Status::Code::kUnavailable) << watch->status().ToString();

  // The client notices its idle connection is gone and opens another.
  json got;
  ASSERT_OK(client_->Get(kConfigMaps, ns_, "d", &got));
  EXPECT_EQ(got["metadata"]["name"], "d");
}

TEST_F(FaultProxyTest, RequestLogRecordsEachRequestAndItsAnswer) {
  proxy_->ClearRequestLog();
  kube::ListOptions list_options;
  list_options.label_selector = "app=x";
  ASSERT_OK(client_->List(kConfigMaps, ns_, list_options, nullptr));
  EXPECT_TRUE(kube::IsNotFound(client_->Get(kConfigMaps, ns_, "missing", nullptr)));
  proxy_->InjectFault({"GET", Path("/missing"), 1, 503});
  EXPECT_FALSE(client_->Get(kConfigMaps, ns_, "missing", nullptr).ok());
  std::unique_ptr<kube::WatchStream> watch;
  ASSERT_OK(Watch("", &watch));

  const std::vector<ProxiedRequest> log = proxy_->RequestLog();
  ASSERT_EQ(log.size(), 4u);
  EXPECT_EQ(log[0].method, "GET");
  EXPECT_EQ(log[0].path, Path());
  EXPECT_EQ(log[0].query, "labelSelector=app%3Dx&limit=500");
  EXPECT_FALSE(log[0].watch);
  EXPECT_EQ(log[0].code, 200);
  EXPECT_FALSE(log[0].injected);

  EXPECT_EQ(log[1].path, Path("/missing"));
  EXPECT_EQ(log[1].query, "");
  EXPECT_EQ(log[1].code, 404);
  EXPECT_FALSE(log[1].injected);

  EXPECT_EQ(log[2].path, Path("/missing"));
  EXPECT_EQ(log[2].code, 503);
  EXPECT_TRUE(log[2].injected);

  EXPECT_EQ(log[3].method, "GET");
  EXPECT_EQ(log[3].path, Path());
  EXPECT_TRUE(log[3].watch);
  EXPECT_NE(log[3].query.find("watch=1"), std::string::npos) << log[3].query;
  EXPECT_EQ(log[3].code, 200);
  EXPECT_FALSE(log[3].injected);

  proxy_->ClearRequestLog();
  EXPECT_TRUE(proxy_->RequestLog().empty());
}

TEST_F(FaultProxyTest, StopEndsEverythingAndRefusesLaterRequests) {
  std::unique_ptr<kube::WatchStream> watch;
  ASSERT_OK(Watch(CurrentVersion(), &watch));
  proxy_->Stop();
  WatchEvent event;
  EXPECT_FALSE(watch->Next(&event));
  EXPECT_EQ(watch->status().code(), Status::Code::kUnavailable) << watch->status().ToString();

  const Status s = client_->Get(kConfigMaps, ns_, "any", nullptr);
  EXPECT_EQ(s.code(), Status::Code::kUnavailable) << s.ToString();
  proxy_->Stop();  // idempotent
}

TEST_F(FaultProxyTest, VerifiesTheUpstreamCertificate) {
  kube::TestCertificates certs;
  ASSERT_OK(kube::MakeTestCertificates(TestTempDir("certs"), &certs));
  std::unique_ptr<FaultProxy> proxy;
  ASSERT_OK(StartProxy(cluster_->url(), certs.other_ca_pem, &proxy));
  std::unique_ptr<kube::Client> client;
  ASSERT_OK(NewClient(proxy->url(), &client));
  const Status s = client->Get(kConfigMaps, ns_, "any", nullptr);
  EXPECT_EQ(s.code(), Status::Code::kUnavailable) << s.ToString();
  const std::vector<ProxiedRequest> log = proxy->RequestLog();
  ASSERT_EQ(log.size(), 1u);
  EXPECT_EQ(log[0].code, 0);  // no answer
}

TEST(FaultProxyOptionsTest, RefusesWhatItCannotProxyTo) {
  std::unique_ptr<FaultProxy> proxy;
  EXPECT_EQ(StartProxy("http://127.0.0.1:1", "x", &proxy).code(),
            Status::Code::kInvalidArgument);
  EXPECT_EQ(StartProxy("https://127.0.0.1:1", "", &proxy).code(),
            Status::Code::kInvalidArgument);
  EXPECT_EQ(StartProxy("https://127.0.0.1:1", "not a certificate", &proxy).code(),
            Status::Code::kInvalidArgument);
  EXPECT_EQ(proxy, nullptr);
}

}  // namespace
}  // namespace kube_testing
}  // namespace gaptrain
