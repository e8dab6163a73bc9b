#include "services/coordinator/retrain_queue.h"

#include <algorithm>
#include <cassert>
#include <set>

namespace gaptrain {

bool RetrainQueue::Add(const DataTask& task) {
  DataTask existing;
  if (Find(task.id, &existing)) return false;
  queue_.push_back(task);
  return true;
}

bool RetrainQueue::Assign(WorkerId worker, DataTask* task) {
  if (queue_.empty()) return false;
  *task = queue_.front();
  queue_.pop_front();
  held_[task->id] = {*task, worker};
  return true;
}

bool RetrainQueue::Find(uint64_t task_id, DataTask* task) const {
  if (auto it = held_.find(task_id); it != held_.end()) {
    *task = it->second.first;
    return true;
  }
  auto it = std::find_if(queue_.begin(), queue_.end(),
                         [&](const DataTask& t) { return t.id == task_id; });
  if (it == queue_.end()) return false;
  *task = *it;
  return true;
}

WorkerId RetrainQueue::Holder(uint64_t task_id) const {
  auto it = held_.find(task_id);
  return it == held_.end() ? 0 : it->second.second;
}

void RetrainQueue::Complete(uint64_t task_id) {
  assert(held_.count(task_id) == 1);
  held_.erase(task_id);
}

void RetrainQueue::Requeue(uint64_t task_id) {
  auto it = held_.find(task_id);
  assert(it != held_.end());
  queue_.push_front(it->second.first);
  held_.erase(it);
}

std::vector<std::pair<DataTask, WorkerId>> RetrainQueue::Entries() const {
  std::vector<std::pair<DataTask, WorkerId>> entries;
  for (const DataTask& t : queue_) entries.emplace_back(t, 0);
  for (const auto& [id, held] : held_) entries.push_back(held);
  return entries;
}

bool RetrainQueue::Restore(const std::vector<std::pair<DataTask, WorkerId>>& entries) {
  std::set<uint64_t> ids;
  for (const auto& [task, holder] : entries) {
    if (!ids.insert(task.id).second) return false;
  }
  queue_.clear();
  held_.clear();
  for (const auto& [task, holder] : entries) {
    if (holder == 0) {
      queue_.push_back(task);
    } else {
      held_[task.id] = {task, holder};
    }
  }
  return true;
}

}  // namespace gaptrain
