#include "services/coordinator/unconfirmed_tasks.h"

#include <algorithm>
#include <utility>

namespace gaptrain {

const ShardRun& UnconfirmedTasks::Shard(uint32_t shard) const {
  static const ShardRun kNoneHeardOf;
  const auto it = shards_.find(shard);
  return it == shards_.end() ? kNoneHeardOf : it->second;
}

UnconfirmedTasks::Fate UnconfirmedTasks::JudgePosition(const MasterPosition& p) const {
  if (p.incarnation == 0) return Fate::kDurable;
  const ShardRun& shard = Shard(p.shard);
  const MasterRun& master = shard.run;
  if (p.incarnation == master.id) {
    return p.version <= shard.durable_version ? Fate::kDurable : Fate::kPending;
  }
  if (p.incarnation > master.id) return Fate::kPending;  // a run we have not heard of yet
  if (p.incarnation == master.restored_from_id && p.version <= master.restored_from_version) {
    return Fate::kDurable;
  }
  return Fate::kLost;
}

UnconfirmedTasks::Fate UnconfirmedTasks::Judge(const std::vector<MasterPosition>& reached) const {
  Fate fate = Fate::kDurable;
  for (const MasterPosition& p : reached) {
    const Fate f = JudgePosition(p);
    if (f == Fate::kLost) return Fate::kLost;
    if (f == Fate::kPending) fate = Fate::kPending;
  }
  return fate;
}

void UnconfirmedTasks::Add(uint64_t task_id, std::vector<MasterPosition> reached) {
  DropDurable(&reached);
  tasks_[task_id] = std::move(reached);
}

void UnconfirmedTasks::DropDurable(std::vector<MasterPosition>* reached) const {
  reached->erase(std::remove_if(reached->begin(), reached->end(),
                                [this](const MasterPosition& p) {
                                  return JudgePosition(p) == Fate::kDurable;
                                }),
                 reached->end());
}

UnconfirmedTasks::Observation UnconfirmedTasks::Observe(uint32_t shard, const MasterRun& run,
                                                        uint64_t durable_version) {
  Observation o;
  if (run.id == 0 || run.id < master(shard).id) return o;  // an old master, or a late answer
  ShardRun& known = shards_[shard];
  if (run.id > known.run.id) {
    o.new_run = true;
    o.changed = true;
    known.run = run;
    known.durable_version = durable_version;
  } else if (durable_version > known.durable_version) {
    known.durable_version = durable_version;
    o.changed = true;
  }
  for (auto it = tasks_.begin(); it != tasks_.end();) {
    const Fate fate = Judge(it->second);
    if (fate == Fate::kPending) {
      const size_t before = it->second.size();
      DropDurable(&it->second);
      o.changed |= it->second.size() != before;
      ++it;
      continue;
    }
    if (fate == Fate::kLost) {
      o.lost.push_back(it->first);
    } else {
      ++o.durable;
    }
    it = tasks_.erase(it);
    o.changed = true;
  }
  return o;
}

void UnconfirmedTasks::Restore(std::map<uint32_t, ShardRun> shards,
                               std::map<uint64_t, std::vector<MasterPosition>> tasks) {
  shards_ = std::move(shards);
  tasks_ = std::move(tasks);
}

}  // namespace gaptrain
