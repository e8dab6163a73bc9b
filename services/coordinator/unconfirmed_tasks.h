// UnconfirmedTasks: the completed tasks whose updates the master could
// still lose, and the master runs the coordinator has heard of.
//
// A master that restarts resumes from its newest checkpoint at version V
// and loses every update it had applied after V. A task's gradients went
// into the master as pushes, each applied by one master run (its
// incarnation id) at one version; a worker completing a task reports, per
// run, the newest version its pushes reached (MasterPosition). A position
// is
//   - durable once a checkpoint holds it: the run that applied it wrote a
//     checkpoint at a version >= it (the master reports its
//     durable_version), or a later run resumed from a checkpoint of that
//     run at a version >= it;
//   - lost when a run resumed from an older point: a newer run that
//     restored another run's checkpoint, or this run's at a lower version,
//     or started fresh;
//   - pending otherwise (the current run, not yet checkpointed; or a run
//     newer than any the coordinator has heard of).
// A task is durable when all its positions are, lost when any is.
//
// What callers may rely on:
//   - Run ids grow with every start of the job's master, so an answer from
//     an older run than the newest one seen is ignored.
//   - Judge() and Observe() apply the rules above against the newest run
//     seen. Observe() removes the tasks it finds lost (the caller trains
//     them again) and those it finds durable.
//   - Positions of run 0 (a worker or master that predates incarnations)
//     count as durable: the old behaviour.
//   - A run that was never heard of between two others (it started, wrote
//     a checkpoint and died between two calls of the membership feed) makes
//     its predecessors' positions look lost when its successor resumes from
//     its checkpoint: such tasks are trained twice, never lost.
//   - Pure bookkeeping: no clock, no I/O, not thread-safe.

#ifndef GAPTRAIN_SERVICES_COORDINATOR_UNCONFIRMED_TASKS_H_
#define GAPTRAIN_SERVICES_COORDINATOR_UNCONFIRMED_TASKS_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <vector>

namespace gaptrain {

// Where a task's pushes landed in one master run.
struct MasterPosition {
  uint64_t incarnation = 0;  // the run's id; 0: unknown
  uint64_t version = 0;      // the newest version the task's pushes reached
};

// One run of the master: MasterIncarnation in proto/gaptrain.proto.
struct MasterRun {
  uint64_t id = 0;                     // 0: none heard of yet
  uint64_t restored_from_id = 0;       // whose checkpoint it resumed; 0: none
  uint64_t restored_from_version = 0;  // that checkpoint's version
};

class UnconfirmedTasks {
 public:
  enum class Fate { kDurable, kPending, kLost };

  // The fate of positions under the newest run seen.
  Fate Judge(const std::vector<MasterPosition>& reached) const;

  // A completed task whose fate is pending. A task id already held is
  // replaced.
  void Add(uint64_t task_id, std::vector<MasterPosition> reached);

  struct Observation {
    bool new_run = false;           // a run newer than the last one seen
    bool changed = false;           // anything to persist
    std::vector<uint64_t> lost;     // task ids, ascending; removed
    size_t durable = 0;             // tasks removed as durable
  };
  // The master answered: it is `run`, with `durable_version` on disk.
  Observation Observe(const MasterRun& run, uint64_t durable_version);

  const MasterRun& master() const { return master_; }
  uint64_t durable_version() const { return durable_version_; }
  size_t size() const { return tasks_.size(); }
  const std::map<uint64_t, std::vector<MasterPosition>>& tasks() const { return tasks_; }

  // A restart: what Save wrote (tasks(), master(), durable_version()).
  void Restore(const MasterRun& master, uint64_t durable_version,
               std::map<uint64_t, std::vector<MasterPosition>> tasks);

 private:
  Fate JudgePosition(const MasterPosition& p) const;

  MasterRun master_;
  uint64_t durable_version_ = 0;
  std::map<uint64_t, std::vector<MasterPosition>> tasks_;  // task id -> positions
};

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_COORDINATOR_UNCONFIRMED_TASKS_H_
