// LeaderElector: makes one operator replica the leader through a
// coordination.k8s.io/v1 Lease, as client-go's leaderelection does, so
// standby replicas can wait with warm caches and take over when the leader
// dies. Optimistic concurrency is the election: every write is a PUT with
// the resourceVersion last read, so of two candidates only one succeeds.
//
// What callers may rely on:
//   - Run() (once, on a thread of the caller's) tries to acquire the Lease
//     every retry_period (plus up to acquire_jitter * retry_period, so
//     standbys do not all call at once). It acquires when the Lease does
//     not exist (created), has no holder, names this identity, or has
//     expired: renewTime + leaseDurationSeconds is before WallNow(). A
//     takeover from another holder (or from none) increments
//     leaseTransitions and sets acquireTime. (Expiry compares the holder's
//     clock with this replica's: their clocks must agree to well within
//     lease_duration - renew_deadline, as NTP-synchronised nodes do.)
//   - Once it holds the Lease it calls on_started_leading and renews every
//     retry_period. Leadership is lost, and on_stopped_leading(kLost)
//     called, when no renewal has succeeded for renew_deadline, or when a
//     renewal meets a 409 and the Lease, read again, names another holder.
//     Run() then returns; the process should stop reconciling and exit, as
//     controller-runtime does (a standby takes over).
//   - Stop() (any thread, idempotent) ends Run() at its next wait; a leader
//     first releases the Lease (holderIdentity "", leaseDurationSeconds 1,
//     renewTime now) when release_on_stop, so a standby takes over at its
//     next attempt instead of after leaseDurationSeconds, then calls
//     on_stopped_leading(kStopped). Without release_on_stop the Lease
//     simply expires. An API call in flight finishes first (bounded by
//     the client's request_timeout). Stop the work the leadership guards
//     before calling Stop(), so that the next leader does not overlap it.
//   - Callbacks run on Run()'s thread and must not block (renewals wait for
//     them): hand the work to another thread.
//   - Because a hung API call would delay noticing a lost lease, New()
//     requires the client's request_timeout to be at most
//     lease_duration - renew_deadline (5 s with the defaults): give the
//     elector a Client of its own.

#ifndef GAPTRAIN_OPERATOR_CONTROLLER_LEADER_ELECTION_H_
#define GAPTRAIN_OPERATOR_CONTROLLER_LEADER_ELECTION_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "operator/controller/clock.h"
#include "operator/controller/lease_record.h"
#include "operator/kube/client.h"
#include "services/base/status.h"
#include "services/base/xoshiro256.h"

namespace gaptrain {
namespace controller {

enum class LeadershipEnd {
  kLost,     // renewals failed or another holder took the Lease: exit
  kStopped,  // Stop() ended it (after releasing the Lease, if release_on_stop)
};

struct LeaderElectionConfig {
  std::string lease_namespace;  // "" is the client's default namespace
  std::string lease_name = "gaptrain-operator";
  std::string identity;  // unique per replica: MakeLeaderIdentity(pod name)
  // client-go's defaults. lease_duration is whole seconds (the Lease field
  // is leaseDurationSeconds); lease_duration > renew_deadline >
  // 1.2 * retry_period.
  std::chrono::milliseconds lease_duration{15000};
  std::chrono::milliseconds renew_deadline{10000};
  std::chrono::milliseconds retry_period{2000};
  double acquire_jitter = 1.2;  // >= 0; tests use 0 for exact waits
  bool release_on_stop = true;
  Clock* clock = RealClock();
  std::function<void()> on_started_leading;
  std::function<void(LeadershipEnd)> on_stopped_leading;
  // The holder seen in the Lease changed (this identity included).
  std::function<void(const std::string& holder)> on_new_leader;
};

// "POD_NAME_" + 8 random hex digits (pods recreated under the same name by
// a StatefulSet must not pass for the old leader); "gaptrain-operator_..."
// when pod_name is "".
std::string MakeLeaderIdentity(const std::string& pod_name);

class LeaderElector {
 public:
  // INVALID_ARGUMENT naming the field for a config out of range (see
  // LeaderElectionConfig) or a client whose request_timeout is too long.
  // `client` must outlive the elector.
  static Status New(kube::Client* client, LeaderElectionConfig config,
                    std::unique_ptr<LeaderElector>* elector);
  // Only once Run() has returned (or was never called).
  ~LeaderElector() = default;

  LeaderElector(const LeaderElector&) = delete;
  LeaderElector& operator=(const LeaderElector&) = delete;

  void Run();
  void Stop();

  bool IsLeader() const;
  // Waits (real time) until this replica leads (true), or until Run() has
  // returned or `timeout` passed (false).
  bool WaitForLeadership(std::chrono::milliseconds timeout) const;
  // The holder last seen in the Lease ("" before the first read).
  std::string ObservedLeader() const;
  // The latest failed API call or malformed Lease (OK if none).
  Status last_error() const;
  const std::string& identity() const { return config_.identity; }

 private:
  enum class Attempt {
    kHeld,         // created, acquired or renewed
    kHeldByOther,  // someone else holds a live lease
    kFailed,       // an API error or a malformed Lease; try again later
  };

  LeaderElector(kube::Client* client, LeaderElectionConfig config);

  Attempt TryAcquireOrRenew();
  // Writes `record` over `lease` (PUT with its resourceVersion).
  Attempt Write(nlohmann::json lease, const LeaseRecord& record);
  Attempt Create();
  void Release();
  void Observe(const std::string& holder);
  void Failed(const Status& status);
  void SetLeading(bool leading);
  // Waits on the clock for `d` or Stop(); false when stopped.
  bool Sleep(Clock::Duration d);
  Clock::Duration AcquireDelay();

  kube::Client* const client_;
  const LeaderElectionConfig config_;
  const std::string ns_;
  Clock* const clock_;
  Xoshiro256 jitter_;
  // The Lease as this replica last wrote it (while leading): renewals PUT
  // it without reading first.
  std::optional<nlohmann::json> own_lease_;

  mutable std::mutex mu_;
  mutable std::condition_variable changed_;
  bool ran_ = false;
  bool running_ = false;
  bool stop_ = false;
  bool leading_ = false;
  std::string observed_leader_;
  Status last_error_;
};

}  // namespace controller
}  // namespace gaptrain

#endif  // GAPTRAIN_OPERATOR_CONTROLLER_LEADER_ELECTION_H_
