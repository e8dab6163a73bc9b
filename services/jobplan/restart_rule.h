// RestartRule: what happens after one of a job's processes ends without
// being asked to, decided once for both executors: `gaptrain run` (local
// processes) and the operator (pods). The same manifest must behave the
// same on a laptop and on a cluster, so neither executor keeps its own
// reading of spec.workers.restartPolicy or spec.runPolicy.backoffLimit.

#ifndef GAPTRAIN_SERVICES_JOBPLAN_RESTART_RULE_H_
#define GAPTRAIN_SERVICES_JOBPLAN_RESTART_RULE_H_

#include <cstdint>
#include <optional>
#include <string>

namespace gaptrain {

// The processes of a job, as both executors name them.
enum class JobProcess { kMaster, kCoordinator, kEvaluator, kTrainer };

// How a process ended, as far as its executor can tell.
struct ProcessEnd {
  JobProcess process = JobProcess::kTrainer;
  // Taken away rather than failed: a spot reclaim, an eviction, a drain,
  // a SIGTERM the job's own chaos sent. Never counts as a failure.
  bool preempted = false;
  // The container's (or process's) exit code, 128 + N when signal N killed
  // it, as the kubelet reports it; nullopt when unknown.
  std::optional<int64_t> exit_code;
};

struct RestartDecision {
  bool counts_as_failure = false;  // toward runPolicy.backoffLimit
  bool replace = false;            // start it again (from its checkpoint or task)
  // When it is not replaced: why, for the job's events and log, e.g.
  // "restartPolicy Never".
  std::string not_replaced_because;
};

// The contract (docs/trainingjob.md, spec.workers.restartPolicy and
// spec.runPolicy.backoffLimit):
// - a preempted process is replaced and is no failure;
// - the master and the coordinator are always replaced (their state is on
//   their volumes); each such end counts as a failure;
// - a failed trainer or evaluator counts as a failure and is replaced
//   unless restartPolicy is Never, or ExitCode and its exit code is 1-127
//   (the program gave up: permanent). 128-255 (killed by a signal) and an
//   unknown code are retryable. Always and OnFailure replace it.
// `restart_policy` is one of the parser's choices; anything else reads as
// OnFailure, the default.
RestartDecision DecideRestart(const ProcessEnd& end, const std::string& restart_policy);

// What bounds a job's losses: runPolicy.backoffLimit, and the trainers
// it needs (minReplicas, or replicas when that is 0).
struct RestartLimits {
  uint64_t backoff_limit = 0;
  uint64_t replicas = 0;
  uint64_t min_trainers = 0;
  std::string restart_policy;  // for the message
};

// Why a job fails because of its losses, as both executors report it.
struct LossFailure {
  std::string reason;   // BackoffLimitExceeded | TrainingJobFailed
  std::string message;  // "5 failures exceed backoffLimit (4)", ...
};

// The job fails when its genuine failures exceed backoffLimit, or when
// the trainers that failed permanently (not replaced) leave fewer than
// `min_trainers` able to run; nullopt while it goes on.
std::optional<LossFailure> FailureAfterLosses(uint64_t failures,
                                              uint64_t permanently_failed_trainers,
                                              const RestartLimits& limits);

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_JOBPLAN_RESTART_RULE_H_
