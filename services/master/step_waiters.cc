#include "services/master/step_waiters.h"

#include <vector>

namespace gaptrain {

uint64_t StepWaiters::Add(uint64_t version, Resume resume) {
  std::lock_guard<std::mutex> lock(mu_);
  const uint64_t id = next_id_++;
  waiters_.emplace(id, std::make_pair(version, std::move(resume)));
  held_.store(waiters_.size(), std::memory_order_release);
  return id;
}

bool StepWaiters::Remove(uint64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  const bool erased = waiters_.erase(id) > 0;
  held_.store(waiters_.size(), std::memory_order_release);
  return erased;
}

void StepWaiters::Release(uint64_t version) {
  std::vector<Resume> due;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = waiters_.begin(); it != waiters_.end();) {
      if (it->second.first < version) {
        due.push_back(std::move(it->second.second));
        it = waiters_.erase(it);
      } else {
        ++it;
      }
    }
    held_.store(waiters_.size(), std::memory_order_release);
  }
  for (Resume& resume : due) resume();
}

size_t StepWaiters::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return waiters_.size();
}

}  // namespace gaptrain
