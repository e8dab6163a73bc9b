// StepWaiters: sync-mode PushPull calls whose gradient joined a step that
// is not taken yet. Each is held until the master's version passes the
// one its push saw, then resumed (it answers with the step's parameters),
// or taken back when its time runs out or its call is cancelled: exactly
// one of the two happens to each waiter. Workers then need no polling to
// learn that their step is out.

#ifndef GAPTRAIN_SERVICES_MASTER_STEP_WAITERS_H_
#define GAPTRAIN_SERVICES_MASTER_STEP_WAITERS_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <utility>

namespace gaptrain {

class StepWaiters {
 public:
  using Resume = std::function<void()>;

  // Holds `resume` until Release sees a version above `version`. Returns
  // the waiter's id (never 0).
  uint64_t Add(uint64_t version, Resume resume);

  // Takes the waiter back before it is resumed: true when it was still
  // held (its Resume will never run), false when Release took it first
  // (or `id` is unknown).
  bool Remove(uint64_t id);

  // Runs the Resume of every waiter held for a version below `version`,
  // outside the lock, in the order they were added.
  void Release(uint64_t version);

  size_t size() const;
  // Whether none waits, without the lock: the master asks it after every
  // applied push (async mode: never anyone), so it costs an atomic load.
  // A waiter added just after it read true is released by its adder.
  bool empty() const { return held_.load(std::memory_order_acquire) == 0; }

 private:
  std::atomic<size_t> held_{0};  // waiters_.size(), for empty()
  mutable std::mutex mu_;
  uint64_t next_id_ = 1;
  std::map<uint64_t, std::pair<uint64_t, Resume>> waiters_;  // id -> (version, resume)
};

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_MASTER_STEP_WAITERS_H_
