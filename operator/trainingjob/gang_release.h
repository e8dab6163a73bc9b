// DecideGangRelease: what a job does with the trainers it holds while it
// waits for minReplicas of them to be ready (spec.runPolicy
// .scheduleTimeoutSeconds). Two jobs that each hold part of a pool (GPUs
// on spot nodes) and wait for the rest can wait for ever; a job that has
// waited `timeout` gives its trainers' pods back, makes none for a backoff
// (as long again, stretched by up to half by a fraction of its own, so
// two jobs released together do not come back together), then makes them
// all again and waits anew. Without a timeout (0) it waits as it always
// did. Kueue's gang admission is the other answer (docs/operator.md).
//
// A pure function of the job's state and the time: the operator keeps
// the state in status.gang and acts on the decision.

#ifndef GAPTRAIN_OPERATOR_TRAININGJOB_GANG_RELEASE_H_
#define GAPTRAIN_OPERATOR_TRAININGJOB_GANG_RELEASE_H_

#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace gaptrain {
namespace trainingjob {

// status.gang: absent while the job never waited.
struct GangStatus {
  std::optional<std::chrono::system_clock::time_point> waiting_since;  // unset: not waiting
  std::optional<std::chrono::system_clock::time_point> released_at;    // the last release
  uint32_t releases = 0;

  static GangStatus FromJson(const nlohmann::json& status_gang);
  nlohmann::json ToJson() const;  // {} when there is nothing to say
};

struct GangDecision {
  GangStatus status;            // the new status.gang
  bool release = false;         // delete the trainers' pods now
  bool hold_trainers = false;   // create no trainer pod now (released, backing off)
  // When to look again: the timeout's or the backoff's end.
  std::optional<std::chrono::system_clock::duration> wake_after;
  std::chrono::seconds backoff{0};  // after this release
};

// `waiting`: fewer than minReplicas trainers ready while the job is
// neither finished nor suspended; `holding`: trainers' pods exist that the
// scheduler placed (what a release gives back); `jitter` in [0, 1): the
// job's own fraction (from its uid).
GangDecision DecideGangRelease(uint64_t timeout_seconds, std::chrono::system_clock::time_point now,
                               bool waiting, bool holding, double jitter, const GangStatus& old);

// A fraction in [0, 1) of a job's uid, the same on every reconcile.
double JitterOf(const std::string& uid);

}  // namespace trainingjob
}  // namespace gaptrain

#endif  // GAPTRAIN_OPERATOR_TRAININGJOB_GANG_RELEASE_H_
