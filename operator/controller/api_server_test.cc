// Tests the Informer and the LeaderElector against a real kube-apiserver
// (operator/envtest): an informer's cache and handler calls as the
// real server's lists and watches drive them, including the re-list after
// a 410 (a real one, from a compacted etcd, and the FaultProxy's), and
// leader election on a real Lease, whose resourceVersion checks are the
// election. The electors run on a FakeClock (the Lease's times are theirs;
// the server does not read them), so expiry and renew deadlines are exact
// and nothing waits on wall time; only the API calls are real.
//
// One control plane for the binary; a namespace per test. Faults a real
// server cannot produce on demand (a watch held down, 503s on renewals)
// come from a FaultProxy in front of it.

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "operator/controller/election_candidates.h"
#include "operator/controller/fake_clock.h"
#include "operator/controller/informer.h"
#include "operator/controller/leader_election.h"
#include "operator/controller/object_key.h"
#include "operator/envtest/control_plane.h"
#include "operator/envtest/shared_control_plane.h"
#include "operator/kube/api_error.h"
#include "operator/kube/client.h"
#include "operator/kube/resource.h"
#include "operator/testing/fault_proxy.h"
#include "services/testing/missing_requirement.h"
#include "services/testing/status_assertions.h"
#include "services/testing/test_processes.h"

namespace gaptrain {
namespace controller {
namespace {

using kube_testing::FaultProxy;
using kube_testing::ProxiedRequest;
using nlohmann::json;
using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr char kJobLabel[] = "gaptrain.io/job-name";
constexpr char kLeaseName[] = "gaptrain-operator";

// Records handler calls as lines ("add a", "update a", "tombstone b",
// "synced"); waits for a number of them.
class Recorder {
 public:
  EventHandlers Handlers() {
    EventHandlers h;
    h.on_add = [this](const json& o) { Record("add " + ObjectName(o), o); };
    h.on_update = [this](const json& old_object, const json& new_object) {
      Record("update " + ObjectName(new_object), new_object, old_object);
    };
    h.on_delete = [this](const json& o, bool final_state_unknown) {
      Record((final_state_unknown ? "tombstone " : "delete ") + ObjectName(o), o);
    };
    h.on_synced = [this] { Record("synced", json()); };
    return h;
  }

  bool WaitForCalls(size_t n) {
    std::unique_lock<std::mutex> lock(mu_);
    return changed_.wait_for(lock, seconds(30), [&] { return calls_.size() >= n; });
  }
  std::vector<std::string> calls() {
    std::lock_guard<std::mutex> lock(mu_);
    return calls_;
  }
  // The object (and, for an update, the old one) of call i.
  json object(size_t i) {
    std::lock_guard<std::mutex> lock(mu_);
    return objects_.at(i);
  }
  json old_object(size_t i) {
    std::lock_guard<std::mutex> lock(mu_);
    return old_objects_.at(i);
  }

 private:
  void Record(const std::string& line, const json& object, const json& old_object = json()) {
    std::lock_guard<std::mutex> lock(mu_);
    calls_.push_back(line);
    objects_.push_back(object);
    old_objects_.push_back(old_object);
    changed_.notify_all();
  }

  std::mutex mu_;
  std::condition_variable changed_;
  std::vector<std::string> calls_;
  std::vector<json> objects_;
  std::vector<json> old_objects_;
};

std::vector<std::string> Names(const std::vector<json>& objects) {
  std::vector<std::string> names;
  for (const json& o : objects) names.push_back(ObjectName(o));
  return names;
}

using Candidate = ElectionCandidate;

class ApiServerTest : public envtest::SharedControlPlaneTest<ApiServerTest> {
 public:
  static envtest::ControlPlane::Options ControlPlaneOptions() {
    envtest::ControlPlane::Options options = SharedControlPlaneTest::ControlPlaneOptions();
    options.uncached_resources = {"secrets"};  // a real 410 after CompactEtcd()
    return options;
  }

 protected:
  void SetUpOnCluster() override {
    admin_ = cluster_->admin();
    FaultProxy::Options proxy_options;
    proxy_options.upstream_url = cluster_->url();
    proxy_options.upstream_ca_pem = cluster_->ca_pem();
    ASSERT_OK(FaultProxy::Start(proxy_options, &proxy_));
    informer_options_.reflector.backoff.initial = milliseconds(5);
    informer_options_.reflector.backoff.max = milliseconds(20);
    informer_options_.reflector.watch_timeout_seconds = 60;
    informer_options_.reflector.idle_timeout = seconds(30);
    informer_options_.index_labels = {kJobLabel};
  }

  void TearDown() override {
    if (informer_ != nullptr) informer_->Stop();
    candidates_.StopAll();
    if (proxy_ != nullptr) proxy_->Stop();
  }

  // A client with the admin's token, to the server or through the proxy.
  std::unique_ptr<kube::Client> NewClient(bool proxied, milliseconds request_timeout) {
    kube::ClusterConfig config;
    config.server = proxied ? proxy_->url() : cluster_->url();
    if (!proxied) config.ca_pem = cluster_->ca_pem();
    config.token = cluster_->admin_token();
    config.default_namespace = ns_;
    kube::ClientOptions options;
    options.request_timeout = request_timeout;
    std::unique_ptr<kube::Client> client;
    const Status s = kube::Client::New(config, options, &client);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return client;
  }

  json Object(const std::string& name, const std::string& job) const {
    json object = {{"apiVersion", "v1"},
                   {"metadata", {{"name", name}, {"labels", {{"app", "trainer"}}}}}};
    if (!job.empty()) object["metadata"]["labels"][kJobLabel] = job;
    return object;
  }
  json ConfigMap(const std::string& name, const std::string& job) const {
    json object = Object(name, job);
    object["kind"] = "ConfigMap";
    object["data"] = {{"key", "v"}};
    return object;
  }
  json Secret(const std::string& name, const std::string& job) const {
    json object = Object(name, job);
    object["kind"] = "Secret";
    object["stringData"] = {{"key", "v"}};
    return object;
  }

  void StartInformer(const kube::Resource& resource, bool proxied) {
    client_ = NewClient(proxied, seconds(10));
    informer_ = std::make_unique<Informer>(client_.get(), resource, ns_, informer_options_);
    ASSERT_OK(informer_->AddEventHandlers(recorder_.Handlers()));
    ASSERT_OK(informer_->Start());
  }

  // The informer's watch is down through the proxy, and stays down (its
  // lists and watches answered 503) until ClearFaults().
  void TakeTheWatchDown(const kube::Resource& resource) {
    const uint64_t failures = informer_->stats().reflector.failures;
    proxy_->InjectFault({"GET", resource.CollectionPath(ns_), 1 << 30, 503, "the watch is down"});
    proxy_->DropAllConnections();
    ASSERT_TRUE(Eventually(
        [&] { return informer_->stats().reflector.failures >= failures + 2; }, seconds(30)));
  }

  // The informer lists a, b and c, then, while its watch is down, b is
  // deleted, a changes and d appears; the watch comes back to a 410 (a
  // real one when `real`, else the proxy's), and the re-list brings the
  // difference.
  void RelistAfterExpiry(const kube::Resource& resource, bool real) {
    auto make = [&](const std::string& name, const std::string& job) {
      return resource.plural == "secrets" ? Secret(name, job) : ConfigMap(name, job);
    };
    json a, d;
    ASSERT_OK(admin_->Create(resource, ns_, make("a", "j1"), &a));
    ASSERT_OK(admin_->Create(resource, ns_, make("b", "j1"), nullptr));
    ASSERT_OK(admin_->Create(resource, ns_, make("c", "j2"), nullptr));
    ASSERT_NO_FATAL_FAILURE(StartInformer(resource, /*proxied=*/true));
    ASSERT_TRUE(recorder_.WaitForCalls(4));  // three adds, synced

    ASSERT_NO_FATAL_FAILURE(TakeTheWatchDown(resource));
    ASSERT_OK(admin_->Delete(resource, ns_, "b", {}));
    json moved;
    ASSERT_OK(admin_->MergePatch(resource, ns_, "a",
                                 {{"metadata", {{"labels", {{kJobLabel, "j2"}}}}}}, &moved));
    ASSERT_OK(admin_->Create(resource, ns_, make("d", "j1"), &d));
    if (real) {
      ASSERT_OK(cluster_->CompactEtcd());
    } else {
      proxy_->ExpireNextWatches(1);
    }
    proxy_->ClearFaults();

    ASSERT_TRUE(recorder_.WaitForCalls(7));
    EXPECT_EQ(recorder_.calls(),
              (std::vector<std::string>{"add a", "add b", "add c", "synced",  //
                                        "update a", "add d", "tombstone b"}));
    EXPECT_EQ(ObjectResourceVersion(recorder_.old_object(4)), ObjectResourceVersion(a));
    EXPECT_EQ(ObjectResourceVersion(recorder_.object(4)), ObjectResourceVersion(moved));
    EXPECT_EQ(ObjectLabel(recorder_.object(6), kJobLabel), "j1")
        << "a tombstone carries the last state cached";
    EXPECT_EQ(informer_->ListKeys(),
              (std::vector<std::string>{ns_ + "/a", ns_ + "/c", ns_ + "/d"}));
    EXPECT_EQ(Names(informer_->ListByLabel(ns_, kJobLabel, "j2")),
              (std::vector<std::string>{"a", "c"}));
    EXPECT_EQ(Names(informer_->ListByLabel(ns_, kJobLabel, "j1")), std::vector<std::string>{"d"});
    // The Reflector counts a list once its handler calls have returned.
    EXPECT_TRUE(Eventually([&] { return informer_->stats().reflector.lists == 2; }, seconds(10)));
    const Informer::Stats stats = informer_->stats();
    EXPECT_EQ(stats.reflector.expired, 1u);
    EXPECT_EQ(stats.objects, 3u);
    bool injected_410 = false;
    for (const ProxiedRequest& r : proxy_->RequestLog()) {
      injected_410 |= r.watch && r.injected && r.code == 200;
    }
    EXPECT_EQ(injected_410, !real);
  }

  // ---- leader election ----

  LeaderElectionConfig Config(const std::string& identity) {
    LeaderElectionConfig config;
    config.identity = identity;
    config.lease_namespace = ns_;
    config.lease_name = kLeaseName;
    config.acquire_jitter = 0;
    return config;
  }

  // A candidate whose client goes through the proxy (every candidate's
  // requests are in its log) or, with `own_proxy`, through a proxy of its
  // own (faults for it alone).
  Candidate* Add(LeaderElectionConfig config, FaultProxy* own_proxy = nullptr) {
    return candidates_.Add(std::move(config),
                           own_proxy != nullptr ? own_proxy->url() : proxy_->url(),
                           cluster_->admin_token());
  }
  void Lead(Candidate* leader, Candidate* standby) { candidates_.Lead(leader, standby); }
  void Step(Clock::Duration step, size_t running, int times = 1) {
    candidates_.Step(step, running, times);
  }
  int Leaders() const { return candidates_.Leaders(); }

  json Lease() {
    json lease;
    const Status s = admin_->Get(kube::kLeases, ns_, kLeaseName, &lease);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return lease;
  }

  // The proxy's log of requests for the Lease: "GET 404", "PUT 409", ...
  std::vector<std::string> LeaseRequests() {
    std::vector<std::string> out;
    for (const ProxiedRequest& r : proxy_->RequestLog()) {
      if (r.path.find("/leases") == std::string::npos) continue;
      out.push_back(r.method + " " + std::to_string(r.code));
    }
    return out;
  }

  kube::Client* admin_ = nullptr;
  std::unique_ptr<FaultProxy> proxy_;
  std::unique_ptr<kube::Client> client_;
  Informer::Options informer_options_;
  Recorder recorder_;
  std::unique_ptr<Informer> informer_;
  FakeClock clock_;
  ElectionCandidates candidates_{&clock_};
};

// ---- the informer -----------------------------------------------------------

TEST_F(ApiServerTest, AnInformersCacheFollowsCreatesUpdatesAndDeletes) {
  json a, b;
  ASSERT_OK(admin_->Create(kube::kConfigMaps, ns_, ConfigMap("a", "j1"), &a));
  ASSERT_OK(admin_->Create(kube::kConfigMaps, ns_, ConfigMap("b", "j1"), &b));
  ASSERT_NO_FATAL_FAILURE(StartInformer(kube::kConfigMaps, /*proxied=*/false));
  ASSERT_TRUE(informer_->WaitForSync(seconds(30)));
  ASSERT_TRUE(recorder_.WaitForCalls(3));
  EXPECT_EQ(informer_->ListKeys(), (std::vector<std::string>{ns_ + "/a", ns_ + "/b"}));

  json c, moved;
  ASSERT_OK(admin_->Create(kube::kConfigMaps, ns_, ConfigMap("c", "j2"), &c));
  ASSERT_OK(admin_->MergePatch(kube::kConfigMaps, ns_, "a",
                               {{"metadata", {{"labels", {{kJobLabel, "j2"}}}}}}, &moved));
  ASSERT_OK(admin_->Delete(kube::kConfigMaps, ns_, "b", {}));
  ASSERT_TRUE(recorder_.WaitForCalls(6));
  EXPECT_EQ(recorder_.calls(), (std::vector<std::string>{"add a", "add b", "synced", "add c",
                                                         "update a", "delete b"}));
  EXPECT_EQ(ObjectResourceVersion(recorder_.old_object(4)), ObjectResourceVersion(a));
  EXPECT_EQ(ObjectResourceVersion(recorder_.object(4)), ObjectResourceVersion(moved));

  EXPECT_EQ(informer_->ListKeys(), (std::vector<std::string>{ns_ + "/a", ns_ + "/c"}));
  json cached;
  ASSERT_TRUE(informer_->Get(ns_, "a", &cached));
  EXPECT_EQ(ObjectResourceVersion(cached), ObjectResourceVersion(moved));
  EXPECT_TRUE(informer_->GetByKey(ns_ + "/c", &cached));
  EXPECT_FALSE(informer_->Get(ns_, "b", &cached));
  EXPECT_EQ(Names(informer_->ListByLabel(ns_, kJobLabel, "j2")),
            (std::vector<std::string>{"a", "c"}));
  EXPECT_TRUE(informer_->ListByLabel(ns_, kJobLabel, "j1").empty());
  EXPECT_EQ(Names(informer_->ListByLabel("", kJobLabel, "j2")),
            (std::vector<std::string>{"a", "c"}));
  // A label without an index is found by a scan.
  EXPECT_EQ(informer_->ListByLabel(ns_, "app", "trainer").size(), 2u);
  EXPECT_EQ(Names(informer_->List(ns_)), (std::vector<std::string>{"a", "c"}));
  EXPECT_TRUE(informer_->List("other").empty());
  const Informer::Stats stats = informer_->stats();
  EXPECT_EQ(stats.objects, 2u);
  EXPECT_EQ(stats.reflector.lists, 1u);
  EXPECT_EQ(stats.skipped, 0u);
}

TEST_F(ApiServerTest, AnInformerRelistsWithTheDifferenceAfterARealExpiry) {
  RelistAfterExpiry(kube::kSecrets, /*real=*/true);
}

TEST_F(ApiServerTest, AnInformerRelistsWithTheDifferenceAfterTheProxysExpiry) {
  RelistAfterExpiry(kube::kConfigMaps, /*real=*/false);
}

TEST_F(ApiServerTest, AnInformerAcrossEveryNamespace) {
  const std::string other = ns_ + "-2";
  ASSERT_OK(cluster_->CreateNamespace(other));
  ASSERT_OK(admin_->Create(kube::kConfigMaps, ns_, ConfigMap("a", "j"), nullptr));
  ASSERT_OK(admin_->Create(kube::kConfigMaps, other, ConfigMap("a", "j"), nullptr));
  // Only this test's objects: other tests' namespaces have ConfigMaps too.
  informer_options_.reflector.label_selector = kJobLabel + std::string("=j");
  client_ = NewClient(false, seconds(10));
  informer_ = std::make_unique<Informer>(client_.get(), kube::kConfigMaps, kube::kAllNamespaces,
                                         informer_options_);
  ASSERT_OK(informer_->AddEventHandlers(recorder_.Handlers()));
  ASSERT_OK(informer_->Start());
  ASSERT_TRUE(recorder_.WaitForCalls(3));
  ASSERT_OK(admin_->Create(kube::kConfigMaps, other, ConfigMap("b", "j"), nullptr));
  ASSERT_TRUE(recorder_.WaitForCalls(4));
  std::vector<std::string> keys = informer_->ListKeys();
  std::vector<std::string> ours;
  for (const std::string& key : keys) {
    if (key.rfind(ns_ + "/", 0) == 0 || key.rfind(other + "/", 0) == 0) ours.push_back(key);
  }
  std::vector<std::string> expected = {ns_ + "/a", other + "/a", other + "/b"};
  std::sort(expected.begin(), expected.end());  // keys in byte order
  EXPECT_EQ(ours, expected);
  EXPECT_EQ(Names(informer_->ListByLabel(other, kJobLabel, "j")),
            (std::vector<std::string>{"a", "b"}));
}

// ---- leader election on a real Lease --------------------------------------

TEST_F(ApiServerTest, OneOfTwoCandidatesLeadsAndItsRenewalsKeepTheLease) {
  Candidate* a = Add(Config("op-a"));
  Candidate* b = Add(Config("op-b"));
  ASSERT_NO_FATAL_FAILURE(Lead(a, b));
  for (int i = 0; i < 20; ++i) {  // 40 s: the lease would have expired 2.6 times over
    ASSERT_NO_FATAL_FAILURE(Step(seconds(2), 2));
    ASSERT_EQ(Leaders(), 1);
  }
  EXPECT_TRUE(a->elector->IsLeader());
  EXPECT_FALSE(b->elector->IsLeader());
  EXPECT_EQ(b->elector->ObservedLeader(), "op-a");
  EXPECT_TRUE(b->Calls().empty());
  const json lease = Lease();
  EXPECT_EQ(lease["spec"]["holderIdentity"], "op-a");
  EXPECT_EQ(lease["spec"]["renewTime"], "2026-11-23T06:00:40.000000Z");
  EXPECT_EQ(lease["spec"]["acquireTime"], "2026-11-23T06:00:00.000000Z");
  EXPECT_EQ(lease["spec"]["leaseTransitions"], 0);
  EXPECT_EQ(lease["spec"]["leaseDurationSeconds"], 15);
}

TEST_F(ApiServerTest, AStandbyTakesOverOnlyOnceTheLeaseExpires) {
  LeaderElectionConfig config = Config("op-a");
  config.release_on_stop = false;  // as if it crashed
  Candidate* a = Add(config);
  Candidate* b = Add(Config("op-b"));
  ASSERT_NO_FATAL_FAILURE(Lead(a, b));
  a->StopAndJoin();  // renewTime stays 06:00:00
  EXPECT_EQ(a->Calls(), (std::vector<std::string>{"op-a started", "op-a stopped"}));
  EXPECT_EQ(Lease()["spec"]["holderIdentity"], "op-a");
  ASSERT_NO_FATAL_FAILURE(Step(seconds(2), 1, 7));  // 06:00:14: renewTime + 15 s is ahead
  EXPECT_FALSE(b->elector->IsLeader());
  ASSERT_NO_FATAL_FAILURE(Step(seconds(2), 1));  // 06:00:16
  EXPECT_TRUE(b->elector->IsLeader());
  const json lease = Lease();
  EXPECT_EQ(lease["spec"]["holderIdentity"], "op-b");
  EXPECT_EQ(lease["spec"]["leaseTransitions"], 1);
  EXPECT_EQ(lease["spec"]["acquireTime"], "2026-11-23T06:00:16.000000Z");
  EXPECT_EQ(b->Calls(), (std::vector<std::string>{"op-b started"}));
}

TEST_F(ApiServerTest, ALeaderWhoseRenewalsFailStepsDownBeforeTheStandbyTakesOver) {
  std::unique_ptr<FaultProxy> a_proxy;
  FaultProxy::Options proxy_options;
  proxy_options.upstream_url = cluster_->url();
  proxy_options.upstream_ca_pem = cluster_->ca_pem();
  ASSERT_OK(FaultProxy::Start(proxy_options, &a_proxy));
  Candidate* a = Add(Config("op-a"), a_proxy.get());
  Candidate* b = Add(Config("op-b"));
  ASSERT_NO_FATAL_FAILURE(Lead(a, b));
  a_proxy->InjectFault({"PUT", kube::kLeases.ObjectPath(ns_, kLeaseName), 1 << 30, 503,
                        "etcd is down"});
  // 06:00:08: four failed renewals, within renew_deadline.
  ASSERT_NO_FATAL_FAILURE(Step(seconds(2), 2, 4));
  EXPECT_TRUE(a->elector->IsLeader());
  clock_.Advance(seconds(2));  // 06:00:10: renew_deadline since the last renewal
  a->thread.join();
  EXPECT_FALSE(a->elector->IsLeader());
  EXPECT_EQ(a->Calls(), (std::vector<std::string>{"op-a started", "op-a lost"}));
  EXPECT_EQ(a->elector->last_error().code(), Status::Code::kUnavailable);
  ASSERT_TRUE(clock_.WaitForWaiters(1, seconds(10)));
  ASSERT_NO_FATAL_FAILURE(Step(seconds(2), 1, 2));  // 06:00:14
  EXPECT_FALSE(b->elector->IsLeader()) << "the lease of 06:00:00 runs to 06:00:15";
  EXPECT_EQ(Leaders(), 0);
  ASSERT_NO_FATAL_FAILURE(Step(seconds(2), 1));  // 06:00:16
  EXPECT_TRUE(b->elector->IsLeader());
  EXPECT_EQ(Lease()["spec"]["leaseTransitions"], 1);
  a->StopAndJoin();
  a_proxy->Stop();
}

TEST_F(ApiServerTest, AConflictOnRenewWithAnotherHolderIsLostAtOnce) {
  Candidate* a = Add(Config("op-a"));
  ASSERT_NO_FATAL_FAILURE(Lead(a, nullptr));
  // Someone else takes the Lease (a write the elector did not make).
  json lease = Lease();
  lease["spec"]["holderIdentity"] = "op-c";
  lease["spec"]["renewTime"] = "2026-11-23T06:00:01.000000Z";
  ASSERT_OK(admin_->Update(kube::kLeases, ns_, lease, nullptr));
  clock_.Advance(seconds(2));
  a->thread.join();
  EXPECT_EQ(a->Calls(), (std::vector<std::string>{"op-a started", "op-a lost"}));
  EXPECT_EQ(a->elector->ObservedLeader(), "op-c");
  EXPECT_TRUE(kube::IsConflict(a->elector->last_error())) << a->elector->last_error().ToString();
  EXPECT_EQ(LeaseRequests(),
            (std::vector<std::string>{"GET 404", "POST 201", "PUT 409", "GET 200"}));
  EXPECT_EQ(Lease()["spec"]["holderIdentity"], "op-c") << "a loser writes nothing";
}

TEST_F(ApiServerTest, AConflictWhileStillTheHolderIsRetried) {
  Candidate* a = Add(Config("op-a"));
  ASSERT_NO_FATAL_FAILURE(Lead(a, nullptr));
  // Someone edits the Lease (a label) without taking it.
  ASSERT_OK(admin_->MergePatch(kube::kLeases, ns_, kLeaseName,
                               {{"metadata", {{"labels", {{"x", "y"}}}}}}, nullptr));
  ASSERT_NO_FATAL_FAILURE(Step(seconds(2), 1));
  EXPECT_TRUE(a->elector->IsLeader());
  EXPECT_EQ(LeaseRequests(), (std::vector<std::string>{"GET 404", "POST 201", "PUT 409",
                                                       "GET 200", "PUT 200"}));
  const json lease = Lease();
  EXPECT_EQ(lease["spec"]["renewTime"], "2026-11-23T06:00:02.000000Z");
  EXPECT_EQ(lease["metadata"]["labels"]["x"], "y") << "the renewal kept the other's change";
}

TEST_F(ApiServerTest, ReleaseHandsTheLeaseOverAtOnce) {
  Candidate* a = Add(Config("op-a"));
  Candidate* b = Add(Config("op-b"));
  ASSERT_NO_FATAL_FAILURE(Lead(a, b));
  ASSERT_NO_FATAL_FAILURE(Step(seconds(2), 2, 3));  // a few renewals
  a->StopAndJoin();
  EXPECT_EQ(a->Calls(), (std::vector<std::string>{"op-a started", "op-a stopped"}));
  json lease = Lease();
  EXPECT_EQ(lease["spec"].value("holderIdentity", ""), "");
  EXPECT_EQ(lease["spec"]["leaseDurationSeconds"], 1);
  EXPECT_EQ(lease["spec"]["renewTime"], "2026-11-23T06:00:06.000000Z");
  ASSERT_NO_FATAL_FAILURE(Step(seconds(2), 1));  // b's next attempt, 06:00:08
  EXPECT_TRUE(b->elector->IsLeader());
  lease = Lease();
  EXPECT_EQ(lease["spec"]["holderIdentity"], "op-b");
  EXPECT_EQ(lease["spec"]["leaseTransitions"], 1);
  EXPECT_EQ(lease["spec"]["leaseDurationSeconds"], 15);
}

TEST_F(ApiServerTest, StopBeforeLeadingReturnsWithoutCallbacks) {
  Candidate* a = Add(Config("op-a"));
  Candidate* b = Add(Config("op-b"));
  ASSERT_NO_FATAL_FAILURE(Lead(a, b));
  b->StopAndJoin();
  EXPECT_TRUE(b->Calls().empty());
  EXPECT_FALSE(b->elector->WaitForLeadership(milliseconds(1)));
  EXPECT_EQ(Lease()["spec"]["holderIdentity"], "op-a");
}

}  // namespace
}  // namespace controller
}  // namespace gaptrain
