// Tests the Client and the Reflector against a real kube-apiserver
// (operator/envtest: etcd, kube-apiserver with RBAC, the controller manager
// for garbage collection, the TrainingJob CRD): the API's semantics as the
// server itself has them, not as a recording or a fake remembers them.
// What the Client asks must be what the server understands, and what the
// server answers (objects, errors with their causes, watch events, 410s)
// must come out of the Client as documented.
//
// One control plane for the binary; a namespace per test, so tests do not
// see each other's objects. Every object a test makes carries the label
// test=<namespace>, and lists and watches select by it (the controller
// manager adds a ConfigMap kube-root-ca.crt to every namespace).
//
// What a real server cannot be made to do on demand (a 503, a dropped
// connection) comes from a FaultProxy in front of the same server. A real
// 410 comes from etcd: the control plane serves Secrets without a watch
// cache, and CompactEtcd() makes older resourceVersions too old.
//
// Not here: Tables (the Client asks only for application/json), and the
// shapes of malformed responses, exact request bytes and deadlines
// (client_test, reflector_test: the ScriptedServer).

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "operator/envtest/api_resources.h"
#include "operator/envtest/control_plane.h"
#include "operator/envtest/shared_control_plane.h"
#include "operator/kube/api_error.h"
#include "operator/kube/client.h"
#include "operator/kube/reflector.h"
#include "operator/kube/resource.h"
#include "operator/testing/fault_proxy.h"
#include "services/base/backoff.h"
#include "services/testing/missing_requirement.h"
#include "services/testing/status_assertions.h"
#include "services/testing/test_processes.h"

namespace gaptrain {
namespace kube {
namespace {

using kube_testing::FaultProxy;
using kube_testing::ProxiedRequest;
using kube_testing::ProxyFault;
using nlohmann::json;
using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr char kCrdFile[] = "deploy/crd/gaptrain.io_trainingjobs.yaml";
constexpr char kHoldFinalizer[] = "gaptrain.io/test-hold";

std::string Name(const json& object) {
  return object.value("metadata", json::object()).value("name", "");
}
std::string Rv(const json& object) {
  return object.value("metadata", json::object()).value("resourceVersion", "");
}
uint64_t RvNumber(const json& object) { return std::stoull(Rv(object)); }

std::vector<std::string> SortedNames(const std::vector<json>& items) {
  std::vector<std::string> names;
  for (const json& item : items) names.push_back(Name(item));
  std::sort(names.begin(), names.end());
  return names;
}

// Copies of what a Reflector handed over: its calls as lines ("replace: a
// b", "add c", ...) and the objects they leave (name -> resourceVersion).
class StateHandler : public ReflectorHandler {
 public:
  void OnReplace(std::vector<json> items, const std::string&) override {
    std::lock_guard<std::mutex> lock(mu_);
    objects_.clear();
    std::string line = "replace:";
    for (const json& item : SortedItems(std::move(items))) {
      line += " " + Name(item);
      objects_[Name(item)] = Rv(item);
    }
    RecordLocked(line);
  }
  void OnAdd(const json& o) override { Change("add", o, false); }
  void OnUpdate(const json& o) override { Change("update", o, false); }
  void OnDelete(const json& o) override { Change("delete", o, true); }

  std::vector<std::string> calls() const {
    std::lock_guard<std::mutex> lock(mu_);
    return calls_;
  }
  // Waits (30 s at most) until the objects are exactly `expected`.
  bool WaitForObjects(const std::map<std::string, std::string>& expected) const {
    std::unique_lock<std::mutex> lock(mu_);
    return changed_.wait_for(lock, seconds(30), [&] { return objects_ == expected; });
  }
  std::map<std::string, std::string> objects() const {
    std::lock_guard<std::mutex> lock(mu_);
    return objects_;
  }

 private:
  static std::vector<json> SortedItems(std::vector<json> items) {
    std::sort(items.begin(), items.end(),
              [](const json& a, const json& b) { return Name(a) < Name(b); });
    return items;
  }
  void Change(const std::string& what, const json& object, bool remove) {
    std::lock_guard<std::mutex> lock(mu_);
    if (remove) {
      objects_.erase(Name(object));
    } else {
      objects_[Name(object)] = Rv(object);
    }
    RecordLocked(what + " " + Name(object));
  }
  void RecordLocked(const std::string& line) {
    calls_.push_back(line);
    changed_.notify_all();
  }

  mutable std::mutex mu_;
  mutable std::condition_variable changed_;
  std::vector<std::string> calls_;
  std::map<std::string, std::string> objects_;
};

class ClientApiTest : public envtest::SharedControlPlaneTest<ClientApiTest> {
 public:
  static envtest::ControlPlane::Options ControlPlaneOptions() {
    envtest::ControlPlane::Options options = SharedControlPlaneTest::ControlPlaneOptions();
    options.controller_manager = true;  // the garbage collector
    options.crd_files = {kCrdFile};
    options.uncached_resources = {"secrets"};  // a real 410 after CompactEtcd()
    return options;
  }

 protected:
  void SetUpOnCluster() override {
    client_ = cluster_->admin();
    selector_ = "test=" + ns_;
  }

  void TearDown() override {
    if (reflector_ != nullptr) reflector_->Stop();
    if (reflector_thread_.joinable()) reflector_thread_.join();
    if (proxy_ != nullptr) proxy_->Stop();
  }

  // An admin client of its own, to url() or through the proxy.
  std::unique_ptr<Client> NewClient(const std::string& field_manager, bool proxied = false) {
    ClusterConfig config;
    config.server = proxied ? proxy_->url() : cluster_->url();
    if (!proxied) config.ca_pem = cluster_->ca_pem();
    config.token = cluster_->admin_token();
    config.default_namespace = ns_;
    ClientOptions options;
    options.field_manager = field_manager;
    options.request_timeout = seconds(10);
    std::unique_ptr<Client> client;
    const Status s = Client::New(config, options, &client);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return client;
  }

  // A FaultProxy in front of the control plane and a client through it.
  void StartProxy() {
    FaultProxy::Options options;
    options.upstream_url = cluster_->url();
    options.upstream_ca_pem = cluster_->ca_pem();
    ASSERT_OK(FaultProxy::Start(options, &proxy_));
    proxied_ = NewClient("proxied", /*proxied=*/true);
  }

  json ConfigMap(const std::string& name, const json& data = {{"key", "value"}},
                 const json& labels = json::object()) const {
    json object = {{"apiVersion", "v1"},
                   {"kind", "ConfigMap"},
                   {"metadata", {{"name", name}, {"labels", {{"test", ns_}}}}},
                   {"data", data}};
    for (const auto& [key, value] : labels.items()) object["metadata"]["labels"][key] = value;
    return object;
  }

  json Secret(const std::string& name, const std::string& value = "v") const {
    return {{"apiVersion", "v1"},
            {"kind", "Secret"},
            {"metadata", {{"name", name}, {"labels", {{"test", ns_}}}}},
            {"stringData", {{"key", value}}}};
  }

  static json TrainingJob(const std::string& name, int replicas = 2) {
    return {{"apiVersion", "gaptrain.io/v1alpha1"},
            {"kind", "TrainingJob"},
            {"metadata", {{"name", name}}},
            {"spec",
             {{"data", {{"path", "/data/mnist"}}},
              {"training", {{"epochs", 1}}},
              {"workers", {{"replicas", replicas}}}}}};
  }

  // A ConfigMap that `owner` (a TrainingJob) owns, as the operator's
  // children are owned.
  json Dependent(const std::string& name, const json& owner, bool block_owner_deletion) const {
    json object = ConfigMap(name);
    object["metadata"]["ownerReferences"] = {{{"apiVersion", "gaptrain.io/v1alpha1"},
                                              {"kind", "TrainingJob"},
                                              {"name", Name(owner)},
                                              {"uid", owner["metadata"]["uid"]},
                                              {"controller", true},
                                              {"blockOwnerDeletion", block_owner_deletion}}};
    return object;
  }

  bool Gone(const Resource& resource, const std::string& name) const {
    json object;
    return IsNotFound(client_->Get(resource, ns_, name, &object));
  }

  WatchOptions Watching(const std::string& resource_version) const {
    WatchOptions options;
    options.resource_version = resource_version;
    options.label_selector = selector_;
    options.idle_timeout = seconds(20);  // no read blocks for longer
    return options;
  }

  // The next `n` events other than BOOKMARKs, as "ADDED name"; fewer when
  // the watch ends first.
  static std::vector<std::string> NextEvents(WatchStream* stream, size_t n,
                                             std::vector<WatchEvent>* events = nullptr) {
    std::vector<std::string> lines;
    WatchEvent event;
    while (lines.size() < n && stream->Next(&event)) {
      if (event.type == WatchEvent::Type::kBookmark) continue;
      lines.push_back(std::string(WatchEventTypeName(event.type)) + " " + Name(event.object));
      if (events != nullptr) events->push_back(event);
    }
    return lines;
  }

  Reflector::Options ReflectorOptions() const {
    Reflector::Options options;
    options.label_selector = selector_;
    options.backoff.initial = milliseconds(5);
    options.backoff.max = milliseconds(20);
    options.backoff_seed = 7;
    options.watch_timeout_seconds = 60;
    options.idle_timeout = seconds(30);
    return options;
  }

  void StartReflector(Client* client, const Resource& resource, const Reflector::Options& options) {
    reflector_ = std::make_unique<Reflector>(client, resource, ns_, options, &handler_);
    reflector_thread_ = std::thread([this] { reflector_->Run(); });
  }

  // The watch requests the proxy relayed to the server (not injected).
  // The watches the server answered. One still in flight (code 0) is not
  // counted yet: the proxy may still answer it with an injected fault.
  std::vector<ProxiedRequest> RelayedWatches() const {
    std::vector<ProxiedRequest> out;
    for (const ProxiedRequest& r : proxy_->RequestLog()) {
      if (r.watch && r.code != 0 && !r.injected) out.push_back(r);
    }
    return out;
  }

  // The watch through the proxy is down, and stays down (every list and
  // watch of `path` answered 503) until ClearFaults(): changes made now
  // happen while the Reflector is not watching.
  void TakeTheWatchDown(const std::string& path) {
    const uint64_t failures = reflector_->stats().failures;
    proxy_->InjectFault({"GET", path, 1 << 30, 503, "the watch is down"});
    proxy_->DropAllConnections();
    ASSERT_TRUE(Eventually([&] { return reflector_->stats().failures >= failures + 2; },
                           seconds(30)))
        << "the Reflector did not notice the dropped watch";
  }

  std::string selector_;
  Client* client_ = nullptr;
  std::unique_ptr<FaultProxy> proxy_;
  std::unique_ptr<Client> proxied_;
  std::unique_ptr<Client> direct_;  // a Reflector's own, not through the proxy
  StateHandler handler_;
  std::unique_ptr<Reflector> reflector_;
  std::thread reflector_thread_;
};

// ---- answers and errors -------------------------------------------------

TEST_F(ClientApiTest, CreateGetUpdatePatchDeleteAndTheirErrors) {
  json created;
  ASSERT_OK(client_->Create(kConfigMaps, ns_, ConfigMap("settings", {{"a", "1"}}), &created));
  EXPECT_EQ(created["metadata"]["namespace"], ns_);
  EXPECT_FALSE(created["metadata"].value("uid", "").empty());
  EXPECT_FALSE(Rv(created).empty());

  json got;
  ASSERT_OK(client_->Get(kConfigMaps, ns_, "settings", &got));
  EXPECT_EQ(got["metadata"]["uid"], created["metadata"]["uid"]);
  EXPECT_EQ(got["data"], json({{"a", "1"}}));

  ApiError error;
  Status s = client_->Create(kConfigMaps, ns_, ConfigMap("settings"), nullptr, &error);
  EXPECT_TRUE(IsAlreadyExists(s)) << s.ToString();
  EXPECT_FALSE(IsConflict(s));
  EXPECT_EQ(s.message(),
            "create configmaps " + ns_ +
                "/settings: 409 AlreadyExists: configmaps \"settings\" already exists");
  EXPECT_EQ(error.http_status, 409);
  EXPECT_EQ(error.reason, "AlreadyExists");

  got["data"]["a"] = "2";
  json updated;
  ASSERT_OK(client_->Update(kConfigMaps, ns_, got, &updated));
  EXPECT_EQ(updated["data"], json({{"a", "2"}}));
  EXPECT_GT(RvNumber(updated), RvNumber(created));

  // RFC 7386: null removes a key, the rest merges.
  json patched;
  ASSERT_OK(client_->MergePatch(kConfigMaps, ns_, "settings",
                                {{"data", {{"a", nullptr}, {"b", "3"}}}}, &patched));
  EXPECT_EQ(patched["data"], json({{"b", "3"}}));
  EXPECT_EQ(patched["metadata"]["labels"]["test"], ns_);

  json deleted;
  ASSERT_OK(client_->Delete(kConfigMaps, ns_, "settings", {}, &deleted));
  s = client_->Get(kConfigMaps, ns_, "settings", &got, &error);
  EXPECT_TRUE(IsNotFound(s)) << s.ToString();
  EXPECT_EQ(s.message(),
            "get configmaps " + ns_ + "/settings: 404 NotFound: configmaps \"settings\" not found");
  EXPECT_EQ(error.http_status, 404);
  EXPECT_EQ(error.reason, "NotFound");
  EXPECT_TRUE(IsNotFound(client_->Delete(kConfigMaps, ns_, "settings", {})));
  EXPECT_TRUE(
      IsNotFound(client_->MergePatch(kConfigMaps, ns_, "settings", {{"data", {}}}, nullptr)));
  EXPECT_TRUE(IsNotFound(client_->Update(kConfigMaps, ns_, ConfigMap("settings"), nullptr)));
}

TEST_F(ClientApiTest, InvalidObjectsAreInvalidWithCausesNamingTheField) {
  json job = TrainingJob("bad", /*replicas=*/0);  // minimum 1
  job["spec"]["workers"]["restartPolicy"] = "Sometimes";
  ApiError error;
  Status s = client_->Create(kTrainingJobs, ns_, job, nullptr, &error);
  EXPECT_TRUE(IsInvalid(s)) << s.ToString();
  EXPECT_FALSE(IsRetryable(s));
  EXPECT_EQ(s.message().rfind("create trainingjobs " + ns_ +
                                  "/bad: 422 Invalid: TrainingJob.gaptrain.io \"bad\" is invalid: ",
                              0),
            0u)
      << s.message();
  EXPECT_EQ(error.http_status, 422);
  EXPECT_EQ(error.reason, "Invalid");
  std::map<std::string, std::string> causes;  // field -> reason
  for (const ApiError::Cause& cause : error.causes) causes[cause.field] = cause.reason;
  EXPECT_EQ(causes["spec.workers.replicas"], "FieldValueInvalid");
  EXPECT_EQ(causes["spec.workers.restartPolicy"], "FieldValueNotSupported");

  // A built-in kind's own validation.
  s = client_->Create(kConfigMaps, ns_, ConfigMap("Not_A_Name"), nullptr, &error);
  EXPECT_TRUE(IsInvalid(s)) << s.ToString();
  EXPECT_EQ(error.http_status, 422);
  ASSERT_FALSE(error.causes.empty());
  EXPECT_EQ(error.causes[0].field, "metadata.name");
}

TEST_F(ClientApiTest, AWrongTokenIsUnauthenticatedAndAMissingRoleForbidden) {
  ClusterConfig config;
  config.server = cluster_->url();
  config.ca_pem = cluster_->ca_pem();
  config.token = "not-a-token";
  std::unique_ptr<Client> stranger;
  ASSERT_OK(Client::New(config, ClientOptions(), &stranger));
  ObjectList list;
  Status s = stranger->List(kConfigMaps, ns_, {}, &list);
  EXPECT_EQ(s.code(), Status::Code::kUnauthenticated) << s.ToString();
  EXPECT_EQ(s.message(), "list configmaps " + ns_ + ": 401 Unauthorized: Unauthorized");

  ASSERT_OK(client_->Create(envtest::kServiceAccounts, ns_,
                            {{"apiVersion", "v1"},
                             {"kind", "ServiceAccount"},
                             {"metadata", {{"name", "nobody"}}}},
                            nullptr));
  std::string token;
  ASSERT_OK(cluster_->ServiceAccountToken(ns_, "nobody", &token));
  std::unique_ptr<Client> nobody;
  ASSERT_OK(cluster_->NewClient(token, &nobody));
  ApiError error;
  s = nobody->Get(kConfigMaps, ns_, "anything", nullptr, &error);
  EXPECT_EQ(s.code(), Status::Code::kPermissionDenied) << s.ToString();
  EXPECT_EQ(error.http_status, 403);
  EXPECT_EQ(s.message(), "get configmaps " + ns_ + "/anything: 403 Forbidden: configmaps " +
                             "\"anything\" is forbidden: User \"system:serviceaccount:" + ns_ +
                             ":nobody\" cannot get resource \"configmaps\" in API group \"\" in "
                             "the namespace \"" + ns_ + "\"");
}

// ---- lists ----------------------------------------------------------------

TEST_F(ClientApiTest, ListPagesThroughEveryItemOnce) {
  std::vector<std::string> expected;
  for (int i = 0; i < 23; ++i) {
    const std::string name = "item-" + std::to_string(100 + i);
    ASSERT_OK(client_->Create(kConfigMaps, ns_, ConfigMap(name), nullptr));
    expected.push_back(name);
  }
  ASSERT_NO_FATAL_FAILURE(StartProxy());
  ListOptions options;
  options.label_selector = selector_;
  options.page_size = 5;
  ObjectList list;
  ASSERT_OK(proxied_->List(kConfigMaps, ns_, options, &list));
  EXPECT_EQ(SortedNames(list.items), expected);
  EXPECT_FALSE(list.resource_version.empty());
  // The server leaves apiVersion and kind out of list items; the Client
  // fills them in.
  EXPECT_EQ(list.items[0]["apiVersion"], "v1");
  EXPECT_EQ(list.items[0]["kind"], "ConfigMap");
  const std::vector<ProxiedRequest> pages = proxy_->RequestLog();
  ASSERT_EQ(pages.size(), 5u) << "23 items, 5 a page";
  EXPECT_EQ(pages[0].query.find("continue="), std::string::npos);
  for (size_t i = 1; i < pages.size(); ++i) {
    EXPECT_NE(pages[i].query.find("continue="), std::string::npos) << pages[i].query;
  }

  // A list at the page's resourceVersion is the same set.
  proxy_->ClearRequestLog();
  options.page_size = 0;
  ASSERT_OK(proxied_->List(kConfigMaps, ns_, options, &list));
  EXPECT_EQ(SortedNames(list.items), expected);
  EXPECT_EQ(proxy_->RequestLog().size(), 1u);
}

TEST_F(ClientApiTest, LabelAndFieldSelectors) {
  ASSERT_OK(client_->Create(kConfigMaps, ns_, ConfigMap("a", {}, {{"tier", "web"}}), nullptr));
  ASSERT_OK(client_->Create(kConfigMaps, ns_, ConfigMap("b", {}, {{"tier", "db"}}), nullptr));
  ASSERT_OK(client_->Create(kConfigMaps, ns_, ConfigMap("c"), nullptr));
  auto names = [&](const std::string& labels, const std::string& fields) {
    ListOptions options;
    options.label_selector = labels;
    options.field_selector = fields;
    ObjectList list;
    const Status s = client_->List(kConfigMaps, ns_, options, &list);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return SortedNames(list.items);
  };
  using Names = std::vector<std::string>;
  EXPECT_EQ(names(selector_ + ",tier=web", ""), Names{"a"});
  EXPECT_EQ(names(selector_ + ",tier in (web, db)", ""), (Names{"a", "b"}));
  EXPECT_EQ(names(selector_ + ",tier!=web", ""), (Names{"b", "c"}));
  EXPECT_EQ(names(selector_ + ",!tier", ""), Names{"c"});
  EXPECT_EQ(names(selector_ + ",tier", ""), (Names{"a", "b"}));
  EXPECT_EQ(names("", "metadata.name=b"), Names{"b"});
  EXPECT_EQ(names(selector_, "metadata.name!=b"), (Names{"a", "c"}));

  ApiError error;
  ListOptions bad;
  bad.field_selector = "data.key=value";  // ConfigMaps select by metadata fields only
  ObjectList list;
  Status s = client_->List(kConfigMaps, ns_, bad, &list, &error);
  EXPECT_TRUE(IsInvalid(s)) << s.ToString();
  EXPECT_EQ(error.http_status, 400);
  EXPECT_EQ(s.message(), "list configmaps " + ns_ +
                             ": 400 BadRequest: \"data.key\" is not a known field selector: "
                             "only \"metadata.name\", \"metadata.namespace\"");
  bad.field_selector = "";
  bad.label_selector = "tier in web";
  s = client_->List(kConfigMaps, ns_, bad, &list, &error);
  EXPECT_TRUE(IsInvalid(s)) << s.ToString();
  EXPECT_EQ(error.http_status, 400);
}

TEST_F(ClientApiTest, ListAndWatchSpanEveryNamespace) {
  const std::string other = ns_ + "-2";
  ASSERT_OK(cluster_->CreateNamespace(other));
  ASSERT_OK(client_->Create(kConfigMaps, ns_, ConfigMap("here"), nullptr));
  ASSERT_OK(client_->Create(kConfigMaps, other, ConfigMap("there"), nullptr));
  ListOptions options;
  options.label_selector = selector_;
  ObjectList list;
  ASSERT_OK(client_->List(kConfigMaps, kAllNamespaces, options, &list));
  std::set<std::string> keys;
  for (const json& item : list.items) {
    keys.insert(item["metadata"]["namespace"].get<std::string>() + "/" + Name(item));
  }
  EXPECT_EQ(keys, (std::set<std::string>{ns_ + "/here", other + "/there"}));

  std::unique_ptr<WatchStream> stream;
  ASSERT_OK(client_->Watch(kConfigMaps, kAllNamespaces, Watching(list.resource_version), &stream));
  ASSERT_OK(client_->Create(kConfigMaps, other, ConfigMap("later"), nullptr));
  std::vector<WatchEvent> events;
  EXPECT_EQ(NextEvents(stream.get(), 1, &events), std::vector<std::string>{"ADDED later"});
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].object["metadata"]["namespace"], other);
}

// ---- optimistic concurrency -----------------------------------------------

TEST_F(ClientApiTest, AStaleResourceVersionIsAConflict) {
  json first;
  ASSERT_OK(client_->Create(kConfigMaps, ns_, ConfigMap("shared", {{"n", "0"}}), &first));
  json mine = first;
  mine["data"]["n"] = "1";
  ASSERT_OK(client_->Update(kConfigMaps, ns_, mine, nullptr));

  json theirs = first;  // read before that update
  theirs["data"]["n"] = "2";
  ApiError error;
  Status s = client_->Update(kConfigMaps, ns_, theirs, nullptr, &error);
  EXPECT_TRUE(IsConflict(s)) << s.ToString();
  EXPECT_FALSE(IsAlreadyExists(s));
  EXPECT_EQ(s.message(), "update configmaps " + ns_ +
                             "/shared: 409 Conflict: Operation cannot be fulfilled on configmaps "
                             "\"shared\": the object has been modified; please apply your "
                             "changes to the latest version and try again");
  EXPECT_EQ(error.reason, "Conflict");
  // A merge patch that names the resourceVersion is checked the same way.
  s = client_->MergePatch(kConfigMaps, ns_, "shared",
                          {{"metadata", {{"resourceVersion", Rv(first)}}}, {"data", {{"n", "3"}}}},
                          nullptr);
  EXPECT_TRUE(IsConflict(s)) << s.ToString();
  // Without a resourceVersion, the last write wins.
  theirs["metadata"].erase("resourceVersion");
  ASSERT_OK(client_->Update(kConfigMaps, ns_, theirs, nullptr));
  json now;
  ASSERT_OK(client_->Get(kConfigMaps, ns_, "shared", &now));
  EXPECT_EQ(now["data"]["n"], "2");
}

TEST_F(ClientApiTest, DeletePreconditionsOnUidAndResourceVersion) {
  json created, updated;
  ASSERT_OK(client_->Create(kConfigMaps, ns_, ConfigMap("guarded"), &created));
  ASSERT_OK(client_->MergePatch(kConfigMaps, ns_, "guarded", {{"data", {{"key", "new"}}}},
                                &updated));
  const std::string uid = created["metadata"]["uid"];

  DeleteOptions stale;
  stale.precondition_resource_version = Rv(created);
  Status s = client_->Delete(kConfigMaps, ns_, "guarded", stale);
  EXPECT_TRUE(IsConflict(s)) << s.ToString();
  EXPECT_EQ(s.message(), "delete configmaps " + ns_ +
                             "/guarded: 409 Conflict: Operation cannot be fulfilled on ConfigMap "
                             "\"guarded\": the ResourceVersion in the precondition (" +
                             Rv(created) + ") does not match the ResourceVersion in record (" +
                             Rv(updated) + "). The object might have been modified");
  DeleteOptions other_uid;
  other_uid.precondition_uid = "00000000-0000-0000-0000-000000000000";
  s = client_->Delete(kConfigMaps, ns_, "guarded", other_uid);
  EXPECT_TRUE(IsConflict(s)) << s.ToString();
  EXPECT_NE(s.message().find("the UID in the precondition (00000000-0000-0000-0000-000000000000) "
                             "does not match the UID in record (" + uid + ")"),
            std::string::npos)
      << s.message();
  EXPECT_FALSE(Gone(kConfigMaps, "guarded"));

  DeleteOptions exact;
  exact.precondition_uid = uid;
  exact.precondition_resource_version = Rv(updated);
  ASSERT_OK(client_->Delete(kConfigMaps, ns_, "guarded", exact));
  EXPECT_TRUE(Gone(kConfigMaps, "guarded"));

  // The same name again is another object: the old uid does not delete it.
  json again;
  ASSERT_OK(client_->Create(kConfigMaps, ns_, ConfigMap("guarded"), &again));
  EXPECT_NE(again["metadata"]["uid"], uid);
  DeleteOptions old_uid;
  old_uid.precondition_uid = uid;
  EXPECT_TRUE(IsConflict(client_->Delete(kConfigMaps, ns_, "guarded", old_uid)));
  EXPECT_FALSE(Gone(kConfigMaps, "guarded"));
}

// ---- server-side apply ------------------------------------------------------

// The fieldsV1 the manager owns through Apply, or null.
json AppliedFields(const json& object, const std::string& manager) {
  for (const json& entry : object["metadata"].value("managedFields", json::array())) {
    if (entry.value("manager", "") == manager && entry.value("operation", "") == "Apply") {
      return entry.value("fieldsV1", json());
    }
  }
  return json();
}

bool Owns(const json& object, const std::string& manager, const std::string& data_key) {
  const json fields = AppliedFields(object, manager);
  return fields.is_object() && fields.contains("f:data") &&
         fields["f:data"].contains("f:" + data_key);
}

TEST_F(ClientApiTest, ServerSideApplyCreatesThenUpdates) {
  std::unique_ptr<Client> a = NewClient("manager-a");
  // No apiVersion or kind: the Client fills them in from the Resource.
  json config = {{"metadata", {{"name", "applied"}, {"labels", {{"test", ns_}}}}},
                 {"data", {{"x", "1"}, {"y", "2"}}}};
  json applied;
  ASSERT_OK(a->Apply(kConfigMaps, ns_, config, &applied));
  EXPECT_FALSE(applied["metadata"].value("uid", "").empty()) << "created";
  EXPECT_EQ(applied["data"], json({{"x", "1"}, {"y", "2"}}));
  EXPECT_TRUE(Owns(applied, "manager-a", "x"));

  json again;
  ASSERT_OK(a->Apply(kConfigMaps, ns_, config, &again));
  EXPECT_EQ(Rv(again), Rv(applied)) << "applying the same again writes nothing";

  // A changed value is updated; a field left out of the applied
  // configuration is removed, since manager-a was its only owner.
  config["data"] = {{"x", "3"}};
  json changed;
  ASSERT_OK(a->Apply(kConfigMaps, ns_, config, &changed));
  EXPECT_EQ(changed["data"], json({{"x", "3"}}));
  EXPECT_GT(RvNumber(changed), RvNumber(applied));
  EXPECT_EQ(changed["metadata"]["uid"], applied["metadata"]["uid"]);
}

// The Client always applies with force=true (client.h): an operator owns
// what it applies. So two managers applying the same field with different
// values never conflict here; the later one takes the field over.
TEST_F(ClientApiTest, AForcedApplyTakesOwnershipFromAnotherManager) {
  std::unique_ptr<Client> a = NewClient("manager-a");
  std::unique_ptr<Client> b = NewClient("manager-b");
  json applied;
  ASSERT_OK(a->Apply(kConfigMaps, ns_, ConfigMap("contested", {{"key", "a"}, {"only-a", "1"}}),
                     &applied));
  EXPECT_TRUE(Owns(applied, "manager-a", "key"));

  ASSERT_OK(b->Apply(kConfigMaps, ns_, ConfigMap("contested", {{"key", "b"}}), &applied));
  EXPECT_EQ(applied["data"], json({{"key", "b"}, {"only-a", "1"}}));
  EXPECT_TRUE(Owns(applied, "manager-b", "key"));
  EXPECT_FALSE(Owns(applied, "manager-a", "key")) << applied["metadata"]["managedFields"].dump();
  EXPECT_TRUE(Owns(applied, "manager-a", "only-a"));

  ASSERT_OK(a->Apply(kConfigMaps, ns_, ConfigMap("contested", {{"key", "a"}, {"only-a", "1"}}),
                     &applied));
  EXPECT_EQ(applied["data"]["key"], "a");
  EXPECT_TRUE(Owns(applied, "manager-a", "key"));
  EXPECT_FALSE(Owns(applied, "manager-b", "key"));
}

// ---- subresources of TrainingJobs ----------------------------------------

TEST_F(ClientApiTest, TheStatusSubresourceSeparatesStatusFromSpec) {
  json job = TrainingJob("mnist", 2);
  job["status"] = {{"phase", "Running"}};
  json created;
  ASSERT_OK(client_->Create(kTrainingJobs, ns_, job, &created));
  EXPECT_FALSE(created.contains("status")) << "a create ignores status";
  EXPECT_EQ(created["metadata"]["generation"], 1);

  // A write to the main resource changes spec and ignores status.
  json edit = created;
  edit["spec"]["workers"]["replicas"] = 3;
  edit["status"] = {{"phase", "Failed"}};
  json updated;
  ASSERT_OK(client_->Update(kTrainingJobs, ns_, edit, &updated));
  EXPECT_EQ(updated["spec"]["workers"]["replicas"], 3);
  EXPECT_EQ(updated["metadata"]["generation"], 2);
  EXPECT_FALSE(updated.contains("status"));

  // /status changes status and ignores spec; generation stays.
  const Resource status = kTrainingJobs.Subresource("status");
  json patched;
  ASSERT_OK(client_->MergePatch(
      status, ns_, "mnist",
      {{"status", {{"phase", "Running"}}}, {"spec", {{"workers", {{"replicas", 9}}}}}}, &patched));
  EXPECT_EQ(patched["status"]["phase"], "Running");
  EXPECT_EQ(patched["spec"]["workers"]["replicas"], 3);
  EXPECT_EQ(patched["metadata"]["generation"], 2);

  // The operator's way: server-side apply to /status.
  std::unique_ptr<Client> op = NewClient("gaptrain-operator");
  json applied;
  ASSERT_OK(op->Apply(status, ns_,
                      {{"metadata", {{"name", "mnist"}}},
                       {"status", {{"phase", "Succeeded"}, {"restarts", 1}}}},
                      &applied));
  EXPECT_EQ(applied["status"]["phase"], "Succeeded");
  EXPECT_EQ(applied["status"]["restarts"], 1);
  EXPECT_EQ(applied["spec"]["workers"]["replicas"], 3);

  // A merge patch of the main resource ignores status too, and the status
  // schema is enforced on /status.
  ASSERT_OK(client_->MergePatch(kTrainingJobs, ns_, "mnist", {{"status", {{"phase", "Failed"}}}},
                                &patched));
  EXPECT_EQ(patched["status"]["phase"], "Succeeded");
  ApiError error;
  Status s = client_->MergePatch(status, ns_, "mnist", {{"status", {{"phase", "Dancing"}}}},
                                 nullptr, &error);
  EXPECT_TRUE(IsInvalid(s)) << s.ToString();
  ASSERT_FALSE(error.causes.empty());
  EXPECT_EQ(error.causes[0].field, "status.phase");
}

TEST_F(ClientApiTest, TheScaleSubresourceIsSpecWorkersReplicas) {
  ASSERT_OK(client_->Create(kTrainingJobs, ns_, TrainingJob("mnist", 2), nullptr));
  const std::string selector = "gaptrain.io/job-name=mnist,gaptrain.io/replica-type=trainer";
  json job;
  const json workers = {{"active", 1}, {"selector", selector}};
  ASSERT_OK(client_->MergePatch(kTrainingJobs.Subresource("status"), ns_, "mnist",
                                {{"status", {{"workers", workers}}}}, &job));
  const Resource scale_resource = kTrainingJobs.Subresource("scale");
  json scale;
  ASSERT_OK(client_->Get(scale_resource, ns_, "mnist", &scale));
  EXPECT_EQ(scale["apiVersion"], "autoscaling/v1");
  EXPECT_EQ(scale["kind"], "Scale");
  EXPECT_EQ(scale["metadata"]["name"], "mnist");
  EXPECT_EQ(Rv(scale), Rv(job));
  EXPECT_EQ(scale["spec"]["replicas"], 2);
  EXPECT_EQ(scale["status"]["replicas"], 1);
  EXPECT_EQ(scale["status"]["selector"], selector);

  json stale = scale;
  scale["spec"]["replicas"] = 5;
  json scaled;
  ASSERT_OK(client_->Update(scale_resource, ns_, scale, &scaled));
  EXPECT_EQ(scaled["spec"]["replicas"], 5);
  ASSERT_OK(client_->Get(kTrainingJobs, ns_, "mnist", &job));
  EXPECT_EQ(job["spec"]["workers"]["replicas"], 5);
  EXPECT_EQ(job["metadata"]["generation"], 2);

  stale["spec"]["replicas"] = 7;
  EXPECT_TRUE(IsConflict(client_->Update(scale_resource, ns_, stale, nullptr)));
  ASSERT_OK(client_->MergePatch(scale_resource, ns_, "mnist", {{"spec", {{"replicas", 4}}}},
                                &scaled));
  EXPECT_EQ(scaled["spec"]["replicas"], 4);
  // The job's schema holds through /scale: at least one trainer.
  ApiError error;
  Status s = client_->MergePatch(scale_resource, ns_, "mnist", {{"spec", {{"replicas", 0}}}},
                                 nullptr, &error);
  EXPECT_TRUE(IsInvalid(s)) << s.ToString();
  ASSERT_OK(client_->Get(kTrainingJobs, ns_, "mnist", &job));
  EXPECT_EQ(job["spec"]["workers"]["replicas"], 4);
}

// ---- watches --------------------------------------------------------------

TEST_F(ClientApiTest, DiscoveryNamesTheServedGroupsVersionsAndNotOthers) {
  json group;
  ASSERT_OK(client_->GetApiGroup("gaptrain.io", &group));
  EXPECT_EQ(group["kind"], "APIGroup");
  EXPECT_EQ(group["preferredVersion"]["groupVersion"], "gaptrain.io/v1alpha1");
  ApiError error;
  Status s = client_->GetApiGroup("security.openshift.io", &group, &error);
  EXPECT_TRUE(IsNotFound(s)) << s.ToString();
  EXPECT_EQ(error.http_status, 404);
  s = client_->GetApiGroup("apps/v1", &group);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(s.message(), "get API group apps/v1: 'apps/v1' is not a valid group name");
}

// The API server's warnings (Warning headers) reach the client: an unknown
// field, which it drops (field validation Warn, its default), is one.
TEST_F(ClientApiTest, WarningsOfTheServerAreKeptAndHandedOnOnce) {
  ClusterConfig config;
  config.server = cluster_->url();
  config.ca_pem = cluster_->ca_pem();
  config.token = cluster_->admin_token();
  config.default_namespace = ns_;
  ClientOptions options;
  std::vector<std::string> handed;
  options.on_warning = [&](const std::string& what, const std::string& warning) {
    handed.push_back(what + ": " + warning);
  };
  std::unique_ptr<Client> client;
  ASSERT_OK(Client::New(config, options, &client));
  ASSERT_OK(client->Create(kConfigMaps, ns_, ConfigMap("plain"), nullptr));
  EXPECT_EQ(client->Warnings(), std::vector<std::string>{});
  for (const char* name : {"odd-1", "odd-2"}) {
    json object = ConfigMap(name);
    object["dataa"] = {{"typo", "x"}};
    ASSERT_OK(client->Create(kConfigMaps, ns_, object, nullptr));
  }
  EXPECT_EQ(client->Warnings(), std::vector<std::string>{"unknown field \"dataa\""});
  EXPECT_EQ(handed, std::vector<std::string>{"create configmaps " + ns_ +
                                             "/odd-1: unknown field \"dataa\""});
}

TEST_F(ClientApiTest, AWatchDeliversEachChangeInOrderThenBookmarks) {
  ObjectList list;
  ListOptions list_options;
  list_options.label_selector = selector_;
  ASSERT_OK(client_->List(kConfigMaps, ns_, list_options, &list));
  // The server ends both watches after 4 s; a watch that allows bookmarks
  // gets one 2 s before that (kube-apiserver's cacher: at the deadline
  // minus 2 s, or every minute).
  WatchOptions options = Watching(list.resource_version);
  options.timeout_seconds = 4;
  std::unique_ptr<WatchStream> with_bookmarks, without;
  ASSERT_OK(client_->Watch(kConfigMaps, ns_, options, &with_bookmarks));
  options.allow_bookmarks = false;
  ASSERT_OK(client_->Watch(kConfigMaps, ns_, options, &without));

  ASSERT_OK(client_->Create(kConfigMaps, ns_, ConfigMap("a"), nullptr));
  ASSERT_OK(client_->MergePatch(kConfigMaps, ns_, "a", {{"data", {{"key", "2"}}}}, nullptr));
  ASSERT_OK(client_->Create(kConfigMaps, ns_, ConfigMap("b"), nullptr));
  json deleted;
  ASSERT_OK(client_->Delete(kConfigMaps, ns_, "a", {}, &deleted));

  for (WatchStream* stream : {with_bookmarks.get(), without.get()}) {
    std::vector<std::string> seen;
    std::vector<uint64_t> versions;
    uint64_t bookmark = 0;
    WatchEvent event;
    while (stream->Next(&event)) {
      if (event.type == WatchEvent::Type::kBookmark) {
        bookmark = std::stoull(event.ResourceVersion());
        continue;
      }
      seen.push_back(std::string(WatchEventTypeName(event.type)) + " " + Name(event.object));
      versions.push_back(RvNumber(event.object));
    }
    EXPECT_TRUE(stream->status().ok()) << "the server ends it: " << stream->status().ToString();
    EXPECT_EQ(seen, (std::vector<std::string>{"ADDED a", "MODIFIED a", "ADDED b", "DELETED a"}));
    EXPECT_TRUE(std::is_sorted(versions.begin(), versions.end()));
    EXPECT_EQ(std::set<uint64_t>(versions.begin(), versions.end()).size(), versions.size());
    if (stream == with_bookmarks.get()) {
      EXPECT_GE(bookmark, versions.back()) << "a BOOKMARK carries the newest resourceVersion";
    } else {
      EXPECT_EQ(bookmark, 0u) << "no BOOKMARK without allowWatchBookmarks";
    }
  }
}

TEST_F(ClientApiTest, AWatchResumesFromAResourceVersion) {
  ObjectList list;
  ListOptions list_options;
  list_options.label_selector = selector_;
  ASSERT_OK(client_->List(kConfigMaps, ns_, list_options, &list));
  std::unique_ptr<WatchStream> stream;
  ASSERT_OK(client_->Watch(kConfigMaps, ns_, Watching(list.resource_version), &stream));
  ASSERT_OK(client_->Create(kConfigMaps, ns_, ConfigMap("a"), nullptr));
  ASSERT_OK(client_->Create(kConfigMaps, ns_, ConfigMap("b"), nullptr));
  std::vector<WatchEvent> events;
  ASSERT_EQ(NextEvents(stream.get(), 1, &events), std::vector<std::string>{"ADDED a"});
  stream->Cancel();
  stream.reset();

  // Changes while nobody watches.
  ASSERT_OK(client_->MergePatch(kConfigMaps, ns_, "b", {{"data", {{"key", "2"}}}}, nullptr));
  ASSERT_OK(client_->Delete(kConfigMaps, ns_, "a", {}));

  // From a's resourceVersion: everything after it, nothing before, each
  // once; then a new change (so no event can hide between).
  ASSERT_OK(client_->Watch(kConfigMaps, ns_, Watching(events[0].ResourceVersion()), &stream));
  ASSERT_OK(client_->Create(kConfigMaps, ns_, ConfigMap("c"), nullptr));
  EXPECT_EQ(NextEvents(stream.get(), 4),
            (std::vector<std::string>{"ADDED b", "MODIFIED b", "DELETED a", "ADDED c"}));
}

TEST_F(ClientApiTest, AnObjectThatStopsMatchingTheSelectorIsDeletedForTheWatch) {
  ObjectList list;
  ListOptions list_options;
  list_options.label_selector = selector_;
  ASSERT_OK(client_->List(kConfigMaps, ns_, list_options, &list));
  WatchOptions options = Watching(list.resource_version);
  options.label_selector = selector_ + ",tier=web";
  std::unique_ptr<WatchStream> stream;
  ASSERT_OK(client_->Watch(kConfigMaps, ns_, options, &stream));

  auto tier = [&](const std::string& name, const std::string& value) {
    return client_->MergePatch(kConfigMaps, ns_, name,
                               {{"metadata", {{"labels", {{"tier", value}}}}}}, nullptr);
  };
  ASSERT_OK(client_->Create(kConfigMaps, ns_, ConfigMap("a", {}, {{"tier", "web"}}), nullptr));
  ASSERT_OK(client_->Create(kConfigMaps, ns_, ConfigMap("b", {}, {{"tier", "db"}}), nullptr));
  ASSERT_OK(tier("a", "db"));   // a leaves the selection
  ASSERT_OK(tier("b", "web"));  // b enters it
  ASSERT_OK(tier("a", "web"));  // a again
  ASSERT_OK(client_->Delete(kConfigMaps, ns_, "b", {}));
  std::vector<WatchEvent> events;
  EXPECT_EQ(NextEvents(stream.get(), 5, &events),
            (std::vector<std::string>{"ADDED a", "DELETED a", "ADDED b", "ADDED a", "DELETED b"}));
  ASSERT_GE(events.size(), 2u);
  // The cacher sends the last state that matched, not the one that left.
  EXPECT_EQ(events[1].object["metadata"]["labels"]["tier"], "web");
}

// ---- 410 Expired, for real ------------------------------------------------

// kube-apiserver sizes its watch caches by itself (only a size of 0
// is honoured; measured: a watch from before 300 writes in 6 s still
// resumed), so its window cannot be made small. Secrets here are served
// without a watch cache, from etcd, so that compacting etcd makes a
// resourceVersion too old on demand, as a long outage does on a busy
// cluster.
TEST_F(ClientApiTest, AWatchFromACompactedResourceVersionIsExpired) {
  json secret, cached;
  ASSERT_OK(client_->Create(kSecrets, ns_, Secret("s"), &secret));
  ASSERT_OK(client_->Create(kConfigMaps, ns_, ConfigMap("cached"), &cached));
  ASSERT_OK(client_->MergePatch(kSecrets, ns_, "s", {{"stringData", {{"key", "2"}}}}, nullptr));
  ASSERT_OK(client_->MergePatch(kConfigMaps, ns_, "cached", {{"data", {{"key", "2"}}}}, nullptr));
  int64_t revision = 0;
  ASSERT_OK(cluster_->CompactEtcd(&revision));
  EXPECT_GT(static_cast<uint64_t>(revision), RvNumber(secret));

  std::unique_ptr<WatchStream> stream;
  ApiError error;
  // Answered 200; the 410 comes as an event.
  ASSERT_OK(client_->Watch(kSecrets, ns_, Watching(Rv(secret)), &stream, &error));
  WatchEvent event;
  ASSERT_TRUE(stream->Next(&event)) << stream->status().ToString();
  ASSERT_EQ(event.type, WatchEvent::Type::kError) << event.object.dump();
  const Status gone = WatchErrorStatus("watch secrets", event);
  EXPECT_TRUE(IsGone(gone)) << gone.ToString();
  EXPECT_EQ(event.object["code"], 410);
  EXPECT_EQ(event.object["reason"], "Expired");
  EXPECT_EQ(event.object["message"], "The resourceVersion for the provided watch is too old.");
  EXPECT_FALSE(stream->Next(&event));
  EXPECT_TRUE(stream->status().ok()) << stream->status().ToString();

  // A list still works, at a resourceVersion a watch can start from.
  ObjectList list;
  ListOptions list_options;
  list_options.label_selector = selector_;
  ASSERT_OK(client_->List(kSecrets, ns_, list_options, &list));
  EXPECT_GE(std::stoll(list.resource_version), revision);
  ASSERT_OK(client_->Watch(kSecrets, ns_, Watching(list.resource_version), &stream));
  ASSERT_OK(client_->Delete(kSecrets, ns_, "s", {}));
  EXPECT_EQ(NextEvents(stream.get(), 1), std::vector<std::string>{"DELETED s"});

  // A watch cache's window is its own, not etcd's: ConfigMaps still
  // resume from before the compaction.
  ASSERT_OK(client_->Watch(kConfigMaps, ns_, Watching(Rv(cached)), &stream));
  EXPECT_EQ(NextEvents(stream.get(), 1), std::vector<std::string>{"MODIFIED cached"});
}

TEST_F(ClientApiTest, AReflectorThatMeetsARealExpiryRelistsToTheRightSet) {
  ASSERT_OK(client_->Create(kSecrets, ns_, Secret("a"), nullptr));
  ASSERT_OK(client_->Create(kSecrets, ns_, Secret("b"), nullptr));
  ASSERT_NO_FATAL_FAILURE(StartProxy());
  StartReflector(proxied_.get(), kSecrets, ReflectorOptions());
  ASSERT_TRUE(Eventually([&] { return handler_.objects().size() == 2; }, seconds(30)));

  ASSERT_NO_FATAL_FAILURE(TakeTheWatchDown("/api/v1/namespaces/" + ns_ + "/secrets"));
  ASSERT_OK(client_->Delete(kSecrets, ns_, "a", {}));
  json b, c;
  ASSERT_OK(client_->MergePatch(kSecrets, ns_, "b", {{"stringData", {{"key", "2"}}}}, &b));
  ASSERT_OK(client_->Create(kSecrets, ns_, Secret("c"), &c));
  ASSERT_OK(cluster_->CompactEtcd());
  const size_t relayed = RelayedWatches().size();
  proxy_->ClearFaults();

  EXPECT_TRUE(handler_.WaitForObjects({{"b", Rv(b)}, {"c", Rv(c)}}))
      << ::testing::PrintToString(handler_.calls());
  EXPECT_EQ(handler_.calls(), (std::vector<std::string>{"replace: a b", "replace: b c"}))
      << "the changes come with the re-list, not as events";
  // The Reflector counts a list once OnReplace has returned.
  EXPECT_TRUE(Eventually([&] { return reflector_->stats().lists == 2; }, seconds(10)));
  EXPECT_EQ(reflector_->stats().expired, 1u);
  // The real server answered the resumed watch (no injected 410 here).
  const std::vector<ProxiedRequest> watches = RelayedWatches();
  ASSERT_GT(watches.size(), relayed);
  EXPECT_EQ(watches[relayed].code, 200);
}

// ---- the Reflector through faults ----------------------------------------

TEST_F(ClientApiTest, AReflectorResumesWhenTheServerEndsItsWatch) {
  ASSERT_OK(client_->Create(kConfigMaps, ns_, ConfigMap("a"), nullptr));
  Reflector::Options options = ReflectorOptions();
  options.watch_timeout_seconds = 2;  // the server ends every watch after 2 s
  direct_ = NewClient("reflector");
  StartReflector(direct_.get(), kConfigMaps, options);
  ASSERT_TRUE(Eventually([&] { return reflector_->has_synced(); }, seconds(30)));
  json b;
  ASSERT_OK(client_->Create(kConfigMaps, ns_, ConfigMap("b"), &b));
  ASSERT_TRUE(handler_.WaitForObjects({{"a", handler_.objects()["a"]}, {"b", Rv(b)}}));
  ASSERT_TRUE(Eventually([&] { return reflector_->stats().watches >= 2; }, seconds(30)));
  json a;
  ASSERT_OK(client_->MergePatch(kConfigMaps, ns_, "a", {{"data", {{"key", "2"}}}}, &a));
  ASSERT_OK(client_->Delete(kConfigMaps, ns_, "b", {}));
  EXPECT_TRUE(handler_.WaitForObjects({{"a", Rv(a)}}));
  EXPECT_EQ(handler_.calls(),
            (std::vector<std::string>{"replace: a", "add b", "update a", "delete b"}));
  const Reflector::Stats stats = reflector_->stats();
  EXPECT_EQ(stats.lists, 1u);
  EXPECT_EQ(stats.failures, 0u) << stats.last_error.ToString();
  EXPECT_EQ(stats.expired, 0u);
}

TEST_F(ClientApiTest, AReflectorResumesAfterADroppedWatchWithoutLosingEvents) {
  ASSERT_OK(client_->Create(kConfigMaps, ns_, ConfigMap("a"), nullptr));
  ASSERT_NO_FATAL_FAILURE(StartProxy());
  StartReflector(proxied_.get(), kConfigMaps, ReflectorOptions());
  ASSERT_TRUE(Eventually([&] { return reflector_->has_synced(); }, seconds(30)));
  json a, b, c;
  ASSERT_OK(client_->Create(kConfigMaps, ns_, ConfigMap("b"), &b));
  ASSERT_TRUE(handler_.WaitForObjects({{"a", handler_.objects()["a"]}, {"b", Rv(b)}}));

  ASSERT_NO_FATAL_FAILURE(TakeTheWatchDown("/api/v1/namespaces/" + ns_ + "/configmaps"));
  ASSERT_OK(client_->MergePatch(kConfigMaps, ns_, "a", {{"data", {{"key", "2"}}}}, &a));
  ASSERT_OK(client_->Delete(kConfigMaps, ns_, "b", {}));
  ASSERT_OK(client_->Create(kConfigMaps, ns_, ConfigMap("c"), &c));
  const size_t relayed = RelayedWatches().size();
  proxy_->ClearFaults();

  EXPECT_TRUE(handler_.WaitForObjects({{"a", Rv(a)}, {"c", Rv(c)}}))
      << ::testing::PrintToString(handler_.calls());
  EXPECT_EQ(handler_.calls(), (std::vector<std::string>{"replace: a", "add b", "update a",
                                                        "delete b", "add c"}));
  const Reflector::Stats stats = reflector_->stats();
  EXPECT_EQ(stats.lists, 1u) << "resumed, not re-listed";
  EXPECT_EQ(stats.expired, 0u);
  EXPECT_GE(stats.failures, 2u);
  const std::vector<ProxiedRequest> watches = RelayedWatches();
  ASSERT_GT(watches.size(), relayed);
  EXPECT_NE(watches[relayed].query.find("resourceVersion=" + Rv(b) + "&"), std::string::npos)
      << "resumed from the last event seen: " << watches[relayed].query;
}

TEST_F(ClientApiTest, AnInjected503OnListMakesTheReflectorBackOffAndRetry) {
  ASSERT_OK(client_->Create(kConfigMaps, ns_, ConfigMap("a"), nullptr));
  ASSERT_NO_FATAL_FAILURE(StartProxy());
  const std::string path = "/api/v1/namespaces/" + ns_ + "/configmaps";
  proxy_->InjectFault({"GET", path, 2, 503, "etcd is down"});
  const Reflector::Options options = ReflectorOptions();
  StartReflector(proxied_.get(), kConfigMaps, options);
  ASSERT_TRUE(Eventually([&] { return reflector_->has_synced(); }, seconds(30)));
  // The proxy logs a request when it arrives and its code once answered.
  ASSERT_TRUE(Eventually(
      [&] {
        const std::vector<ProxiedRequest> log = proxy_->RequestLog();
        return log.size() >= 4 && log[3].code != 0;
      },
      seconds(30)));

  EXPECT_EQ(handler_.calls(), std::vector<std::string>{"replace: a"});
  const Reflector::Stats stats = reflector_->stats();
  EXPECT_EQ(stats.lists, 1u);
  EXPECT_EQ(stats.failures, 2u);
  EXPECT_EQ(stats.last_error.code(), Status::Code::kUnavailable);
  EXPECT_NE(stats.last_error.message().find("503 ServiceUnavailable: etcd is down"),
            std::string::npos)
      << stats.last_error.ToString();
  Backoff expected(options.backoff, options.backoff_seed);
  expected.Next();
  EXPECT_EQ(stats.last_backoff, expected.Next()) << "the second delay of the seeded backoff";
  std::vector<std::string> log;
  for (const ProxiedRequest& r : proxy_->RequestLog()) {
    log.push_back(std::string(r.watch ? "watch " : "list ") + std::to_string(r.code) +
                  (r.injected ? " injected" : ""));
  }
  EXPECT_EQ(log, (std::vector<std::string>{"list 503 injected", "list 503 injected", "list 200",
                                           "watch 200"}));
}

// ---- garbage collection (kube-controller-manager) ----------------------

TEST_F(ClientApiTest, BackgroundDeletionCollectsTheDependents) {
  json owner;
  ASSERT_OK(client_->Create(kTrainingJobs, ns_, TrainingJob("owner"), &owner));
  ASSERT_OK(client_->Create(kConfigMaps, ns_, Dependent("d1", owner, true), nullptr));
  ASSERT_OK(client_->Create(kConfigMaps, ns_, Dependent("d2", owner, false), nullptr));
  DeleteOptions background;
  background.propagation_policy = "Background";
  ASSERT_OK(client_->Delete(kTrainingJobs, ns_, "owner", background));
  EXPECT_TRUE(Gone(kTrainingJobs, "owner")) << "the owner goes at once";
  EXPECT_TRUE(Eventually([&] { return Gone(kConfigMaps, "d1") && Gone(kConfigMaps, "d2"); },
                         seconds(60)));
}

TEST_F(ClientApiTest, ForegroundDeletionKeepsTheOwnerUntilBlockingDependentsGo) {
  json owner;
  ASSERT_OK(client_->Create(kTrainingJobs, ns_, TrainingJob("owner"), &owner));
  json held = Dependent("held", owner, /*block_owner_deletion=*/true);
  held["metadata"]["finalizers"] = {kHoldFinalizer};  // only the test lets it go
  ASSERT_OK(client_->Create(kConfigMaps, ns_, held, nullptr));
  ASSERT_OK(client_->Create(kConfigMaps, ns_, Dependent("free", owner, true), nullptr));

  DeleteOptions foreground;
  foreground.propagation_policy = "Foreground";
  json deleting;
  ASSERT_OK(client_->Delete(kTrainingJobs, ns_, "owner", foreground, &deleting));
  EXPECT_TRUE(deleting["metadata"].contains("deletionTimestamp"));
  EXPECT_EQ(deleting["metadata"]["finalizers"], json({"foregroundDeletion"}));

  // The collector deletes both dependents; "held" stays, deleting, while
  // its finalizer is there, and so does the owner.
  ASSERT_TRUE(Eventually(
      [&] {
        json object;
        return Gone(kConfigMaps, "free") &&
               client_->Get(kConfigMaps, ns_, "held", &object).ok() &&
               object["metadata"].contains("deletionTimestamp");
      },
      seconds(60)));
  json still;
  ASSERT_OK(client_->Get(kTrainingJobs, ns_, "owner", &still));
  EXPECT_TRUE(still["metadata"].contains("deletionTimestamp"));
  EXPECT_EQ(still["metadata"]["finalizers"], json({"foregroundDeletion"}));

  ASSERT_OK(client_->MergePatch(kConfigMaps, ns_, "held", {{"metadata", {{"finalizers", nullptr}}}},
                                nullptr));
  EXPECT_TRUE(Gone(kConfigMaps, "held"));
  EXPECT_TRUE(Eventually([&] { return Gone(kTrainingJobs, "owner"); }, seconds(60)));
}

TEST_F(ClientApiTest, OrphanDeletionLeavesTheDependentsWithoutOwnerReferences) {
  json owner;
  ASSERT_OK(client_->Create(kTrainingJobs, ns_, TrainingJob("owner"), &owner));
  ASSERT_OK(client_->Create(kConfigMaps, ns_, Dependent("d1", owner, true), nullptr));
  DeleteOptions orphan;
  orphan.propagation_policy = "Orphan";
  json deleting;
  ASSERT_OK(client_->Delete(kTrainingJobs, ns_, "owner", orphan, &deleting));
  EXPECT_TRUE(Eventually([&] { return Gone(kTrainingJobs, "owner"); }, seconds(60)));
  // The collector removes the references before it lets the owner go.
  json d1;
  ASSERT_OK(client_->Get(kConfigMaps, ns_, "d1", &d1));
  EXPECT_FALSE(d1["metadata"].contains("ownerReferences")) << d1["metadata"].dump();
}

}  // namespace
}  // namespace kube
}  // namespace gaptrain
