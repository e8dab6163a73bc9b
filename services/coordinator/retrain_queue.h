// RetrainQueue: tasks of earlier epochs to train again because a master
// restore lost their updates, and who is training them. The current
// epoch's lost tasks go back to its TaskQueue instead; these are the ones
// whose epoch has already advanced. A task keeps its id, epoch and range,
// so a worker trains it with that epoch's sample order.
//
// Lost tasks join the back of the queue; a task taken back from a
// departed worker returns to the front (as in TaskQueue). Pure
// bookkeeping: no clock, no I/O, not thread-safe. Operations on a task in
// the wrong state are bugs and abort (assert).

#ifndef GAPTRAIN_SERVICES_COORDINATOR_RETRAIN_QUEUE_H_
#define GAPTRAIN_SERVICES_COORDINATOR_RETRAIN_QUEUE_H_

#include <cstdint>
#include <deque>
#include <map>
#include <utility>
#include <vector>

#include "services/coordinator/membership.h"
#include "services/coordinator/task_queue.h"

namespace gaptrain {

class RetrainQueue {
 public:
  // Queues `task` at the back; false when it is already queued or held.
  bool Add(const DataTask& task);

  // Takes the front for `worker`; false when nothing is queued.
  bool Assign(WorkerId worker, DataTask* task);
  // The queued or held task with this id.
  bool Find(uint64_t task_id, DataTask* task) const;
  // The worker holding `task_id`, 0 when it is queued or unknown.
  WorkerId Holder(uint64_t task_id) const;
  // Held -> gone (trained again).
  void Complete(uint64_t task_id);
  // Held -> the front of the queue.
  void Requeue(uint64_t task_id);

  uint32_t queued() const { return static_cast<uint32_t>(queue_.size()); }
  uint32_t in_flight() const { return static_cast<uint32_t>(held_.size()); }
  bool empty() const { return queue_.empty() && held_.empty(); }

  // Queued tasks front first with holder 0, then held tasks with their
  // holders: what a restart needs.
  std::vector<std::pair<DataTask, WorkerId>> Entries() const;
  // Replaces the contents with Entries() as saved; false if a task id
  // appears twice (nothing changes then).
  bool Restore(const std::vector<std::pair<DataTask, WorkerId>>& entries);

 private:
  std::deque<DataTask> queue_;
  std::map<uint64_t, std::pair<DataTask, WorkerId>> held_;  // task id -> (task, holder)
};

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_COORDINATOR_RETRAIN_QUEUE_H_
