// Membership: the job's live workers and their leases. A worker is live
// from its registration until it leaves or stays silent for the lease
// (last_seen + lease_seconds <= now). Ids start at 1, are never reused
// (the master keys per-worker state by id), and 0 means "none".
//
// Pure bookkeeping with explicit times: no clock, no I/O, no locking.
// CoordinatorState decides what a departure means for tasks and counters.

#ifndef GAPTRAIN_SERVICES_COORDINATOR_MEMBERSHIP_H_
#define GAPTRAIN_SERVICES_COORDINATOR_MEMBERSHIP_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "services/base/status.h"

namespace gaptrain {

using WorkerId = uint32_t;

enum class WorkerRole { kTrainer, kEvaluator };

// "trainer" | "evaluator"
const char* WorkerRoleName(WorkerRole role);

struct WorkerRecord {
  WorkerId id = 0;
  std::string host;
  WorkerRole role = WorkerRole::kTrainer;
  double last_seen = 0;  // the lease runs until last_seen + lease_seconds

  // The task it holds (0: none) and its last reported progress on it.
  uint64_t task_id = 0;
  uint32_t samples_done = 0;
  bool has_loss = false;
  float loss = 0;

  // The last task it completed: a repeated CompleteTask for it (the reply
  // was lost) succeeds without counting it again.
  uint64_t last_completed_task_id = 0;
  // The last task it handed back (ReleaseTask): a repeated release of it
  // succeeds without moving anything again.
  uint64_t last_released_task_id = 0;

  // It asked for a task and got none; cleared by its next assignment. Not
  // persisted: after a restart it is set again by the next NextTask.
  bool idle = false;
};

class Membership {
 public:
  explicit Membership(double lease_seconds) : lease_seconds_(lease_seconds) {}

  // Adds a live worker under the next id, its lease starting at `now`.
  WorkerRecord* Add(const std::string& host, WorkerRole role, double now);

  // Puts back a worker saved earlier (restart); its id must have been
  // issued (below next_id) and not be live.
  Status Restore(const WorkerRecord& record);

  // The live worker `id`, or null.
  WorkerRecord* Find(WorkerId id);
  const WorkerRecord* Find(WorkerId id) const;

  // Whether `id` was ever handed out (it may have gone since).
  bool WasIssued(WorkerId id) const { return id != 0 && id < next_id_; }

  void Renew(WorkerRecord* worker, double now) { worker->last_seen = now; }
  void Remove(WorkerId id) { workers_.erase(id); }

  // Live workers whose lease has run out at `now`, in id order.
  std::vector<WorkerId> Expired(double now) const;

  size_t live() const { return workers_.size(); }
  size_t live_trainers() const;
  // The live evaluator, or 0.
  WorkerId evaluator() const;

  // Ids of live workers, ascending; the evaluator only when asked, idle
  // trainers (WorkerRecord::idle) only when asked.
  std::vector<WorkerId> Ids(bool include_evaluator, bool include_idle = true) const;

  const std::map<WorkerId, WorkerRecord>& workers() const { return workers_; }
  double lease_seconds() const { return lease_seconds_; }
  WorkerId next_id() const { return next_id_; }
  // Restart only: ids below `next` were issued before.
  void set_next_id(WorkerId next) { next_id_ = next; }

 private:
  const double lease_seconds_;
  WorkerId next_id_ = 1;
  std::map<WorkerId, WorkerRecord> workers_;  // live only
};

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_COORDINATOR_MEMBERSHIP_H_
