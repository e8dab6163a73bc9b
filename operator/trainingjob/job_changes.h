// JobChangedBeyondOwnWrites: whether a change to a TrainingJob needs a
// reconcile, i.e. whether it touches anything besides what the operator
// itself writes there: the status, the pod ledger annotation, and the
// server's bookkeeping (resourceVersion, managedFields). Without this
// filter every status write (progress, every few seconds) would wake the
// controller for a reconcile that reads progress again and writes again,
// a loop that never rests; controller-runtime operators filter the same
// way (GenerationChangedPredicate). The reconcile is still level-triggered:
// it requeues itself for progress polling, deadlines and TTLs.
//
// What callers may rely on: spec, labels, other annotations, finalizers,
// ownerReferences and deletionTimestamp changes are all "beyond"; a job
// that is not a JSON object always counts as changed.

#ifndef GAPTRAIN_OPERATOR_TRAININGJOB_JOB_CHANGES_H_
#define GAPTRAIN_OPERATOR_TRAININGJOB_JOB_CHANGES_H_

#include <nlohmann/json.hpp>

namespace gaptrain {
namespace trainingjob {

bool JobChangedBeyondOwnWrites(const nlohmann::json& old_job, const nlohmann::json& new_job);

}  // namespace trainingjob
}  // namespace gaptrain

#endif  // GAPTRAIN_OPERATOR_TRAININGJOB_JOB_CHANGES_H_
