// The TrainingJob's status.conditions, with Kubernetes' rules for when
// their timestamps move: lastTransitionTime changes only when a
// condition's status changes, lastUpdateTime only when its status, reason
// or message changes. Rewriting a condition as it was therefore changes
// nothing, which keeps a reconcile that finds nothing new from writing.
//
// Conditions are kept one per type, in the order Created, Running,
// Restarting, Succeeded, Failed, Suspended, PodsUnschedulable,
// ReplicaFailure, ModelExported, DataUnavailable; any other type is
// dropped. Times are RFC
// 3339 in UTC with whole seconds ("2026-11-23T06:00:00Z"), as the API
// server stores them.

#ifndef GAPTRAIN_OPERATOR_TRAININGJOB_JOB_CONDITIONS_H_
#define GAPTRAIN_OPERATOR_TRAININGJOB_JOB_CONDITIONS_H_

#include <chrono>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace gaptrain {
namespace trainingjob {

// "2026-11-23T06:00:00Z".
std::string FormatTime(std::chrono::system_clock::time_point time);
// Reads what FormatTime writes, with optional fractional seconds; nullopt
// for anything else.
std::optional<std::chrono::system_clock::time_point> ParseTime(const std::string& text);

struct Condition {
  std::string type;    // Created | Running | ... (the order above)
  std::string status;  // True | False
  std::string reason;
  std::string message;
};

class JobConditions {
 public:
  // Starts from the conditions of an observed status (anything that is not
  // a list of conditions counts as none).
  JobConditions(const nlohmann::json& observed_conditions, std::string now);

  // The condition of `type` as observed (or as set since), if any.
  std::optional<Condition> Get(const std::string& type) const;
  bool IsTrue(const std::string& type) const;

  // Sets the condition, moving its timestamps only as the rules say.
  void Set(const Condition& condition);
  // Sets `type` to False with this reason and message if it is True now;
  // leaves it alone (absent or already False) otherwise.
  void Clear(const std::string& type, const std::string& reason, const std::string& message);

  // The list, in the canonical order.
  nlohmann::json ToJson() const;

 private:
  nlohmann::json conditions_;  // type -> condition object
  std::string now_;
};

}  // namespace trainingjob
}  // namespace gaptrain

#endif  // GAPTRAIN_OPERATOR_TRAININGJOB_JOB_CONDITIONS_H_
