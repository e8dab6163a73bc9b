#include "operator/controller/election_candidates.h"

#include <gtest/gtest.h>

#include <chrono>
#include <utility>

namespace gaptrain {
namespace controller {

using std::chrono::seconds;

void ElectionCandidate::Record(const std::string& call) {
  std::lock_guard<std::mutex> lock(mu);
  calls.push_back(call);
}

std::vector<std::string> ElectionCandidate::Calls() {
  std::lock_guard<std::mutex> lock(mu);
  return calls;
}

void ElectionCandidate::Start() {
  thread = std::thread([this] { elector->Run(); });
}

void ElectionCandidate::StopAndJoin() {
  if (elector != nullptr) elector->Stop();
  if (thread.joinable()) thread.join();
}

ElectionCandidate* ElectionCandidates::Add(LeaderElectionConfig config,
                                           const std::string& server_url,
                                           const std::string& token) {
  auto c = std::make_unique<ElectionCandidate>();
  kube::ClusterConfig cluster;
  cluster.server = server_url;
  cluster.token = token;
  kube::ClientOptions options;
  options.request_timeout = seconds(5);
  EXPECT_TRUE(kube::Client::New(cluster, options, &c->client).ok());
  ElectionCandidate* raw = c.get();
  const std::string id = config.identity;
  config.clock = clock_;
  config.on_started_leading = [raw, id] { raw->Record(id + " started"); };
  config.on_stopped_leading = [raw, id](LeadershipEnd end) {
    raw->Record(id + (end == LeadershipEnd::kLost ? " lost" : " stopped"));
  };
  const Status s = LeaderElector::New(c->client.get(), std::move(config), &c->elector);
  EXPECT_TRUE(s.ok()) << s.ToString();
  candidates_.push_back(std::move(c));
  return raw;
}

void ElectionCandidates::Lead(ElectionCandidate* leader, ElectionCandidate* standby) {
  leader->Start();
  ASSERT_TRUE(leader->elector->WaitForLeadership(seconds(10)));
  if (standby != nullptr) standby->Start();
  ASSERT_TRUE(clock_->WaitForWaiters(standby != nullptr ? 2 : 1, seconds(10)));
}

void ElectionCandidates::Step(Clock::Duration step, size_t running, int times) {
  for (int i = 0; i < times; ++i) {
    clock_->Advance(step);
    ASSERT_TRUE(clock_->WaitForWaiters(running, seconds(10)));
  }
}

int ElectionCandidates::Leaders() const {
  int n = 0;
  for (const auto& c : candidates_) n += c->elector != nullptr && c->elector->IsLeader() ? 1 : 0;
  return n;
}

void ElectionCandidates::StopAll() {
  for (auto& c : candidates_) c->StopAndJoin();
}

}  // namespace controller
}  // namespace gaptrain
