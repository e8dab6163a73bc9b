// Lifecycle: the job's phase and its Kubernetes-style conditions.
//
//   Pending -> Running      enough trainers are live (minReplicas)
//   Running -> Pending      too few are live; in-flight tasks stay held
//   any     -> Succeeded    epochs done, maxUpdates reached, or the
//                           evaluator reported targetAccuracy
//   any     -> Failed       no live worker, master unreachable, deadline
//
// Succeeded and Failed are terminal: nothing moves the job out of them.
// Each transition carries a CamelCase reason and a message for people.
// There is one condition per phase the job has been in; the current
// phase's is "True", the others "False", each with the time it last
// changed. Pure: times are given by the caller.

#ifndef GAPTRAIN_SERVICES_COORDINATOR_LIFECYCLE_H_
#define GAPTRAIN_SERVICES_COORDINATOR_LIFECYCLE_H_

#include <string>
#include <vector>

#include "services/base/status.h"

namespace gaptrain {

enum class JobPhase { kPending, kRunning, kSucceeded, kFailed };

// "Pending" | "Running" | "Succeeded" | "Failed"
const char* JobPhaseName(JobPhase phase);

struct JobCondition {
  std::string type;    // a JobPhaseName
  std::string status;  // "True" | "False"
  std::string reason;
  std::string message;
  double last_transition_time = 0;
};

class Lifecycle {
 public:
  // Pending since `now`, reason "Created".
  explicit Lifecycle(double now);

  JobPhase phase() const { return phase_; }
  bool finished() const { return phase_ == JobPhase::kSucceeded || phase_ == JobPhase::kFailed; }
  // The current phase's condition.
  const JobCondition& current() const;
  const std::vector<JobCondition>& conditions() const { return conditions_; }

  // Moves to `to`; false and no change when the job is already there or
  // finished.
  bool MoveTo(JobPhase to, const std::string& reason, const std::string& message, double now);

  // Restart: the phase and conditions saved before. DATA_LOSS when the
  // phase has no "True" condition.
  Status Restore(JobPhase phase, const std::vector<JobCondition>& conditions);

 private:
  JobPhase phase_ = JobPhase::kPending;
  std::vector<JobCondition> conditions_;
};

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_COORDINATOR_LIFECYCLE_H_
