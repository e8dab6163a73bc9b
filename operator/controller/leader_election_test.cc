// Tests leader election on a fake clock against an in-test Lease endpoint
// (the ScriptedServer with a handler that keeps one Lease, with
// kube-apiserver's resourceVersion checks): the recorded create and renew
// requests, one leader among two candidates, renewals keeping the lease,
// takeover after expiry when the leader stops renewing or its renewals
// fail, a 409 on renew meaning lost, release handing over at once, a
// malformed Lease, and config validation.

#include "operator/controller/leader_election.h"

#include <gtest/gtest.h>

#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "operator/controller/fake_clock.h"
#include "operator/testing/kube_test_support.h"
#include "operator/testing/scripted_server.h"

namespace gaptrain {
namespace controller {
namespace {

using kube::ReceivedRequest;
using kube::ScriptedReply;
using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr char kCollection[] = "/apis/coordination.k8s.io/v1/namespaces/default/leases";
constexpr char kLease[] =
    "/apis/coordination.k8s.io/v1/namespaces/default/leases/gaptrain-operator";

ScriptedReply StatusReply(int code, const std::string& reason, const std::string& message) {
  ScriptedReply reply;
  reply.status = code;
  reply.body = nlohmann::json({{"kind", "Status"},
                               {"apiVersion", "v1"},
                               {"status", "Failure"},
                               {"message", message},
                               {"reason", reason},
                               {"code", code}})
                   .dump();
  return reply;
}

// One Lease, kept as kube-apiserver keeps it: create refuses an existing
// one, a PUT whose resourceVersion is not the current one gets the
// recorded 409, every write gets a new resourceVersion.
class LeaseEndpoint {
 public:
  explicit LeaseEndpoint(kube::ScriptedServer* server) {
    kube::Recording conflict;
    EXPECT_TRUE(kube::LoadRecording("lease-steal-conflict", &conflict).ok());
    conflict_.status = 409;
    conflict_.body = conflict.response_body.dump();
    server->SetHandler([this](const ReceivedRequest& r) { return Handle(r); });
  }

  // PUTs naming this holder are answered 503 (its renewals fail).
  void FailPutsFrom(const std::string& identity) {
    std::lock_guard<std::mutex> lock(mu_);
    failing_ = identity;
  }

  // Someone else writes the Lease.
  void Overwrite(const std::function<void(nlohmann::json*)>& change) {
    std::lock_guard<std::mutex> lock(mu_);
    change(&lease_);
    lease_["metadata"]["resourceVersion"] = std::to_string(++version_);
  }

  nlohmann::json lease() {
    std::lock_guard<std::mutex> lock(mu_);
    return lease_;
  }
  std::string holder() {
    return lease().value("spec", nlohmann::json::object()).value("holderIdentity", "");
  }

  // "POST op-a 201", "PUT op-b 409", "GET 200".
  std::vector<std::string> log() {
    std::lock_guard<std::mutex> lock(mu_);
    return log_;
  }

 private:
  ScriptedReply Handle(const ReceivedRequest& r) {
    std::lock_guard<std::mutex> lock(mu_);
    nlohmann::json body = nlohmann::json::parse(r.body.empty() ? "null" : r.body, nullptr, false);
    std::string who;
    if (body.is_object()) who = " " + body["spec"].value("holderIdentity", "");
    ScriptedReply reply = Answer(r, body);
    log_.push_back(r.method + who + " " + std::to_string(reply.status));
    return reply;
  }

  ScriptedReply Answer(const ReceivedRequest& r, nlohmann::json body) {
    if (r.method == "GET" && r.path == kLease) {
      if (lease_.is_null())
        return StatusReply(404, "NotFound", "leases \"gaptrain-operator\" not found");
      return Json(200, lease_);
    }
    if (r.method == "POST" && r.path == kCollection) {
      if (!lease_.is_null()) return StatusReply(409, "AlreadyExists", "already exists");
      body["metadata"]["uid"] = "2e42b6f0-55a3-4e85-86ea-27b07f7fb180";
      body["metadata"]["resourceVersion"] = std::to_string(++version_);
      lease_ = body;
      return Json(201, lease_);
    }
    if (r.method == "PUT" && r.path == kLease) {
      if (!failing_.empty() && body["spec"].value("holderIdentity", "") == failing_) {
        return StatusReply(503, "ServiceUnavailable", "etcd is down");
      }
      if (lease_.is_null()) return StatusReply(404, "NotFound", "not found");
      if (body["metadata"].value("resourceVersion", "") != lease_["metadata"]["resourceVersion"]) {
        return conflict_;
      }
      body["metadata"]["resourceVersion"] = std::to_string(++version_);
      lease_ = body;
      return Json(200, lease_);
    }
    return StatusReply(405, "MethodNotAllowed", r.method + " " + r.path);
  }

  static ScriptedReply Json(int status, const nlohmann::json& body) {
    ScriptedReply reply;
    reply.status = status;
    reply.body = body.dump();
    return reply;
  }

  std::mutex mu_;
  nlohmann::json lease_;
  int version_ = 227;
  std::string failing_;
  ScriptedReply conflict_;
  std::vector<std::string> log_;
};

// One candidate: its client, elector, Run() thread and callback calls.
struct Candidate {
  std::unique_ptr<kube::Client> client;
  std::unique_ptr<LeaderElector> elector;
  std::thread thread;
  std::mutex mu;
  std::vector<std::string> calls;

  void Record(const std::string& call) {
    std::lock_guard<std::mutex> lock(mu);
    calls.push_back(call);
  }
  std::vector<std::string> Calls() {
    std::lock_guard<std::mutex> lock(mu);
    return calls;
  }
  void Start() {
    thread = std::thread([this] { elector->Run(); });
  }
  void StopAndJoin() {
    if (elector != nullptr) elector->Stop();
    if (thread.joinable()) thread.join();
  }
};

class LeaderElectionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(kube::ScriptedServer::Start({}, &server_).ok());
    endpoint_ = std::make_unique<LeaseEndpoint>(server_.get());
  }

  void TearDown() override {
    for (auto& c : candidates_) c->StopAndJoin();
  }

  LeaderElectionConfig Config(const std::string& identity) {
    LeaderElectionConfig config;
    config.identity = identity;
    config.clock = &clock_;
    config.acquire_jitter = 0;
    return config;
  }

  Candidate* Add(LeaderElectionConfig config) {
    auto c = std::make_unique<Candidate>();
    kube::ClusterConfig cluster;
    cluster.server = server_->url();
    kube::ClientOptions options;
    options.request_timeout = seconds(5);
    EXPECT_TRUE(kube::Client::New(cluster, options, &c->client).ok());
    Candidate* raw = c.get();
    const std::string id = config.identity;
    config.on_started_leading = [raw, id] { raw->Record(id + " started"); };
    config.on_stopped_leading = [raw, id](LeadershipEnd end) {
      raw->Record(id + (end == LeadershipEnd::kLost ? " lost" : " stopped"));
    };
    Status s = LeaderElector::New(c->client.get(), std::move(config), &c->elector);
    EXPECT_TRUE(s.ok()) << s.ToString();
    candidates_.push_back(std::move(c));
    return raw;
  }

  // Starts `leader` and waits until it leads, then starts `standby` (if
  // any), and waits until both wait for their next attempt.
  void Lead(Candidate* leader, Candidate* standby) {
    leader->Start();
    ASSERT_TRUE(leader->elector->WaitForLeadership(seconds(10)));
    if (standby != nullptr) standby->Start();
    ASSERT_TRUE(clock_.WaitForWaiters(standby != nullptr ? 2 : 1, seconds(10)));
  }

  // Moves the clock by `step` `times` times, each time waiting until all
  // `running` candidates are back at their next wait.
  void Step(Clock::Duration step, size_t running, int times = 1) {
    for (int i = 0; i < times; ++i) {
      clock_.Advance(step);
      ASSERT_TRUE(clock_.WaitForWaiters(running, seconds(10)));
    }
  }

  int Leaders() {
    int n = 0;
    for (auto& c : candidates_) n += c->elector->IsLeader() ? 1 : 0;
    return n;
  }

  FakeClock clock_;
  std::unique_ptr<kube::ScriptedServer> server_;
  std::unique_ptr<LeaseEndpoint> endpoint_;
  std::vector<std::unique_ptr<Candidate>> candidates_;
};

TEST_F(LeaderElectionTest, CreatesAndRenewsTheLeaseAsRecorded) {
  kube::Recording create, renew;
  ASSERT_TRUE(kube::LoadRecording("lease-create", &create).ok());
  ASSERT_TRUE(kube::LoadRecording("lease-renew", &renew).ok());
  server_->SetHandler(nullptr);
  server_->Push(StatusReply(404, "NotFound", "leases \"gaptrain-operator\" not found"));
  ScriptedReply created;
  created.status = 201;
  created.body = create.response_body.dump();
  server_->Push(created);
  ScriptedReply renewed;
  renewed.body = renew.response_body.dump();
  server_->Push(renewed);

  LeaderElectionConfig config = Config("op-a");
  config.retry_period = seconds(5);  // the recording renewed after 5 s
  Candidate* a = Add(config);
  ASSERT_NO_FATAL_FAILURE(Lead(a, nullptr));
  clock_.Advance(seconds(5));
  ASSERT_TRUE(server_->WaitForRequests(3, seconds(10)));
  ASSERT_TRUE(clock_.WaitForWaiters(1, seconds(10)));
  const std::vector<ReceivedRequest> sent = server_->requests();
  EXPECT_EQ(sent[0].method, "GET");
  EXPECT_EQ(sent[0].path, kLease);
  EXPECT_EQ(sent[1].method, "POST");
  EXPECT_EQ(sent[1].path, create.path);
  EXPECT_EQ(nlohmann::json::parse(sent[1].body), create.request_body);
  EXPECT_EQ(sent[2].method, "PUT");
  EXPECT_EQ(sent[2].path, renew.path);
  EXPECT_EQ(nlohmann::json::parse(sent[2].body), renew.request_body)
      << "a renewal is a PUT of the object last written, without a GET first";
  EXPECT_TRUE(a->elector->IsLeader());
  EXPECT_EQ(a->elector->ObservedLeader(), "op-a");
  EXPECT_EQ(a->Calls(), (std::vector<std::string>{"op-a started"}));
}

TEST_F(LeaderElectionTest, OneLeadsAndItsRenewalsKeepTheLease) {
  Candidate* a = Add(Config("op-a"));
  Candidate* b = Add(Config("op-b"));
  ASSERT_NO_FATAL_FAILURE(Lead(a, b));
  for (int i = 0; i < 20; ++i) {  // 40 s: the lease would have expired 2.6 times over
    Step(seconds(2), 2);
    ASSERT_EQ(Leaders(), 1);
  }
  EXPECT_TRUE(a->elector->IsLeader());
  EXPECT_FALSE(b->elector->IsLeader());
  EXPECT_EQ(b->elector->ObservedLeader(), "op-a");
  EXPECT_TRUE(b->Calls().empty());
  const nlohmann::json lease = endpoint_->lease();
  EXPECT_EQ(lease["spec"]["holderIdentity"], "op-a");
  EXPECT_EQ(lease["spec"]["renewTime"], "2026-11-23T06:00:40.000000Z");
  EXPECT_EQ(lease["spec"]["acquireTime"], "2026-11-23T06:00:00.000000Z");
  EXPECT_EQ(lease["spec"]["leaseTransitions"], 0);
  EXPECT_EQ(lease["spec"]["leaseDurationSeconds"], 15);
}

TEST_F(LeaderElectionTest, AStandbyTakesOverOnlyOnceTheLeaseExpires) {
  LeaderElectionConfig config = Config("op-a");
  config.release_on_stop = false;  // as if it crashed
  Candidate* a = Add(config);
  Candidate* b = Add(Config("op-b"));
  ASSERT_NO_FATAL_FAILURE(Lead(a, b));
  a->StopAndJoin();  // renewTime stays 06:00:00
  EXPECT_EQ(a->Calls(), (std::vector<std::string>{"op-a started", "op-a stopped"}));
  EXPECT_EQ(endpoint_->holder(), "op-a");
  Step(seconds(2), 1, 7);  // 06:00:14: renewTime + 15 s is still ahead
  EXPECT_FALSE(b->elector->IsLeader());
  Step(seconds(2), 1);  // 06:00:16
  EXPECT_TRUE(b->elector->IsLeader());
  const nlohmann::json lease = endpoint_->lease();
  EXPECT_EQ(lease["spec"]["holderIdentity"], "op-b");
  EXPECT_EQ(lease["spec"]["leaseTransitions"], 1);
  EXPECT_EQ(lease["spec"]["acquireTime"], "2026-11-23T06:00:16.000000Z");
  EXPECT_EQ(b->Calls(), (std::vector<std::string>{"op-b started"}));
}

TEST_F(LeaderElectionTest, ALeaderWhoseRenewalsFailStepsDownBeforeTheStandbyTakesOver) {
  Candidate* a = Add(Config("op-a"));
  Candidate* b = Add(Config("op-b"));
  ASSERT_NO_FATAL_FAILURE(Lead(a, b));
  endpoint_->FailPutsFrom("op-a");
  Step(seconds(2), 2, 4);  // 06:00:08: four failed renewals, within renew_deadline
  EXPECT_TRUE(a->elector->IsLeader());
  clock_.Advance(seconds(2));  // 06:00:10: renew_deadline since the last renewal
  a->thread.join();
  EXPECT_FALSE(a->elector->IsLeader());
  EXPECT_EQ(a->Calls(), (std::vector<std::string>{"op-a started", "op-a lost"}));
  EXPECT_EQ(a->elector->last_error().code(), Status::Code::kUnavailable);
  ASSERT_TRUE(clock_.WaitForWaiters(1, seconds(10)));
  Step(seconds(2), 1, 2);  // 06:00:14
  EXPECT_FALSE(b->elector->IsLeader()) << "the lease of 06:00:00 runs to 06:00:15";
  EXPECT_EQ(Leaders(), 0);
  Step(seconds(2), 1);  // 06:00:16
  EXPECT_TRUE(b->elector->IsLeader());
  EXPECT_EQ(endpoint_->lease()["spec"]["leaseTransitions"], 1);
}

TEST_F(LeaderElectionTest, AConflictOnRenewWithAnotherHolderIsLostAtOnce) {
  Candidate* a = Add(Config("op-a"));
  ASSERT_NO_FATAL_FAILURE(Lead(a, nullptr));
  endpoint_->Overwrite([](nlohmann::json* lease) {
    (*lease)["spec"]["holderIdentity"] = "op-c";
    (*lease)["spec"]["renewTime"] = "2026-11-23T06:00:01.000000Z";
  });
  clock_.Advance(seconds(2));
  a->thread.join();
  EXPECT_EQ(a->Calls(), (std::vector<std::string>{"op-a started", "op-a lost"}));
  EXPECT_EQ(a->elector->ObservedLeader(), "op-c");
  EXPECT_EQ(endpoint_->log(),
            (std::vector<std::string>{"GET 404", "POST op-a 201", "PUT op-a 409", "GET 200"}));
  EXPECT_EQ(endpoint_->holder(), "op-c") << "a loser writes nothing";
}

TEST_F(LeaderElectionTest, AConflictWhileStillTheHolderIsRetried) {
  Candidate* a = Add(Config("op-a"));
  ASSERT_NO_FATAL_FAILURE(Lead(a, nullptr));
  // Someone edits the Lease (a label) without taking it.
  endpoint_->Overwrite([](nlohmann::json* lease) { (*lease)["metadata"]["labels"]["x"] = "y"; });
  Step(seconds(2), 1);
  EXPECT_TRUE(a->elector->IsLeader());
  EXPECT_EQ(endpoint_->log(), (std::vector<std::string>{"GET 404", "POST op-a 201", "PUT op-a 409",
                                                        "GET 200", "PUT op-a 200"}));
  EXPECT_EQ(endpoint_->lease()["spec"]["renewTime"], "2026-11-23T06:00:02.000000Z");
}

TEST_F(LeaderElectionTest, ReleaseHandsTheLeaseOverAtOnce) {
  Candidate* a = Add(Config("op-a"));
  Candidate* b = Add(Config("op-b"));
  ASSERT_NO_FATAL_FAILURE(Lead(a, b));
  Step(seconds(2), 2, 3);  // a few renewals
  a->StopAndJoin();
  EXPECT_EQ(a->Calls(), (std::vector<std::string>{"op-a started", "op-a stopped"}));
  nlohmann::json lease = endpoint_->lease();
  EXPECT_EQ(lease["spec"]["holderIdentity"], "");
  EXPECT_EQ(lease["spec"]["leaseDurationSeconds"], 1);
  EXPECT_EQ(lease["spec"]["renewTime"], "2026-11-23T06:00:06.000000Z");
  EXPECT_FALSE(a->elector->WaitForLeadership(milliseconds(1)));
  Step(seconds(2), 1);  // b's next attempt, 06:00:08
  EXPECT_TRUE(b->elector->IsLeader());
  lease = endpoint_->lease();
  EXPECT_EQ(lease["spec"]["holderIdentity"], "op-b");
  EXPECT_EQ(lease["spec"]["leaseTransitions"], 1);
  EXPECT_EQ(lease["spec"]["leaseDurationSeconds"], 15);
}

TEST_F(LeaderElectionTest, StopBeforeLeadingReturnsWithoutCallbacks) {
  Candidate* a = Add(Config("op-a"));
  Candidate* b = Add(Config("op-b"));
  ASSERT_NO_FATAL_FAILURE(Lead(a, b));
  b->StopAndJoin();
  EXPECT_TRUE(b->Calls().empty());
  EXPECT_FALSE(b->elector->WaitForLeadership(seconds(1)));
  EXPECT_EQ(endpoint_->holder(), "op-a");
}

TEST_F(LeaderElectionTest, AMalformedLeaseIsNotTakenOver) {
  endpoint_->Overwrite([](nlohmann::json* lease) {
    *lease = {{"apiVersion", "coordination.k8s.io/v1"},
              {"kind", "Lease"},
              {"metadata", {{"name", "gaptrain-operator"}, {"namespace", "default"}}},
              {"spec", {{"holderIdentity", "op-z"}, {"renewTime", "yesterday"}}}};
  });
  Candidate* a = Add(Config("op-a"));
  a->Start();
  ASSERT_TRUE(clock_.WaitForWaiters(1, seconds(10)));
  Step(seconds(2), 1, 10);
  EXPECT_FALSE(a->elector->IsLeader());
  EXPECT_NE(a->elector->last_error().message().find("spec.renewTime"), std::string::npos)
      << a->elector->last_error().ToString();
}

TEST_F(LeaderElectionTest, NewValidatesTheConfig) {
  kube::ClusterConfig cluster;
  cluster.server = server_->url();
  kube::ClientOptions options;
  options.request_timeout = seconds(5);
  std::unique_ptr<kube::Client> client;
  ASSERT_TRUE(kube::Client::New(cluster, options, &client).ok());
  std::unique_ptr<LeaderElector> elector;
  auto error = [&](LeaderElectionConfig config) {
    Status s = LeaderElector::New(client.get(), config, &elector);
    EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
    return s.message();
  };
  LeaderElectionConfig config = Config("op-a");
  ASSERT_TRUE(LeaderElector::New(client.get(), config, &elector).ok());
  config.identity = "";
  EXPECT_NE(error(config).find("identity"), std::string::npos);
  config = Config("op-a");
  config.lease_name = "Bad_Name";
  EXPECT_NE(error(config).find("lease_name"), std::string::npos);
  config = Config("op-a");
  config.lease_duration = milliseconds(15500);
  EXPECT_NE(error(config).find("whole number of seconds"), std::string::npos);
  config = Config("op-a");
  config.renew_deadline = seconds(2);
  EXPECT_NE(error(config).find("renew_deadline"), std::string::npos);
  config = Config("op-a");
  config.lease_duration = seconds(10);
  EXPECT_NE(error(config).find("lease_duration"), std::string::npos);
  config = Config("op-a");
  config.acquire_jitter = -1;
  EXPECT_NE(error(config).find("acquire_jitter"), std::string::npos);
  config = Config("op-a");
  config.clock = nullptr;
  EXPECT_NE(error(config).find("clock"), std::string::npos);
  config = Config("op-a");
  config.lease_duration = seconds(12);  // leaves 2 s, the client may take 5 s
  EXPECT_NE(error(config).find("request_timeout"), std::string::npos);
}

TEST(MakeLeaderIdentityTest, AddsARandomSuffixToThePodName) {
  const std::string a = MakeLeaderIdentity("gaptrain-operator-7d9f");
  const std::string b = MakeLeaderIdentity("gaptrain-operator-7d9f");
  ASSERT_EQ(a.size(), std::string("gaptrain-operator-7d9f_").size() + 8);
  EXPECT_EQ(a.rfind("gaptrain-operator-7d9f_", 0), 0u);
  EXPECT_EQ(a.find_first_not_of("0123456789abcdef", a.size() - 8), std::string::npos);
  EXPECT_NE(a, b);
  EXPECT_EQ(MakeLeaderIdentity("").rfind("gaptrain-operator_", 0), 0u);
}

}  // namespace
}  // namespace controller
}  // namespace gaptrain
