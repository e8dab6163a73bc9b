#include "operator/operator_metrics.h"

#include <chrono>
#include <map>

#include "operator/trainingjob/object_fields.h"
#include "operator/trainingjob/pod_ledger.h"

namespace gaptrain {
namespace {

// The one series of a family without labels.
template <class Builder>
auto* Unlabelled(Builder builder, prometheus::Registry& r, const char* name, const char* help) {
  return &builder.Name(name).Help(help).Register(r).Add({});
}

// The condition of `type` in a status, or null.
const nlohmann::json* ConditionOf(const nlohmann::json& status, const std::string& type) {
  for (const nlohmann::json& c : trainingjob::ArrayAt(status, {"conditions"})) {
    if (trainingjob::StringAt(c, {"type"}) == type) return &c;
  }
  return nullptr;
}

// The phases of status.phase, the reasons of a Failed condition
// (trainingjob/reconcile.cc) and of a failed reconcile (job_reconciler.cc).
constexpr const char* kPhases[] = {"Pending", "Running",   "Restarting", "Succeeded",
                                   "Failed",  "Suspended", "Queued"};
constexpr const char* kFailedReasons[] = {"FailedValidation", "TrainingJobFailed",
                                          "BackoffLimitExceeded", "DeadlineExceeded"};
constexpr const char* kReconcileErrorReasons[] = {
    "Conflict",      "NotFound",     "AlreadyExists",   "Invalid", "Forbidden",
    "Unauthorized",  "Timeout",      "TooManyRequests", "Unavailable", "Exception"};

uint64_t Grew(uint64_t before, uint64_t after) { return after > before ? after - before : 0; }

}  // namespace

JobTransitions TransitionsOf(const nlohmann::json& job, const trainingjob::ReconcilePlan& plan,
                             const trainingjob::ExecutionReport& report) {
  JobTransitions t;
  if (report.status_written && plan.status) {
    const nlohmann::json& before = trainingjob::ObjectAt(job, {"status"});
    const nlohmann::json& after = *plan.status;
    t.created = ConditionOf(before, "Created") == nullptr && ConditionOf(after, "Created") != nullptr;
    const std::string old_phase = trainingjob::StringAt(before, {"phase"});
    const std::string new_phase = trainingjob::StringAt(after, {"phase"});
    if (new_phase != old_phase && new_phase == "Succeeded") t.succeeded = true;
    if (new_phase != old_phase && new_phase == "Failed") {
      const nlohmann::json* failed = ConditionOf(after, "Failed");
      t.failed_reason = failed != nullptr ? trainingjob::StringAt(*failed, {"reason"}) : "";
      if (t.failed_reason.empty()) t.failed_reason = "Unknown";
    }
  }
  if (report.ledger_written && plan.ledger) {
    const trainingjob::PodLedger before = trainingjob::ReadPodLedger(job);
    t.preemptions = Grew(before.preemptions, plan.ledger->preemptions);
    t.failures = Grew(before.failures, plan.ledger->failures);
    t.restarts = Grew(before.restarts, plan.ledger->restarts);
  }
  return t;
}

OperatorMetrics::OperatorMetrics(std::shared_ptr<prometheus::Registry> registry)
    : registry_(std::move(registry)) {
  prometheus::Registry& r = *registry_;
  jobs_created_ = Unlabelled(prometheus::BuildCounter(), r, "gaptrain_operator_jobs_created_total",
                          "TrainingJobs the operator started (condition Created).");
  jobs_succeeded_ = Unlabelled(prometheus::BuildCounter(), r, "gaptrain_operator_jobs_succeeded_total",
                            "TrainingJobs that reached phase Succeeded.");
  jobs_failed_ = &prometheus::BuildCounter()
                      .Name("gaptrain_operator_jobs_failed_total")
                      .Help("TrainingJobs that reached phase Failed, by the condition's reason.")
                      .Register(r);
  jobs_restarted_ = Unlabelled(prometheus::BuildCounter(), r, "gaptrain_operator_jobs_restarted_total",
                            "Times a job's master or coordinator was recreated.");
  preemptions_ = Unlabelled(prometheus::BuildCounter(), r, "gaptrain_operator_preemptions_total",
                         "Workers (trainers, evaluators) lost to preemption and recreated.");
  worker_failures_ = Unlabelled(prometheus::BuildCounter(), r, "gaptrain_operator_worker_failures_total",
                             "Genuine pod failures, counted against backoffLimit.");
  reconcile_duration_ =
      &prometheus::BuildHistogram()
           .Name("gaptrain_operator_reconcile_duration_seconds")
           .Help("Time one reconcile of a TrainingJob took, API calls included.")
           .Register(r)
           .Add({}, prometheus::Histogram::BucketBoundaries{0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                                           0.5, 1, 2.5, 5, 10, 30});
  reconciles_ = &prometheus::BuildCounter()
                     .Name("gaptrain_operator_reconciles_total")
                     .Help("Reconciles by result: success, requeue (success, run again "
                           "later) or error.")
                     .Register(r);
  reconcile_errors_ = &prometheus::BuildCounter()
                           .Name("gaptrain_operator_reconcile_errors_total")
                           .Help("Failed reconciles by reason (Conflict, Unavailable, ...); "
                                 "each is retried with backoff.")
                           .Register(r);
  queue_depth_ = Unlabelled(prometheus::BuildGauge(), r, "gaptrain_operator_work_queue_depth",
                       "Jobs waiting to be reconciled now.");
  is_leader_ = Unlabelled(prometheus::BuildGauge(), r, "gaptrain_operator_is_leader",
                     "1 while this replica holds the Lease and reconciles, else 0.");
  jobs_by_phase_ = &prometheus::BuildGauge()
                        .Name("gaptrain_operator_jobs")
                        .Help("TrainingJobs the operator sees, by status.phase.")
                        .Register(r);
  for (const char* phase : kPhases) jobs_by_phase_->Add({{"phase", phase}});
  for (const char* reason : kFailedReasons) jobs_failed_->Add({{"reason", reason}});
  for (const char* reason : kReconcileErrorReasons) reconcile_errors_->Add({{"reason", reason}});
  for (const char* result : {"success", "requeue", "error"}) reconciles_->Add({{"result", result}});
}

void OperatorMetrics::OnReconciled(const std::string&, const controller::ReconcileRecord& record) {
  reconcile_duration_->Observe(std::chrono::duration<double>(record.duration).count());
  const char* result = !record.status.ok() ? "error" : record.requeue_after ? "requeue" : "success";
  reconciles_->Add({{"result", result}}).Increment();
  if (!record.status.ok()) reconcile_errors_->Add({{"reason", record.reason}}).Increment();
}

void OperatorMetrics::RecordTransitions(const JobTransitions& t) {
  if (t.created) jobs_created_->Increment();
  if (t.succeeded) jobs_succeeded_->Increment();
  if (!t.failed_reason.empty()) jobs_failed_->Add({{"reason", t.failed_reason}}).Increment();
  jobs_restarted_->Increment(static_cast<double>(t.restarts));
  preemptions_->Increment(static_cast<double>(t.preemptions));
  worker_failures_->Increment(static_cast<double>(t.failures));
}

void OperatorMetrics::SetLeader(bool leader) { is_leader_->Set(leader ? 1 : 0); }

void OperatorMetrics::SetQueueDepth(size_t depth) {
  queue_depth_->Set(static_cast<double>(depth));
}

void OperatorMetrics::SetJobPhases(const std::vector<std::string>& phases) {
  std::map<std::string, double> counts;
  for (const char* phase : kPhases) counts[phase] = 0;
  for (const std::string& phase : phases) counts[phase.empty() ? "Pending" : phase] += 1;
  for (const auto& [phase, count] : counts) jobs_by_phase_->Add({{"phase", phase}}).Set(count);
}

}  // namespace gaptrain
