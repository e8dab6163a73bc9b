// ProgressDisplay: the job's progress as `kubectl get tj` prints it. The
// CRD's printer columns are JSONPath into the object and print a number
// as it is stored (EPOCH 0.6037333333333333), so the operator writes
// these strings to status.display beside the numbers in status.progress,
// which stay for machines:
//
//   epoch             "2.3/4"   epochs done, rounded down to a tenth, of
//                               spec.training.epochs; "2.3" for a job
//                               counted in maxUpdates
//   accuracy          "98.45%"  the latest test accuracy
//   target            "perplexity 18.4 (<= 20)"  the job's target metric's
//                               latest value and its bound; "perplexity
//                               <= 20" before the first evaluation with it
//   gap               "2.17"    mean gap of recent pushes
//   updatesPerSecond  "270"     while the job is Running only (a finished
//                               or suspended job makes no updates); one
//                               decimal below 10 ("2.5")
//
// A value progress lacks (or holds as a non-finite number) is left out, and
// kubectl shows the column empty. Deterministic: the same progress gives
// the same strings, so a reconcile with nothing new writes nothing.

#ifndef GAPTRAIN_OPERATOR_TRAININGJOB_PROGRESS_DISPLAY_H_
#define GAPTRAIN_OPERATOR_TRAININGJOB_PROGRESS_DISPLAY_H_

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "services/api/training_job.h"

namespace gaptrain {
namespace trainingjob {

// `progress` is status.progress as the operator writes it; `epochs` the
// job's spec.training.epochs (0: unknown, or counted in maxUpdates);
// `phase` the status.phase written with it; `target` the job's
// (JobTarget; unset: no target column).
nlohmann::json ProgressDisplay(const nlohmann::json& progress, double epochs,
                               const std::string& phase, const TargetSpec& target);

// The pieces, for tests.
std::string EpochText(double done, double epochs);
std::string AccuracyText(double accuracy);
std::string GapText(double gap);
std::string RateText(double updates_per_second);
// `value` absent: the bound alone.
std::string TargetText(const TargetSpec& target, std::optional<double> value);

}  // namespace trainingjob
}  // namespace gaptrain

#endif  // GAPTRAIN_OPERATOR_TRAININGJOB_PROGRESS_DISPLAY_H_
