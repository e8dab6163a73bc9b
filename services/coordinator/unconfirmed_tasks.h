// UnconfirmedTasks: the completed tasks whose updates the masters could
// still lose, and the runs of each master shard the coordinator has heard
// of.
//
// A master that restarts resumes from its newest checkpoint at version V
// and loses every update it had applied after V. With θ sharded over S
// masters (spec.master.shards) each shard is such a master, with runs,
// versions and checkpoints of its own. A task's gradients went into the
// masters as pushes, each applied by one run of one shard (its
// incarnation id) at one version; a worker completing a task reports, per
// shard and run, the newest version its pushes reached (MasterPosition).
// A position is judged against its own shard's runs only:
//   - durable once a checkpoint holds it: the run that applied it wrote a
//     checkpoint at a version >= it (the master reports its
//     durable_version), or a later run of that shard resumed from a
//     checkpoint of that run at a version >= it;
//   - lost when a run of that shard resumed from an older point: a newer
//     run that restored another run's checkpoint, or this run's at a lower
//     version, or started fresh;
//   - pending otherwise (the current run, not yet checkpointed; or a run
//     newer than any the coordinator has heard of, on a shard it may not
//     have heard of at all).
// A task is durable when all its positions are, lost when any is. A
// position once durable stays so (every later run of its shard resumes
// from a checkpoint at least that new), so it is forgotten then: a task
// waiting for another shard's checkpoint is not judged lost when this
// shard later resumes a run after the one that held it. A shard that lost
// its part of a task's gradients has the whole task trained again, and
// the other shards then apply their parts twice (the accepted cost, as
// when one master loses a task a worker had half pushed).
//
// What callers may rely on:
//   - Run ids grow with every start of a shard's master, so an answer from
//     an older run of that shard than the newest one seen is ignored. Runs
//     of different shards are numbered independently.
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
  uint32_t shard = 0;        // whose run: the master shard's index
};

// One run of the master: MasterIncarnation in proto/gaptrain.proto.
struct MasterRun {
  uint64_t id = 0;                     // 0: none heard of yet
  uint64_t restored_from_id = 0;       // whose checkpoint it resumed; 0: none
  uint64_t restored_from_version = 0;  // that checkpoint's version
};

// A shard's newest run heard of, and the version its checkpoint holds.
struct ShardRun {
  MasterRun run;
  uint64_t durable_version = 0;
};

class UnconfirmedTasks {
 public:
  enum class Fate { kDurable, kPending, kLost };

  // The fate of positions under the newest run seen.
  Fate Judge(const std::vector<MasterPosition>& reached) const;

  // A completed task whose fate is pending (its durable positions are
  // dropped). A task id already held is replaced.
  void Add(uint64_t task_id, std::vector<MasterPosition> reached);

  struct Observation {
    bool new_run = false;           // a run newer than the last one seen
    bool changed = false;           // anything to persist
    std::vector<uint64_t> lost;     // task ids, ascending; removed
    size_t durable = 0;             // tasks removed as durable
  };
  // Master shard `shard` answered: it is `run`, with `durable_version` on
  // disk. Only that shard's positions can change their fate.
  Observation Observe(uint32_t shard, const MasterRun& run, uint64_t durable_version);
  // One master: shard 0.
  Observation Observe(const MasterRun& run, uint64_t durable_version) {
    return Observe(0, run, durable_version);
  }

  // Shard `shard`'s newest run heard of (id 0: none) and its checkpoint.
  const MasterRun& master(uint32_t shard = 0) const { return Shard(shard).run; }
  uint64_t durable_version(uint32_t shard = 0) const { return Shard(shard).durable_version; }
  // Every shard heard of (or restored), by index.
  const std::map<uint32_t, ShardRun>& shards() const { return shards_; }
  size_t size() const { return tasks_.size(); }
  const std::map<uint64_t, std::vector<MasterPosition>>& tasks() const { return tasks_; }

  // A restart: what Save wrote (tasks(), shards()).
  void Restore(std::map<uint32_t, ShardRun> shards,
               std::map<uint64_t, std::vector<MasterPosition>> tasks);

 private:
  const ShardRun& Shard(uint32_t shard) const;
  Fate JudgePosition(const MasterPosition& p) const;
  // Removes the positions a checkpoint holds.
  void DropDurable(std::vector<MasterPosition>* reached) const;

  std::map<uint32_t, ShardRun> shards_;                    // shard index -> newest run
  std::map<uint64_t, std::vector<MasterPosition>> tasks_;  // task id -> positions
};

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_COORDINATOR_UNCONFIRMED_TASKS_H_
