// Controller: runs a reconcile function over the keys of a work queue on N
// worker threads, controller-runtime style. Informers' changes become keys
// (Watch), each key is reconciled by one worker at a time, failures are
// retried with per-key backoff, and a reconcile may ask to run again later
// (progress polling). It knows nothing about what it reconciles.
//
// What callers may rely on:
//   - Reconcile(key) is never running twice at once for one key; a change
//     that arrives meanwhile runs it again afterwards (work_queue.h).
//   - After a reconcile: an error status re-adds the key with its backoff
//     (AddRateLimited); success forgets the backoff and, with requeue_after,
//     re-adds the key after that delay (0: at once). An exception thrown by
//     the reconcile function counts as an INTERNAL error, reason
//     "Exception", and is retried the same way.
//   - Start() waits until every watched informer has synced (so the first
//     reconciles see complete caches), then starts the workers; it fails
//     with DEADLINE_EXCEEDED (naming the informer) after sync_timeout and
//     CANCELLED if Stop() came first, starting nothing.
//   - Stop() (idempotent; the destructor calls it) lets the reconciles in
//     flight finish, starts no new one, and returns once every worker has
//     exited. Keys still queued are dropped (level-triggered: they are
//     found again at the next start).
//   - Every reconcile is reported to the observer (if any) on the worker's
//     thread, and counted in stats().

#ifndef GAPTRAIN_OPERATOR_CONTROLLER_CONTROLLER_H_
#define GAPTRAIN_OPERATOR_CONTROLLER_CONTROLLER_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "operator/controller/clock.h"
#include "operator/controller/enqueue.h"
#include "operator/controller/informer.h"
#include "operator/controller/work_queue.h"
#include "services/base/status.h"

namespace gaptrain {
namespace controller {

// What one reconcile asks for.
struct Result {
  Status status;  // not OK: retried with the key's backoff
  // On success: reconcile this key again after this delay.
  std::optional<Clock::Duration> requeue_after;
  // The error's name for metrics ("ApplyConflict"); "" means the status
  // code's name ("UNAVAILABLE").
  std::string error_reason;

  static Result Done() { return Result(); }
  static Result RequeueAfter(Clock::Duration delay);
  static Result Error(Status status, std::string reason = "");
};

// What the observer hears after each reconcile.
struct ReconcileRecord {
  std::string key;
  Status status;
  std::string reason;  // "" on success, else Result::error_reason or the code's name
  Clock::Duration duration{0};
  std::optional<Clock::Duration> requeue_after;  // as returned, on success
};

// Where a metrics layer listens. Calls come from the worker threads, one
// per reconcile, concurrently; they must be quick and thread-safe.
class ControllerObserver {
 public:
  virtual ~ControllerObserver() = default;
  virtual void OnReconciled(const std::string& controller, const ReconcileRecord& record) = 0;
};

class Controller {
 public:
  using ReconcileFunction = std::function<Result(const std::string& key)>;

  struct Options {
    std::string name = "controller";  // for messages and the observer
    int workers = 1;
    WorkQueue::Options queue;  // its clock also times the reconciles
    ControllerObserver* observer = nullptr;
    std::chrono::milliseconds sync_timeout{120000};  // real time
  };

  struct Stats {
    uint64_t reconciles = 0;
    uint64_t errors = 0;
    std::map<std::string, uint64_t> errors_by_reason;
    uint64_t requeues_after = 0;  // successes that asked to run again
    Clock::Duration total_duration{0};
    Clock::Duration max_duration{0};
    size_t queue_depth = 0;  // keys ready now
    size_t in_flight = 0;    // reconciles running now
  };

  // INVALID_ARGUMENT naming the field: no reconcile function, workers < 1,
  // an empty name, a queue option out of range (WorkQueue::Validate).
  static Status New(const Options& options, ReconcileFunction reconcile,
                    std::unique_ptr<Controller>* controller);
  ~Controller();

  Controller(const Controller&) = delete;
  Controller& operator=(const Controller&) = delete;

  // Reconciles mapper(object) whenever `informer` sees the object change
  // (updates only where `filter`, if given, says so; enqueue.h), and makes
  // Start() wait for its sync. Before Start() and before the informer
  // starts (FAILED_PRECONDITION otherwise). Its handlers enqueue into this
  // Controller: stop the informer before destroying the Controller.
  Status Watch(Informer* informer, KeyMapper mapper, UpdateFilter filter = nullptr);

  Status Start();
  void Stop();

  // For keys from elsewhere (a periodic resync, a test).
  WorkQueue* queue() { return &queue_; }
  const std::string& name() const { return options_.name; }
  Stats stats();

 private:
  Controller(const Options& options, ReconcileFunction reconcile);
  void Work();
  Result ReconcileGuarded(const std::string& key);
  void Record(const ReconcileRecord& record);

  const Options options_;
  const ReconcileFunction reconcile_;
  Clock* const clock_;
  WorkQueue queue_;

  std::mutex mu_;
  std::condition_variable changed_;
  std::vector<Informer*> informers_;
  size_t synced_ = 0;  // informers whose on_synced ran
  bool started_ = false;
  bool stopping_ = false;
  std::vector<std::thread> workers_;
  Stats stats_;
};

}  // namespace controller
}  // namespace gaptrain

#endif  // GAPTRAIN_OPERATOR_CONTROLLER_CONTROLLER_H_
