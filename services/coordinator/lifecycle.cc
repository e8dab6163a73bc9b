#include "services/coordinator/lifecycle.h"

namespace gaptrain {

const char* JobPhaseName(JobPhase phase) {
  switch (phase) {
    case JobPhase::kPending: return "Pending";
    case JobPhase::kRunning: return "Running";
    case JobPhase::kSucceeded: return "Succeeded";
    case JobPhase::kFailed: return "Failed";
  }
  return "Pending";
}

Lifecycle::Lifecycle(double now) {
  conditions_.push_back({"Pending", "True", "Created", "waiting for workers", now});
}

const JobCondition& Lifecycle::current() const {
  const std::string type = JobPhaseName(phase_);
  for (const JobCondition& c : conditions_) {
    if (c.type == type) return c;
  }
  return conditions_.front();  // unreachable: MoveTo and Restore keep one
}

bool Lifecycle::MoveTo(JobPhase to, const std::string& reason, const std::string& message,
                       double now) {
  if (finished() || to == phase_) return false;
  const std::string type = JobPhaseName(to);
  JobCondition* target = nullptr;
  for (JobCondition& c : conditions_) {
    if (c.type == type) {
      target = &c;
    } else if (c.status == "True") {
      c.status = "False";
      c.last_transition_time = now;
    }
  }
  if (target == nullptr) {
    conditions_.push_back({type, "", "", "", 0});
    target = &conditions_.back();
  }
  *target = {type, "True", reason, message, now};
  phase_ = to;
  return true;
}

Status Lifecycle::Restore(JobPhase phase, const std::vector<JobCondition>& conditions) {
  bool found = false;
  for (const JobCondition& c : conditions) {
    found |= c.type == JobPhaseName(phase) && c.status == "True";
  }
  if (!found) {
    return Status::DataLoss(std::string("phase ") + JobPhaseName(phase) +
                            " has no True condition");
  }
  phase_ = phase;
  conditions_ = conditions;
  return Status::OK();
}

}  // namespace gaptrain
