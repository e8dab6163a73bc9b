// PodLedger: the TrainingJob's record of the pods the operator has already
// accounted for, so that counting preemptions, failures and restarts is
// idempotent across reconciles, operator restarts and stale caches.
//
// Why an annotation on the job (gaptrain.io/pod-ledger), holding the
// counts *and* the pod uids: the counts and the uids that produced them
// must change in one write, or a crash between two writes loses or
// repeats a count. The status subresource cannot hold the uids (its schema
// is fixed) and a write to it cannot change metadata, so the ledger is the
// source of truth and status.preemptions/failures/restarts copy it. The
// reconcile writes the ledger first, as a merge patch carrying the job's
// resourceVersion: a reconcile working from a stale copy of the job gets
// 409 Conflict and counts nothing.
//
// How a pod is counted exactly once: a pod is counted when it is first
// seen lost (pod_state.h), and its uid goes into `counted` in the same
// write; a pod whose uid is in `counted` is never counted again, whatever
// state it is seen in afterwards. Pods the operator deletes itself (scale
// down, suspend) go into `released`, so that seeing them terminate is not
// taken for a preemption. A uid is dropped (when the ledger is next
// written for another reason) once no observed pod has it; uids are never
// reused, so a dropped uid cannot come back.
//
// Limitation: a pod that disappears without ever being seen lost (force
// deleted with grace 0 between two reconciles, or while the operator was
// down) is recreated but not counted. Pod finalizers, as the Job
// controller uses, would close this; they also make every pod deletion
// wait for the operator.

#ifndef GAPTRAIN_OPERATOR_TRAININGJOB_POD_LEDGER_H_
#define GAPTRAIN_OPERATOR_TRAININGJOB_POD_LEDGER_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

namespace gaptrain {
namespace trainingjob {

constexpr char kPodLedgerAnnotation[] = "gaptrain.io/pod-ledger";

struct PodLedger {
  uint64_t preemptions = 0;
  uint64_t failures = 0;
  uint64_t restarts = 0;
  std::set<std::string> counted;   // uids of lost pods already counted
  std::set<std::string> released;  // uids of pods the operator deleted itself

  bool Knows(const std::string& uid) const {
    return counted.count(uid) > 0 || released.count(uid) > 0;
  }
  bool operator==(const PodLedger& o) const {
    return preemptions == o.preemptions && failures == o.failures && restarts == o.restarts &&
           counted == o.counted && released == o.released;
  }
  bool operator!=(const PodLedger& o) const { return !(*this == o); }
};

// The job's ledger. Without a readable annotation (a new job, or one a
// person edited), the counts come from its status and no pod is known.
PodLedger ReadPodLedger(const nlohmann::json& job);

// The annotation's value: compact JSON, uids sorted.
std::string PodLedgerText(const PodLedger& ledger);

// Drops the uids that no pod in `observed_uids` has.
void PruneLedger(const std::set<std::string>& observed_uids, PodLedger* ledger);

}  // namespace trainingjob
}  // namespace gaptrain

#endif  // GAPTRAIN_OPERATOR_TRAININGJOB_POD_LEDGER_H_
