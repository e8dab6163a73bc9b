// TaskQueue: one epoch's data tasks and where each one is. Positions
// [0, samples) of the epoch's permutation are cut into tasks of
// samples_per_task (the last may be shorter); task i covers
// [i * samples_per_task, min((i + 1) * samples_per_task, samples)), so the
// tasks cover the epoch exactly once by construction. Each task is queued,
// in flight (held by one worker) or done (with the worker that completed
// it). A task taken from a departed worker, or a done one whose updates a
// master restore lost, goes back to the FRONT of the queue: the epoch's
// oldest work is finished first.
//
// Task ids are id_base + index + 1, so they are unique across epochs when
// the caller spaces the bases (CoordinatorState uses epoch * tasks per
// full epoch) and can be recomputed after a restart.
//
// Pure bookkeeping: no clock, no I/O, no locking. The caller checks that
// an index is in the state an operation expects; a wrong one is a bug and
// aborts (assert), never a silent double count.

#ifndef GAPTRAIN_SERVICES_COORDINATOR_TASK_QUEUE_H_
#define GAPTRAIN_SERVICES_COORDINATOR_TASK_QUEUE_H_

#include <cstdint>
#include <deque>
#include <map>
#include <vector>

#include "services/base/status.h"
#include "services/coordinator/membership.h"
#include "services/learn/epoch_order.h"

namespace gaptrain {

struct DataTask {
  uint64_t id = 0;  // 0: no task
  uint32_t epoch = 0;
  uint32_t index = 0;  // within the epoch
  SampleRange range;   // positions of the epoch's permutation
};

class TaskQueue {
 public:
  enum class State { kQueued, kInFlight, kDone };

  // Epoch `epoch` over positions [0, samples), every task queued in order.
  // samples_per_task > 0.
  TaskQueue(uint32_t epoch, uint32_t samples, uint32_t samples_per_task, uint64_t id_base);

  uint32_t epoch() const { return epoch_; }
  uint32_t samples() const { return samples_; }
  uint32_t num_tasks() const { return static_cast<uint32_t>(state_.size()); }

  DataTask Task(uint32_t index) const;
  // The index of `task_id` in this epoch; false when it is none of its tasks.
  bool IndexOf(uint64_t task_id, uint32_t* index) const;
  State state(uint32_t index) const { return state_[index]; }
  // In flight: the worker holding it. Done: the worker that completed it.
  WorkerId worker(uint32_t index) const { return worker_[index]; }

  // Takes the front of the queue for `worker`; false when nothing is queued.
  bool Assign(WorkerId worker, DataTask* task);
  // In flight -> done, credited to its holder.
  void Complete(uint32_t index);
  // In flight -> the front of the queue.
  void Requeue(uint32_t index);
  // Done -> the front of the queue: a master restore lost its updates.
  void Reopen(uint32_t index);

  uint32_t queued() const { return static_cast<uint32_t>(queue_.size()); }
  uint32_t in_flight() const { return num_tasks() - queued() - done_; }
  uint32_t done() const { return done_; }
  bool all_done() const { return done_ == num_tasks(); }
  // Positions covered by completed tasks.
  uint64_t samples_done() const { return samples_done_; }

  // Queued indices, front first.
  std::vector<uint32_t> QueuedIndices() const { return {queue_.begin(), queue_.end()}; }

  // Restart: replaces every task's state. Each index must appear exactly
  // once among `queued` (front first), `in_flight` and `done` (index ->
  // worker); DATA_LOSS otherwise, and nothing changes.
  Status Restore(const std::vector<uint32_t>& queued, const std::map<uint32_t, WorkerId>& in_flight,
                 const std::map<uint32_t, WorkerId>& done);

 private:
  uint32_t epoch_;
  uint32_t samples_;
  uint32_t samples_per_task_;
  uint64_t id_base_;
  std::vector<State> state_;
  std::vector<WorkerId> worker_;
  std::deque<uint32_t> queue_;
  uint32_t done_ = 0;
  uint64_t samples_done_ = 0;
};

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_COORDINATOR_TASK_QUEUE_H_
