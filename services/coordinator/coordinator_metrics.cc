#include "services/coordinator/coordinator_metrics.h"

#include <cctype>
#include <cmath>
#include <limits>

namespace gaptrain {
namespace {

prometheus::Gauge* Gauge(prometheus::Registry& r, const std::string& name,
                         const std::string& help) {
  return &prometheus::BuildGauge().Name(name).Help(help).Register(r).Add({});
}

prometheus::Counter* Counter(prometheus::Registry& r, const std::string& name,
                             const std::string& help) {
  return &prometheus::BuildCounter().Name(name).Help(help).Register(r).Add({});
}

// Adds what `now` gained over `*seen`, then remembers it.
void Advance(prometheus::Counter* counter, uint64_t now, uint64_t* seen) {
  if (now > *seen) counter->Increment(static_cast<double>(now - *seen));
  *seen = now;
}

std::string LowerCodeName(Status::Code code) {
  std::string name = StatusCodeName(code);
  for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return name;
}

}  // namespace

CoordinatorMetrics::CoordinatorMetrics(std::shared_ptr<prometheus::Registry> registry)
    : registry_(std::move(registry)) {
  prometheus::Registry& r = *registry_;
  live_workers_ = Gauge(r, "gaptrain_coordinator_live_workers",
                        "Workers holding a lease (trainers and the evaluator).");
  live_trainers_ = Gauge(r, "gaptrain_coordinator_live_trainers", "Trainers holding a lease.");
  desired_trainers_ = Gauge(r, "gaptrain_coordinator_desired_trainers",
                            "The job's spec.workers.replicas.");
  min_trainers_ = Gauge(r, "gaptrain_coordinator_min_trainers",
                        "Live trainers the job needs to run (spec.workers.minReplicas).");
  joins_ = Counter(r, "gaptrain_coordinator_joins_total", "Registrations that issued a new id.");
  auto& leaves = prometheus::BuildCounter()
                     .Name("gaptrain_coordinator_leaves_total")
                     .Help("Graceful departures by reason: preempted, failed, finished.")
                     .Register(r);
  left_preempted_ = &leaves.Add({{"reason", "preempted"}});
  left_failed_ = &leaves.Add({{"reason", "failed"}});
  left_finished_ = &leaves.Add({{"reason", "finished"}});
  expiries_ = Counter(r, "gaptrain_coordinator_lease_expiries_total",
                      "Workers declared gone after leaseSeconds of silence.");
  auto& tasks = prometheus::BuildGauge()
                    .Name("gaptrain_coordinator_tasks")
                    .Help("The current epoch's tasks by state.")
                    .Register(r);
  tasks_queued_ = &tasks.Add({{"state", "queued"}});
  tasks_in_flight_ = &tasks.Add({{"state", "in_flight"}});
  tasks_done_ = &tasks.Add({{"state", "done"}});
  tasks_reassigned_ = Counter(r, "gaptrain_coordinator_tasks_reassigned_total",
                              "Tasks taken back from departed workers and queued again.");
  samples_lost_ = Counter(r, "gaptrain_coordinator_samples_lost_total",
                          "Samples departed workers had reported on tasks taken back; they are "
                          "trained again.");
  stale_completions_ = Counter(r, "gaptrain_coordinator_stale_completions_total",
                               "Completions refused because the worker no longer held the task.");
  tasks_retrained_ = Counter(r, "gaptrain_coordinator_tasks_retrained_total",
                             "Completed tasks queued again because a master restore lost their "
                             "updates.");
  samples_retrained_ = Counter(r, "gaptrain_coordinator_samples_retrained_total",
                               "Samples trained again because a master restore lost their "
                               "updates: the retrained tasks' and those workers rewound.");
  master_restores_ = Counter(r, "gaptrain_coordinator_master_restores_total",
                             "New master runs seen that replaced a known one.");
  tasks_released_ = &prometheus::BuildCounter()
                         .Name("gaptrain_coordinator_tasks_released_total")
                         .Help("Tasks trainers handed back untrained and queued again, by "
                               "reason: data_unavailable (their data store was unreachable).")
                         .Register(r)
                         .Add({{"reason", ReleaseReasonName(ReleaseReason::kDataUnavailable)}});
  data_unavailable_ = Gauge(r, "gaptrain_coordinator_data_unavailable",
                            "1 while a trainer's data store is unreachable (it handed its task "
                            "back; cleared by the next completed task), else 0.");
  tasks_unconfirmed_ = Gauge(r, "gaptrain_coordinator_tasks_unconfirmed",
                             "Completed tasks whose updates no master checkpoint holds yet.");
  tasks_retrain_queued_ = Gauge(r, "gaptrain_coordinator_tasks_retrain_queued",
                                "Earlier epochs' tasks waiting to be trained again, or in "
                                "training.");
  epoch_ = Gauge(r, "gaptrain_coordinator_epoch", "The epoch whose tasks are handed out (from 0).");
  auto& phase = prometheus::BuildGauge()
                    .Name("gaptrain_coordinator_phase")
                    .Help("1 for the job's current phase, 0 for the others.")
                    .Register(r);
  for (JobPhase p : {JobPhase::kPending, JobPhase::kRunning, JobPhase::kSucceeded,
                     JobPhase::kFailed}) {
    phase_[static_cast<size_t>(p)] = &phase.Add({{"phase", JobPhaseName(p)}});
  }
  master_version_ = Gauge(r, "gaptrain_coordinator_master_version",
                          "The job's master version: the least of the master shards' newest.");
  eval_accuracy_ = Gauge(r, "gaptrain_coordinator_eval_accuracy",
                         "Last accuracy the evaluator reported (NaN before the first).");
  eval_accuracy_->Set(std::numeric_limits<double>::quiet_NaN());
  eval_metric_family_ = &prometheus::BuildGauge()
                             .Name("gaptrain_coordinator_eval_metric")
                             .Help("The last evaluation's metrics by name: accuracy, loss and "
                                   "those the user's evaluation adds.")
                             .Register(r);
  eval_target_family_ = &prometheus::BuildGauge()
                             .Name("gaptrain_coordinator_eval_target")
                             .Help("The job's target (spec.training.target): the bound on the "
                                   "metric that ends it; direction at_least or at_most.")
                             .Register(r);
  auto& writes = prometheus::BuildCounter()
                     .Name("gaptrain_coordinator_state_writes_total")
                     .Help("State-file writes by result.")
                     .Register(r);
  state_writes_ = &writes.Add({{"result", "ok"}});
  state_write_failures_ = &writes.Add({{"result", "error"}});
  auto& members = prometheus::BuildCounter()
                      .Name("gaptrain_coordinator_master_member_updates_total")
                      .Help("SetMembers calls to the master by result.")
                      .Register(r);
  members_updates_ = &members.Add({{"result", "ok"}});
  members_update_failures_ = &members.Add({{"result", "error"}});
  rejected_family_ = &prometheus::BuildCounter()
                          .Name("gaptrain_coordinator_requests_rejected_total")
                          .Help("Calls refused for bad input, by verb and status code.")
                          .Register(r);
}

void CoordinatorMetrics::Observe(const CoordinatorState& state) {
  const CoordinatorCounters& c = state.counters();
  const TaskQueue& tasks = state.tasks();
  std::lock_guard<std::mutex> lock(mu_);
  live_workers_->Set(static_cast<double>(state.membership().live()));
  live_trainers_->Set(static_cast<double>(state.membership().live_trainers()));
  desired_trainers_->Set(state.config().desired_trainers);
  min_trainers_->Set(state.config().min_trainers);
  Advance(joins_, c.joins, &seen_.joins);
  Advance(left_preempted_, c.left_preempted, &seen_.left_preempted);
  Advance(left_failed_, c.left_failed, &seen_.left_failed);
  Advance(left_finished_, c.left_finished, &seen_.left_finished);
  Advance(expiries_, c.expiries, &seen_.expiries);
  Advance(tasks_reassigned_, c.tasks_reassigned, &seen_.tasks_reassigned);
  Advance(samples_lost_, c.samples_lost, &seen_.samples_lost);
  Advance(stale_completions_, c.stale_completions, &seen_.stale_completions);
  Advance(tasks_retrained_, c.tasks_retrained, &seen_.tasks_retrained);
  Advance(samples_retrained_, c.samples_retrained, &seen_.samples_retrained);
  Advance(master_restores_, c.master_restores, &seen_.master_restores);
  Advance(tasks_released_, c.tasks_released, &seen_.tasks_released);
  data_unavailable_->Set(state.data_unavailable() ? 1 : 0);
  tasks_unconfirmed_->Set(static_cast<double>(state.unconfirmed().size()));
  tasks_retrain_queued_->Set(state.retrain().queued() + state.retrain().in_flight());
  tasks_queued_->Set(tasks.queued());
  tasks_in_flight_->Set(tasks.in_flight());
  tasks_done_->Set(tasks.done());
  epoch_->Set(tasks.epoch());
  for (size_t i = 0; i < phase_.size(); ++i) {
    phase_[i]->Set(i == static_cast<size_t>(state.phase()) ? 1 : 0);
  }
  master_version_->Set(static_cast<double>(state.master_version()));
  if (state.last_accuracy()) eval_accuracy_->Set(*state.last_accuracy());
  ObserveEvaluation(state);
}

void CoordinatorMetrics::ObserveEvaluation(const CoordinatorState& state) {
  const TargetSpec& t = state.config().target;
  if (t.IsSet() && !eval_target_added_) {
    eval_target_added_ = true;
    const bool at_least = !std::isnan(t.at_least);
    eval_target_family_->Add({{"metric", t.metric}, {"direction", at_least ? "at_least" : "at_most"}})
        .Set(at_least ? t.at_least : t.at_most);
  }
  if (!state.last_accuracy() || state.evaluations_stored() == evaluations_shown_) return;
  evaluations_shown_ = state.evaluations_stored();
  std::map<std::string, double> values = {{"accuracy", *state.last_accuracy()},
                                          {"loss", state.last_eval_loss()}};
  for (const NamedMetric& m : state.last_eval_metrics()) values[m.name] = m.value;
  for (auto it = eval_metrics_.begin(); it != eval_metrics_.end();) {
    if (values.count(it->first)) {
      ++it;
      continue;
    }
    eval_metric_family_->Remove(it->second);
    it = eval_metrics_.erase(it);
  }
  for (const auto& [name, value] : values) {
    prometheus::Gauge*& gauge = eval_metrics_[name];
    if (gauge == nullptr) gauge = &eval_metric_family_->Add({{"metric", name}});
    gauge->Set(value);
  }
}

prometheus::Counter* CoordinatorMetrics::Rejected(const std::string& verb, Status::Code code) {
  auto key = std::make_pair(verb, code);
  auto it = rejected_.find(key);
  if (it != rejected_.end()) return it->second;
  prometheus::Counter* c = &rejected_family_->Add({{"verb", verb}, {"code", LowerCodeName(code)}});
  rejected_.emplace(key, c);
  return c;
}

void CoordinatorMetrics::RecordRejected(const std::string& verb, Status::Code code) {
  std::lock_guard<std::mutex> lock(mu_);
  Rejected(verb, code)->Increment();
}

void CoordinatorMetrics::RecordStateWrite(bool ok) {
  (ok ? state_writes_ : state_write_failures_)->Increment();
}

void CoordinatorMetrics::RecordMembersUpdate(bool ok) {
  (ok ? members_updates_ : members_update_failures_)->Increment();
}

}  // namespace gaptrain
