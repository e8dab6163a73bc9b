#include "services/jobplan/restart_rule.h"

namespace gaptrain {

RestartDecision DecideRestart(const ProcessEnd& end, const std::string& restart_policy) {
  RestartDecision d;
  if (end.preempted) {
    d.replace = true;
    return d;
  }
  d.counts_as_failure = true;
  if (end.process == JobProcess::kMaster || end.process == JobProcess::kCoordinator) {
    d.replace = true;
    return d;
  }
  if (restart_policy == "Never") {
    d.not_replaced_because = "restartPolicy Never";
    return d;
  }
  if (restart_policy == "ExitCode" && end.exit_code && *end.exit_code >= 1 &&
      *end.exit_code <= 127) {
    d.not_replaced_because = "exit code " + std::to_string(*end.exit_code) +
                             " is permanent under restartPolicy ExitCode (1-127)";
    return d;
  }
  d.replace = true;
  return d;
}

std::optional<LossFailure> FailureAfterLosses(uint64_t failures,
                                              uint64_t permanently_failed_trainers,
                                              const RestartLimits& limits) {
  if (failures > limits.backoff_limit) {
    return LossFailure{"BackoffLimitExceeded", std::to_string(failures) +
                                                   " failures exceed backoffLimit (" +
                                                   std::to_string(limits.backoff_limit) + ")"};
  }
  if (limits.replicas < permanently_failed_trainers + limits.min_trainers) {
    return LossFailure{"TrainingJobFailed",
                       std::to_string(permanently_failed_trainers) +
                           " trainers failed permanently (restartPolicy " +
                           limits.restart_policy + "): fewer than minReplicas (" +
                           std::to_string(limits.min_trainers) + ") can run"};
  }
  return std::nullopt;
}

}  // namespace gaptrain
