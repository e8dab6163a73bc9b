// CoordinatorMetrics: what the coordinator exports on /metrics
// (docs/metrics.md, "Coordinator"): live workers and live trainers against
// the job's desired and minimum trainers; joins, leaves by reason
// and lease expiries; tasks by state, reassigned tasks and lost samples;
// epoch and phase; the last evaluation's metrics and the job's target;
// training redone after master restores; tasks handed back and whether a
// trainer's data is unavailable; rejected calls
// by verb and code; state-file writes.
//
// Counters mirror the core's totals, which survive restarts: Observe()
// adds what grew since the last call, so a restarted coordinator resumes
// from the saved totals. Thread-safe.

#ifndef GAPTRAIN_SERVICES_COORDINATOR_COORDINATOR_METRICS_H_
#define GAPTRAIN_SERVICES_COORDINATOR_COORDINATOR_METRICS_H_

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "services/base/status.h"
#include "services/coordinator/coordinator_state.h"

namespace gaptrain {

class CoordinatorMetrics {
 public:
  explicit CoordinatorMetrics(std::shared_ptr<prometheus::Registry> registry);

  const std::shared_ptr<prometheus::Registry>& registry() const { return registry_; }

  // Brings every series up to date with `state`.
  void Observe(const CoordinatorState& state);
  // A call refused with `code`; `verb` is "register", "heartbeat", ...
  void RecordRejected(const std::string& verb, Status::Code code);
  void RecordStateWrite(bool ok);
  void RecordMembersUpdate(bool ok);

 private:
  // The last evaluation's metrics and the target; under mu_.
  void ObserveEvaluation(const CoordinatorState& state);
  prometheus::Counter* Rejected(const std::string& verb, Status::Code code);

  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Gauge* live_workers_;
  prometheus::Gauge* live_trainers_;
  prometheus::Gauge* desired_trainers_;
  prometheus::Gauge* min_trainers_;
  prometheus::Counter* joins_;
  prometheus::Counter* left_preempted_;
  prometheus::Counter* left_failed_;
  prometheus::Counter* left_finished_;
  prometheus::Counter* expiries_;
  prometheus::Gauge* tasks_queued_;
  prometheus::Gauge* tasks_in_flight_;
  prometheus::Gauge* tasks_done_;
  prometheus::Counter* tasks_reassigned_;
  prometheus::Counter* samples_lost_;
  prometheus::Counter* stale_completions_;
  prometheus::Counter* tasks_retrained_;
  prometheus::Counter* samples_retrained_;
  prometheus::Counter* master_restores_;
  prometheus::Counter* tasks_released_;  // reason data_unavailable
  prometheus::Gauge* data_unavailable_;
  prometheus::Gauge* tasks_unconfirmed_;
  prometheus::Gauge* tasks_retrain_queued_;
  prometheus::Gauge* epoch_;
  std::array<prometheus::Gauge*, 4> phase_;
  prometheus::Gauge* master_version_;
  prometheus::Gauge* eval_accuracy_;
  prometheus::Family<prometheus::Gauge>* eval_metric_family_;
  prometheus::Family<prometheus::Gauge>* eval_target_family_;
  prometheus::Counter* state_writes_;
  prometheus::Counter* state_write_failures_;
  prometheus::Counter* members_updates_;
  prometheus::Counter* members_update_failures_;
  prometheus::Family<prometheus::Counter>* rejected_family_;

  std::mutex mu_;  // guards the fields below
  CoordinatorCounters seen_;
  bool eval_target_added_ = false;
  // The state's evaluations_stored() last shown; none yet, so a restored
  // state's last evaluation shows at the first Observe.
  uint64_t evaluations_shown_ = UINT64_MAX;
  std::map<std::string, prometheus::Gauge*> eval_metrics_;  // the last evaluation's
  std::map<std::pair<std::string, Status::Code>, prometheus::Counter*> rejected_;
};

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_COORDINATOR_COORDINATOR_METRICS_H_
