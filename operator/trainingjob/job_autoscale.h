// PlanAutoscale: the reconcile's part of Gap-aware autoscaling
// (spec.workers.autoscale; docs/operator.md, "Autoscaling"). The policy is
// services/autoscale's DecideTrainers, shared with the simulator and
// `gaptrain run`; this measures its window from what a reconcile observes
// and keeps what it must remember in the job's status.autoscale, so a new
// leader or a restarted operator decides as the old one would have. Pure:
// no clock, no I/O, the same observation gives the same plan.
//
// status.autoscale (the CRD's schema; docs/trainingjob.md):
//   window        where the current measurement began: startTime (the time
//                 the master was read, to the microsecond), the master's
//                 totals since it started as its /metrics gave them then
//                 (modelVersion, gapSum, gapCount) and status.preemptions;
//                 and fewestTrainers, the fewest running at any reconcile
//                 since (DecideTrainers' `running`, as `gaptrain run`'s
//                 LocalAutoscaler counts it);
//   grownFrom, rateBefore, unprofitable
//                 DecideTrainers' AutoscaleMemory;
//   lastDecision  time, reason (ScaledUp | ScaledDown | Holding),
//                 fromReplicas, replicas, message, and observedGeneration:
//                 the job's metadata.generation it was decided at.
//
// What callers may rely on:
//   - Decisions are made only while the job is Running with autoscale
//     enabled, at most one per intervalSeconds: once that long has passed
//     between the window's start and the master's read now. Without a read
//     now (the master unreachable, not running) there is no decision, and
//     no window begins. A decision begins the next window.
//   - Totals below the window's (the master restarted), a read older than
//     the window's start, or a window that does not read begin a new
//     window, without a decision.
//   - A growth or a shrink sets `scale_to`, `reason` and `message`: the
//     caller writes the new status first (which records the decision and
//     the new window), then spec.workers.replicas through the scale
//     subresource. A hold changes only lastDecision and the window.
//   - A growth or a shrink recorded but not carried out (the scale write
//     failed after the status write) comes back as `scale_to` while the
//     spec is still the one it was decided at (metadata.generation) and
//     spec.workers.replicas differs from it; once the spec changed (by the
//     scale itself, or by a user, who wins) it is done. No decision is made
//     while one waits.
//   - A job not Running (Pending, Restarting, Suspended, finished) keeps
//     the memory and lastDecision and drops the window: a new one begins
//     when it runs again. With autoscale disabled only lastDecision stays.
//   - next_check: how long until a decision may be due (the window's end,
//     or intervalSeconds when no window could begin); unset when none can be.

#ifndef GAPTRAIN_OPERATOR_TRAININGJOB_JOB_AUTOSCALE_H_
#define GAPTRAIN_OPERATOR_TRAININGJOB_JOB_AUTOSCALE_H_

#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "operator/trainingjob/observed_job.h"
#include "services/api/training_job.h"

namespace gaptrain {
namespace trainingjob {

struct AutoscaleObservation {
  WorkersSpec workers;       // spec.workers as parsed (valid)
  bool job_running = false;  // the job's phase after this reconcile is Running
  int64_t generation = 0;    // metadata.generation
  // status.autoscale as observed.
  nlohmann::json status = nlohmann::json::object();
  // The master's totals as read now; absent: not read.
  std::optional<MasterScrape> master;
  uint32_t running_trainers = 0;  // wanted trainers running, ready and not lost
  uint64_t preemptions = 0;       // status.preemptions as this reconcile counts them
  std::chrono::system_clock::time_point now;
};

struct AutoscalePlan {
  // The new status.autoscale; {}: none.
  nlohmann::json status = nlohmann::json::object();
  std::optional<uint32_t> scale_to;  // trainers to write to spec.workers.replicas
  std::string reason;                // with scale_to: "ScaledUp" | "ScaledDown"
  std::string message;               // with scale_to: the policy's sentence
  std::optional<std::chrono::system_clock::duration> next_check;
};

AutoscalePlan PlanAutoscale(const AutoscaleObservation& observed);

}  // namespace trainingjob
}  // namespace gaptrain

#endif  // GAPTRAIN_OPERATOR_TRAININGJOB_JOB_AUTOSCALE_H_
