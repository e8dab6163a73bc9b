// Tests leader election on a fake clock against the scripted server, for
// what a real server does not show or does not send: the exact create and
// renew requests (as recorded from a real kube-apiserver), a malformed
// Lease, and config validation. One leader among two candidates, renewals,
// takeover after expiry or failed renewals, 409s on renew and release are
// tested on a real Lease in api_server_test.

#include "operator/controller/leader_election.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "operator/controller/election_candidates.h"
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

using Candidate = ElectionCandidate;

class LeaderElectionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(kube::ScriptedServer::Start({}, &server_).ok());
  }

  void TearDown() override {
    candidates_.StopAll();
  }

  LeaderElectionConfig Config(const std::string& identity) {
    LeaderElectionConfig config;
    config.identity = identity;
    config.acquire_jitter = 0;
    return config;
  }

  Candidate* Add(LeaderElectionConfig config) {
    return candidates_.Add(std::move(config), server_->url());
  }
  void Lead(Candidate* leader, Candidate* standby) { candidates_.Lead(leader, standby); }
  void Step(Clock::Duration step, size_t running, int times = 1) {
    candidates_.Step(step, running, times);
  }

  FakeClock clock_;
  std::unique_ptr<kube::ScriptedServer> server_;
  ElectionCandidates candidates_{&clock_};
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

// A Lease a real server would refuse to store: its renewTime is no time.
TEST_F(LeaderElectionTest, AMalformedLeaseIsNotTakenOver) {
  const nlohmann::json malformed = {
      {"apiVersion", "coordination.k8s.io/v1"},
      {"kind", "Lease"},
      {"metadata", {{"name", "gaptrain-operator"}, {"namespace", "default"},
                    {"resourceVersion", "228"}}},
      {"spec", {{"holderIdentity", "op-z"}, {"renewTime", "yesterday"}}}};
  server_->SetHandler([malformed](const ReceivedRequest& r) {
    if (r.method == "GET" && r.path == kLease) {
      ScriptedReply reply;
      reply.body = malformed.dump();
      return reply;
    }
    return StatusReply(405, "MethodNotAllowed", r.method + " " + r.path);
  });
  Candidate* a = Add(Config("op-a"));
  a->Start();
  ASSERT_TRUE(clock_.WaitForWaiters(1, seconds(10)));
  Step(seconds(2), 1, 10);
  EXPECT_FALSE(a->elector->IsLeader());
  EXPECT_NE(a->elector->last_error().message().find("spec.renewTime"), std::string::npos)
      << a->elector->last_error().ToString();
  for (const ReceivedRequest& r : server_->requests()) {
    EXPECT_EQ(r.method, "GET") << "nothing is written over it";
  }
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
