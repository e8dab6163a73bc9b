// MembershipFeed: keeps the master's member set equal to the coordinator's
// live workers. Level-triggered: it always sends the whole newest set
// (never a diff), retries a failed call with capped exponential backoff,
// and resends the set every resend_seconds even when nothing changed, so a
// master that restarted from an older checkpoint converges too, and those
// calls double as the master's health probe. With θ in several shards the
// process runs one feed per shard, so a shard that is down holds up no
// other.
//
// What callers may rely on:
//   - Offer() never blocks on the network: it records the set and wakes the
//     feed's own thread, which makes the calls. Older generations than the
//     newest offered are ignored, so offers may arrive out of order.
//   - `send` and `health` run on the feed's thread, with no lock of the
//     feed held; `health` gets every call's outcome.
//   - Stop() (also the destructor) returns once the thread is joined; a
//     call in flight finishes first (bounded by the sender's deadline).

#ifndef GAPTRAIN_SERVICES_COORDINATOR_MEMBERSHIP_FEED_H_
#define GAPTRAIN_SERVICES_COORDINATOR_MEMBERSHIP_FEED_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "services/base/status.h"
#include "services/coordinator/membership.h"

namespace gaptrain {

class MembershipFeed {
 public:
  using SendFn = std::function<Status(const std::vector<WorkerId>& members)>;
  using HealthFn = std::function<void(bool reachable, const std::string& error)>;

  struct Options {
    std::chrono::milliseconds initial_backoff{100};
    std::chrono::milliseconds max_backoff{5000};
    std::chrono::milliseconds resend{10000};
  };

  MembershipFeed(SendFn send, HealthFn health, Options options);
  ~MembershipFeed();

  void Offer(uint64_t generation, std::vector<WorkerId> members);
  void Stop();

  // Waits until the master acknowledged `generation` or newer; false on
  // timeout. For tests and shutdown.
  bool WaitAcknowledged(uint64_t generation, std::chrono::milliseconds timeout);

 private:
  void Loop();

  const SendFn send_;
  const HealthFn health_;
  const Options options_;

  std::mutex mu_;  // guards the fields below
  std::condition_variable wake_;
  bool stopping_ = false;
  bool offered_ = false;
  uint64_t generation_ = 0;
  std::vector<WorkerId> members_;
  bool acknowledged_any_ = false;
  uint64_t acknowledged_ = 0;
  std::thread thread_;
};

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_COORDINATOR_MEMBERSHIP_FEED_H_
