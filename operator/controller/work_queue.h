// WorkQueue: the keys ("namespace/name") a controller still has to
// reconcile, with client-go's workqueue semantics (a rate-limiting,
// delaying queue), so a controller never reconciles one object on two
// threads at once and never loses a change that arrives while it works.
//
// What callers may rely on:
//   - Add(key) de-duplicates: a key waiting in the queue is there once.
//   - A key handed out by Get() is "processing" until Done(key). Adding it
//     meanwhile marks it dirty: it is queued again at Done(), so it is
//     reconciled again, after the current pass and never concurrently.
//   - Keys are handed out in the order they became ready (FIFO).
//   - AddAfter(key, delay) adds it once `delay` has passed on the clock; a
//     key already waiting keeps the earlier of its two times.
//   - AddRateLimited(key) is AddAfter with the larger of the key's own
//     exponential backoff (base_delay * 2^n after n rate-limited adds since
//     its last Forget, capped at max_delay) and the overall token bucket's
//     delay (qps, burst; qps 0 disables it). Forget(key) restarts the key's
//     backoff; NumRequeues(key) is n.
//   - Get() blocks until a key is ready or the queue shuts down; false
//     means "shut down: stop working". ShutDown() makes every Get() return
//     false at once, even with keys left (the controller is level-triggered:
//     the next leader lists everything again); Add/AddAfter are ignored
//     from then on. ShutDownWithDrain() does the same and then waits until
//     every key in processing is Done(). Both are idempotent.
//   - Len() is the number of keys ready to be handed out (the depth
//     metric); NumWaiting() those waiting for their AddAfter time.
//   - Thread-safe. The destructor shuts down; no Get() may be running then.

#ifndef GAPTRAIN_OPERATOR_CONTROLLER_WORK_QUEUE_H_
#define GAPTRAIN_OPERATOR_CONTROLLER_WORK_QUEUE_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

#include "operator/controller/clock.h"
#include "services/base/backoff.h"
#include "services/base/status.h"

namespace gaptrain {
namespace controller {

class WorkQueue {
 public:
  struct Options {
    Clock* clock = RealClock();
    // client-go's default per-item limiter: 5 ms doubling up to 1000 s.
    std::chrono::milliseconds base_delay{5};
    std::chrono::milliseconds max_delay{1000 * 1000};
    // client-go's default overall bucket: 10 keys/s sustained, bursts of 100.
    double qps = 10;
    int burst = 100;
  };

  // INVALID_ARGUMENT naming the field: no clock, base_delay <= 0,
  // max_delay < base_delay, qps < 0 or not finite, burst < 1 with qps > 0.
  static Status Validate(const Options& options);

  // `options` must be valid (checked by assert only).
  explicit WorkQueue(const Options& options);
  ~WorkQueue();

  WorkQueue(const WorkQueue&) = delete;
  WorkQueue& operator=(const WorkQueue&) = delete;

  void Add(const std::string& key);
  void AddAfter(const std::string& key, Clock::Duration delay);
  void AddRateLimited(const std::string& key);
  void Forget(const std::string& key);
  int NumRequeues(const std::string& key) const;

  bool Get(std::string* key);
  void Done(const std::string& key);

  void ShutDown();
  void ShutDownWithDrain();
  bool ShuttingDown() const;

  // Not const: keys whose time has come are moved into the queue first.
  size_t Len();
  size_t NumWaiting();
  size_t NumProcessing() const;

 private:
  // Queues `key` unless it is queued or processing already (mu_ held).
  void AddLocked(const std::string& key);
  // Moves keys whose AddAfter time has come into the queue (mu_ held).
  void PromoteDueLocked();
  // The token bucket's delay for one more key (mu_ held).
  Clock::Duration BucketDelayLocked();

  const Options options_;
  Clock* const clock_;

  mutable std::mutex mu_;
  std::condition_variable changed_;
  std::deque<std::string> queue_;
  std::unordered_set<std::string> dirty_;       // queued, or added while processing
  std::unordered_set<std::string> processing_;  // handed out, not yet Done
  // Keys waiting for their time: ordered by (time, arrival), and by key.
  uint64_t next_arrival_ = 0;
  std::set<std::tuple<Clock::TimePoint, uint64_t, std::string>> waiting_;
  std::unordered_map<std::string, std::pair<Clock::TimePoint, uint64_t>> waiting_by_key_;
  std::unordered_map<std::string, Backoff> backoff_;  // keys with a rate-limited add
  double tokens_;
  Clock::TimePoint tokens_at_;
  bool shutting_down_ = false;
};

}  // namespace controller
}  // namespace gaptrain

#endif  // GAPTRAIN_OPERATOR_CONTROLLER_WORK_QUEUE_H_
