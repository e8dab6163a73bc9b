// A Workload's status as Kueue's scheduler writes it when it admits one of
// ours, for tests: quota reserved in ClusterQueue research, the master, the
// coordinator and the evaluator on flavor on-demand, `trainers` trainers
// on flavor spot.

#ifndef GAPTRAIN_OPERATOR_TRAININGJOB_KUEUE_ADMISSION_EXAMPLE_H_
#define GAPTRAIN_OPERATOR_TRAININGJOB_KUEUE_ADMISSION_EXAMPLE_H_

#include <nlohmann/json.hpp>
#include <string>

namespace gaptrain {
namespace trainingjob {

inline nlohmann::json WorkloadConditionExample(const std::string& type, const std::string& status,
                                               const std::string& reason,
                                               const std::string& message = "") {
  return {{"type", type},       {"status", status},
          {"reason", reason},   {"message", message},
          {"lastTransitionTime", "2026-11-28T10:00:00Z"}};
}

inline nlohmann::json AdmittedWorkloadStatus(int trainers) {
  using nlohmann::json;
  auto assignment = [](const char* pod_set, const char* flavor, int count) {
    return json{{"name", pod_set}, {"flavors", {{"cpu", flavor}}}, {"count", count}};
  };
  return json{
      {"conditions",
       {WorkloadConditionExample("QuotaReserved", "True", "QuotaReserved",
                                 "Quota reserved in ClusterQueue research"),
        WorkloadConditionExample("Admitted", "True", "Admitted", "The workload is admitted")}},
      {"admission",
       {{"clusterQueue", "research"},
        {"podSetAssignments",
         {assignment("master", "on-demand", 1), assignment("coordinator", "on-demand", 1),
          assignment("evaluator", "on-demand", 1), assignment("trainers", "spot", trainers)}}}}};
}

}  // namespace trainingjob
}  // namespace gaptrain

#endif  // GAPTRAIN_OPERATOR_TRAININGJOB_KUEUE_ADMISSION_EXAMPLE_H_
