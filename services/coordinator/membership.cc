#include "services/coordinator/membership.h"

namespace gaptrain {

const char* WorkerRoleName(WorkerRole role) {
  return role == WorkerRole::kEvaluator ? "evaluator" : "trainer";
}

WorkerRecord* Membership::Add(const std::string& host, WorkerRole role, double now) {
  WorkerRecord record;
  record.id = next_id_++;
  record.host = host;
  record.role = role;
  record.last_seen = now;
  return &(workers_[record.id] = record);
}

Status Membership::Restore(const WorkerRecord& record) {
  if (!WasIssued(record.id)) {
    return Status::DataLoss("worker " + std::to_string(record.id) +
                            " was never issued (next id " + std::to_string(next_id_) + ")");
  }
  if (!workers_.emplace(record.id, record).second) {
    return Status::DataLoss("worker " + std::to_string(record.id) + " appears twice");
  }
  return Status::OK();
}

WorkerRecord* Membership::Find(WorkerId id) {
  auto it = workers_.find(id);
  return it == workers_.end() ? nullptr : &it->second;
}

const WorkerRecord* Membership::Find(WorkerId id) const {
  auto it = workers_.find(id);
  return it == workers_.end() ? nullptr : &it->second;
}

std::vector<WorkerId> Membership::Expired(double now) const {
  std::vector<WorkerId> expired;
  for (const auto& [id, w] : workers_) {
    if (w.last_seen + lease_seconds_ <= now) expired.push_back(id);
  }
  return expired;
}

size_t Membership::live_trainers() const {
  size_t n = 0;
  for (const auto& [id, w] : workers_) n += w.role == WorkerRole::kTrainer;
  return n;
}

WorkerId Membership::evaluator() const {
  for (const auto& [id, w] : workers_) {
    if (w.role == WorkerRole::kEvaluator) return id;
  }
  return 0;
}

std::vector<WorkerId> Membership::Ids(bool include_evaluator, bool include_idle) const {
  std::vector<WorkerId> ids;
  for (const auto& [id, w] : workers_) {
    if (w.role == WorkerRole::kTrainer ? include_idle || !w.idle : include_evaluator) {
      ids.push_back(id);
    }
  }
  return ids;
}

}  // namespace gaptrain
