#include "services/coordinator/unconfirmed_tasks.h"

#include <utility>

namespace gaptrain {

UnconfirmedTasks::Fate UnconfirmedTasks::JudgePosition(const MasterPosition& p) const {
  if (p.incarnation == 0) return Fate::kDurable;
  if (p.incarnation == master_.id) {
    return p.version <= durable_version_ ? Fate::kDurable : Fate::kPending;
  }
  if (p.incarnation > master_.id) return Fate::kPending;  // a run we have not heard of yet
  if (p.incarnation == master_.restored_from_id && p.version <= master_.restored_from_version) {
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
  tasks_[task_id] = std::move(reached);
}

UnconfirmedTasks::Observation UnconfirmedTasks::Observe(const MasterRun& run,
                                                        uint64_t durable_version) {
  Observation o;
  if (run.id == 0 || run.id < master_.id) return o;  // an old master, or a late answer
  if (run.id > master_.id) {
    o.new_run = true;
    o.changed = true;
    master_ = run;
    durable_version_ = durable_version;
  } else if (durable_version > durable_version_) {
    durable_version_ = durable_version;
    o.changed = true;
  }
  for (auto it = tasks_.begin(); it != tasks_.end();) {
    const Fate fate = Judge(it->second);
    if (fate == Fate::kPending) {
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

void UnconfirmedTasks::Restore(const MasterRun& master, uint64_t durable_version,
                               std::map<uint64_t, std::vector<MasterPosition>> tasks) {
  master_ = master;
  durable_version_ = durable_version;
  tasks_ = std::move(tasks);
}

}  // namespace gaptrain
