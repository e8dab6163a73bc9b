// ElectionCandidates: LeaderElectors for tests, each with a client of its
// own, a Run() thread and a record of its callbacks ("op-a started",
// "op-a lost", "op-a stopped"), all timed by one FakeClock, so a test moves
// time itself and waits until every candidate is back at its next wait.
// Used against the scripted server (leader_election_test) and a real
// kube-apiserver (api_server_test). Tests only.

#ifndef GAPTRAIN_OPERATOR_CONTROLLER_ELECTION_CANDIDATES_H_
#define GAPTRAIN_OPERATOR_CONTROLLER_ELECTION_CANDIDATES_H_

#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "operator/controller/fake_clock.h"
#include "operator/controller/leader_election.h"
#include "operator/kube/client.h"

namespace gaptrain {
namespace controller {

struct ElectionCandidate {
  std::unique_ptr<kube::Client> client;
  std::unique_ptr<LeaderElector> elector;
  std::thread thread;
  std::mutex mu;
  std::vector<std::string> calls;  // guarded by mu

  void Record(const std::string& call);
  std::vector<std::string> Calls();
  void Start();
  void StopAndJoin();
};

class ElectionCandidates {
 public:
  explicit ElectionCandidates(FakeClock* clock) : clock_(clock) {}
  ~ElectionCandidates() { StopAll(); }

  // A candidate whose client reaches `server_url` with `token` ("" sends
  // none); `config` gets the clock and callbacks that record. Failures are
  // test failures (EXPECT).
  ElectionCandidate* Add(LeaderElectionConfig config, const std::string& server_url,
                         const std::string& token = "");
  // Starts `leader` and waits until it leads, then starts `standby` (if
  // any), and waits until both wait for their next attempt.
  void Lead(ElectionCandidate* leader, ElectionCandidate* standby);
  // Moves the clock by `step` `times` times, each time waiting until all
  // `running` candidates are back at their next wait.
  void Step(Clock::Duration step, size_t running, int times = 1);
  int Leaders() const;
  void StopAll();

 private:
  FakeClock* const clock_;
  std::vector<std::unique_ptr<ElectionCandidate>> candidates_;
};

}  // namespace controller
}  // namespace gaptrain

#endif  // GAPTRAIN_OPERATOR_CONTROLLER_ELECTION_CANDIDATES_H_
