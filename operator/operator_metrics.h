// OperatorMetrics: what gaptrain-operator exports on /metrics (issue 16;
// docs/operator.md lists them):
//
//   gaptrain_operator_jobs{phase}                 TrainingJobs in the cache, by status.phase
//   gaptrain_operator_jobs_created_total          jobs that got their Created condition
//   gaptrain_operator_jobs_succeeded_total        jobs that reached Succeeded
//   gaptrain_operator_jobs_failed_total{reason}   jobs that reached Failed, by reason
//   gaptrain_operator_jobs_restarted_total        master or coordinator recreated
//   gaptrain_operator_preemptions_total           workers lost to preemption
//   gaptrain_operator_worker_failures_total       genuine failures (against backoffLimit)
//   gaptrain_operator_reconcile_duration_seconds  histogram of one reconcile
//   gaptrain_operator_reconciles_total{result}    success | requeue | error
//   gaptrain_operator_reconcile_errors_total{reason}  failed reconciles by reason
//   gaptrain_operator_work_queue_depth            keys ready to reconcile
//   gaptrain_operator_is_leader                   1 while this replica reconciles
//
// Every labelled series a dashboard shows exists from the start at 0 (each
// phase, each reason a job fails for, each reason a reconcile fails for),
// so a panel shows 0 rather than "no data".
//
// The job counters count what executed plans did: a phase change once the
// status carrying it was written, and preemptions, failures and restarts
// by how much the pod ledger's counts grew once it was written. A plan
// whose write failed counts nothing; the retry that succeeds counts it,
// so each is counted once per operator process.
//
// Thread-safe; OnReconciled comes from the controller's workers.

#ifndef GAPTRAIN_OPERATOR_OPERATOR_METRICS_H_
#define GAPTRAIN_OPERATOR_OPERATOR_METRICS_H_

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <cstddef>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "operator/controller/controller.h"
#include "operator/trainingjob/plan_executor.h"
#include "operator/trainingjob/reconcile.h"

namespace gaptrain {

// What one executed plan did to the job, for the counters.
struct JobTransitions {
  bool created = false;
  bool succeeded = false;
  std::string failed_reason;  // "" unless the job failed now
  uint64_t preemptions = 0;
  uint64_t failures = 0;
  uint64_t restarts = 0;
};

// `job` is the object the plan was made from.
JobTransitions TransitionsOf(const nlohmann::json& job, const trainingjob::ReconcilePlan& plan,
                             const trainingjob::ExecutionReport& report);

class OperatorMetrics : public controller::ControllerObserver {
 public:
  explicit OperatorMetrics(std::shared_ptr<prometheus::Registry> registry);

  const std::shared_ptr<prometheus::Registry>& registry() const { return registry_; }

  void OnReconciled(const std::string& controller,
                    const controller::ReconcileRecord& record) override;
  void RecordTransitions(const JobTransitions& transitions);
  void SetLeader(bool leader);
  void SetQueueDepth(size_t depth);
  // Sets gaptrain_operator_jobs from each cached TrainingJob's
  // status.phase ("": no phase yet, counts as Pending).
  void SetJobPhases(const std::vector<std::string>& phases);

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Counter* jobs_created_;
  prometheus::Counter* jobs_succeeded_;
  prometheus::Family<prometheus::Counter>* jobs_failed_;
  prometheus::Counter* jobs_restarted_;
  prometheus::Counter* preemptions_;
  prometheus::Counter* worker_failures_;
  prometheus::Histogram* reconcile_duration_;
  prometheus::Family<prometheus::Counter>* reconciles_;
  prometheus::Family<prometheus::Counter>* reconcile_errors_;
  prometheus::Gauge* queue_depth_;
  prometheus::Gauge* is_leader_;
  prometheus::Family<prometheus::Gauge>* jobs_by_phase_;
};

}  // namespace gaptrain

#endif  // GAPTRAIN_OPERATOR_OPERATOR_METRICS_H_
