#include "services/coordinator/task_queue.h"

#include <algorithm>
#include <cassert>
#include <string>

namespace gaptrain {

TaskQueue::TaskQueue(uint32_t epoch, uint32_t samples, uint32_t samples_per_task,
                     uint64_t id_base)
    : epoch_(epoch), samples_(samples), samples_per_task_(samples_per_task), id_base_(id_base) {
  assert(samples_per_task > 0);
  const uint32_t n = static_cast<uint32_t>((static_cast<uint64_t>(samples) + samples_per_task - 1) /
                                           samples_per_task);
  state_.assign(n, State::kQueued);
  worker_.assign(n, 0);
  for (uint32_t i = 0; i < n; ++i) queue_.push_back(i);
}

DataTask TaskQueue::Task(uint32_t index) const {
  DataTask task;
  task.id = id_base_ + index + 1;
  task.epoch = epoch_;
  task.index = index;
  const uint64_t begin = static_cast<uint64_t>(index) * samples_per_task_;
  task.range.begin = static_cast<uint32_t>(begin);
  task.range.end = static_cast<uint32_t>(std::min<uint64_t>(begin + samples_per_task_, samples_));
  return task;
}

bool TaskQueue::IndexOf(uint64_t task_id, uint32_t* index) const {
  if (task_id <= id_base_ || task_id - id_base_ > num_tasks()) return false;
  *index = static_cast<uint32_t>(task_id - id_base_ - 1);
  return true;
}

bool TaskQueue::Assign(WorkerId worker, DataTask* task) {
  if (queue_.empty()) return false;
  const uint32_t index = queue_.front();
  queue_.pop_front();
  state_[index] = State::kInFlight;
  worker_[index] = worker;
  *task = Task(index);
  return true;
}

void TaskQueue::Complete(uint32_t index) {
  assert(state_[index] == State::kInFlight);
  state_[index] = State::kDone;
  ++done_;
  samples_done_ += Task(index).range.size();
}

void TaskQueue::Requeue(uint32_t index) {
  assert(state_[index] == State::kInFlight);
  state_[index] = State::kQueued;
  worker_[index] = 0;
  queue_.push_front(index);
}

void TaskQueue::Reopen(uint32_t index) {
  assert(state_[index] == State::kDone);
  state_[index] = State::kQueued;
  worker_[index] = 0;
  --done_;
  samples_done_ -= Task(index).range.size();
  queue_.push_front(index);
}

Status TaskQueue::Restore(const std::vector<uint32_t>& queued,
                          const std::map<uint32_t, WorkerId>& in_flight,
                          const std::map<uint32_t, WorkerId>& done) {
  const uint32_t n = num_tasks();
  std::vector<int> seen(n, 0);
  auto mark = [&](uint32_t index, const char* where) -> Status {
    if (index >= n) {
      return Status::DataLoss(std::string(where) + " task index " + std::to_string(index) +
                              " is beyond epoch " + std::to_string(epoch_) + "'s " +
                              std::to_string(n) + " tasks");
    }
    if (seen[index]++) {
      return Status::DataLoss("task index " + std::to_string(index) + " of epoch " +
                              std::to_string(epoch_) + " is in more than one place");
    }
    return Status::OK();
  };
  for (uint32_t i : queued) GAPTRAIN_RETURN_IF_ERROR(mark(i, "queued"));
  for (const auto& [i, w] : in_flight) GAPTRAIN_RETURN_IF_ERROR(mark(i, "in-flight"));
  for (const auto& [i, w] : done) GAPTRAIN_RETURN_IF_ERROR(mark(i, "done"));
  for (uint32_t i = 0; i < n; ++i) {
    if (!seen[i]) {
      return Status::DataLoss("task index " + std::to_string(i) + " of epoch " +
                              std::to_string(epoch_) + " is neither queued, in flight nor done");
    }
  }
  queue_.assign(queued.begin(), queued.end());
  state_.assign(n, State::kQueued);
  worker_.assign(n, 0);
  done_ = 0;
  samples_done_ = 0;
  for (const auto& [i, w] : in_flight) {
    state_[i] = State::kInFlight;
    worker_[i] = w;
  }
  for (const auto& [i, w] : done) {
    state_[i] = State::kDone;
    worker_[i] = w;
    ++done_;
    samples_done_ += Task(i).range.size();
  }
  return Status::OK();
}

}  // namespace gaptrain
