#include "cli/run/job_runner.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <thread>

#include "services/base/termination_signal.h"
#include "services/master/checkpoint.h"
#include "services/master/push_ledger.h"
#include "services/net/http_client.h"

namespace gaptrain {
namespace {

bool Terminal(proto::JobPhase phase) {
  return phase == proto::JOB_PHASE_SUCCEEDED || phase == proto::JOB_PHASE_FAILED;
}

bool ExitedCleanly(int wait_status) { return WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == 0; }

// A process's end as the restart rules read it: the exit code a kubelet
// would report (128 + the signal for one killed). Chaos's kills never
// get here: they are preemptions, which the runner restarts itself.
ProcessEnd ProcessEndOf(JobProcess process, int wait_status) {
  ProcessEnd end;
  end.process = process;
  if (WIFEXITED(wait_status)) end.exit_code = WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) end.exit_code = 128 + WTERMSIG(wait_status);
  return end;
}

}  // namespace

JobRunner::JobRunner(const TrainingJob& job, RunDir* run_dir, LocalJob::Options local,
                     Options options, std::FILE* out)
    : job_(job),
      run_dir_(run_dir),
      options_(options),
      out_(out),
      local_(std::move(local)),
      monkey_(options.chaos),
      trainer_slots_(local_.trainer_count()) {
  if (job_.workers.autoscale.enabled) autoscaler_ = std::make_unique<LocalAutoscaler>(job_.workers);
}

uint32_t JobRunner::HighestWorkerId() const {
  uint32_t highest = 0;
  for (const auto& w : status_.workers()) highest = std::max(highest, w.worker_id());
  return highest;
}

bool JobRunner::TrainerRegistered(size_t index) const {
  for (const auto& w : status_.workers()) {
    if (w.host() == LocalJob::TrainerName(index) &&
        w.worker_id() > trainer_slots_[index].registered_above) {
      return true;
    }
  }
  return false;
}

uint32_t JobRunner::RunningTrainers() {
  if (!coordinator_reachable_) return 0;  // registered or not, nobody can tell
  uint32_t running = 0;
  for (size_t i = 0; i < local_.trainer_count(); ++i) {
    const TrainerSlot& slot = trainer_slots_[i];
    Process* trainer = local_.trainer(i);
    if (trainer != nullptr && trainer->Running() && !slot.down_by_chaos && !slot.scaled_away &&
        TrainerRegistered(i)) {
      ++running;
    }
  }
  return running;
}

uint32_t JobRunner::WantedTrainers() const {
  return autoscaler_ != nullptr ? autoscaler_->replicas() : job_.workers.replicas;
}

double JobRunner::Elapsed() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

void JobRunner::Say(const std::string& line) {
  if (live_line_open_) std::fputs("\n", out_);
  live_line_open_ = false;
  std::fprintf(out_, "%s\n", line.c_str());
  std::fflush(out_);
}

void JobRunner::Observe() {
  proto::CoordinatorStatusResponse status;
  coordinator_reachable_ = coordinator_ != nullptr && coordinator_->GetStatus(&status).ok();
  if (coordinator_reachable_) {
    status_ = status;
    max_live_trainers_ = std::max(max_live_trainers_, status_.live_trainers());
  }
  master_reachable_ = false;
  if (local_.master_count() > 1) {
    // Several masters: every shard's totals are in the coordinator's status
    // (as the operator reads them), the job's version the least shard's.
    if (!coordinator_reachable_ || status_.masters_size() == 0) return;
    master_reachable_ = true;
    for (const proto::MasterShardStatus& m : status_.masters()) {
      master_reachable_ = master_reachable_ && m.reachable();
    }
    master_counters_ = MasterCountersOfShards(status_);
    totals_.ObserveShards(status_);
    return;
  }
  if (local_.master() != nullptr && local_.master()->Running()) {
    HttpClientResponse response;
    if (HttpGet("127.0.0.1", local_.master_http_port(), "/metrics", 2, &response).ok() &&
        response.status == 200) {
      master_reachable_ = true;
      const MetricsSample metrics = ParseMetricsText(response.body);
      totals_.Observe(metrics);
      master_counters_ = ReadMasterCounters(metrics);
    }
  }
}

bool JobRunner::RestartAfterFailure(JobProcess process, const std::string& service,
                                    Process* ended, const std::function<Status()>& start) {
  const RestartDecision decision =
      DecideRestart(ProcessEndOf(process, ended->wait_status()), job_.workers.restart_policy);
  if (decision.counts_as_failure) ++failures_;
  if (FailedAfterLosses(service)) return false;
  if (!decision.replace) {
    if (process == JobProcess::kEvaluator) evaluator_given_up_ = true;
    Say(service + " is not restarted (" + decision.not_replaced_because + "); see " +
        local_.LogFile(service));
    return true;
  }
  Status s = start();
  if (!s.ok()) {
    error_ = "cannot restart " + service + ": " + s.ToString();
    return false;
  }
  Say("restarted " + service + " (failure " + std::to_string(failures_) + ", backoffLimit " +
      std::to_string(job_.run_policy.backoff_limit) + ")");
  return true;
}

bool JobRunner::RestartTrainerAfterFailure(size_t index) {
  const std::string name = LocalJob::TrainerName(index);
  const RestartDecision decision =
      DecideRestart(ProcessEndOf(JobProcess::kTrainer, local_.trainer(index)->wait_status()),
                    job_.workers.restart_policy);
  if (decision.counts_as_failure) ++failures_;
  if (!decision.replace) {
    ++permanently_failed_trainers_;
    trainer_slots_[index].given_up = true;
    Say(name + " is not restarted (" + decision.not_replaced_because + "); see " +
        local_.LogFile(name));
  }
  if (FailedAfterLosses(name)) return false;
  if (!decision.replace) return true;  // the job goes on with fewer trainers
  trainer_slots_[index].registered_above = HighestWorkerId();
  Status s = local_.StartTrainer(index);
  if (!s.ok()) {
    error_ = "cannot restart " + name + ": " + s.ToString();
    return false;
  }
  ++worker_restarts_;
  Say("restarted " + name + " after a crash (failure " + std::to_string(failures_) +
      ", backoffLimit " + std::to_string(job_.run_policy.backoff_limit) + ")");
  return true;
}

bool JobRunner::FailedAfterLosses(const std::string& service) {
  const RestartLimits limits{job_.run_policy.backoff_limit, job_.workers.replicas,
                             job_.workers.Floor(), job_.workers.restart_policy};
  const std::optional<LossFailure> failure =
      FailureAfterLosses(failures_, permanently_failed_trainers_, limits);
  if (!failure) return false;
  failure_reason_ = failure->reason;
  error_ = failure->message + " (the last: " + service + ", see " + local_.LogFile(service) + ")";
  return true;
}

bool JobRunner::Supervise() {
  // Workers start in parallel and report their metrics ports when ready.
  bool changed = local_.RefreshWorkerPorts();
  // The control plane always comes back (a Deployment would restart it).
  for (size_t shard = 0; shard < local_.master_count(); ++shard) {
    // Chaos stops its shard on purpose and restarts it itself.
    const bool down_by_chaos = master_down_by_chaos_ && shard == options_.chaos.master_shard;
    if (down_by_chaos || local_.master(shard)->Running()) continue;
    const std::string name = local_.MasterName(shard);
    Say(name + " exited (" + DescribeWaitStatus(local_.master(shard)->wait_status()) + ")");
    if (!RestartAfterFailure(JobProcess::kMaster, name, local_.master(shard),
                             [this, shard] { return local_.StartMaster(shard); })) {
      return false;
    }
    ++master_restarts_;
    changed = true;
  }
  if (!local_.coordinator()->Running()) {
    Say("coordinator exited (" + DescribeWaitStatus(local_.coordinator()->wait_status()) + ")");
    if (!RestartAfterFailure(JobProcess::kCoordinator, "coordinator", local_.coordinator(),
                             [this] { return local_.StartCoordinator(); })) {
      return false;
    }
    changed = true;
  }
  // A worker that exits 0 has left (the job ended); one that crashed is
  // restarted per restartPolicy, unless the job is over. A trainer the
  // autoscaler stopped is not restarted, however it ended.
  const bool over = Terminal(status_.phase());
  if (!over && !evaluator_given_up_ && !local_.evaluator()->Running() &&
      !ExitedCleanly(local_.evaluator()->wait_status())) {
    // During start-up or later, as the operator treats a pod: restartPolicy
    // and backoffLimit decide (services/jobplan).
    Say("evaluator exited (" + DescribeWaitStatus(local_.evaluator()->wait_status()) +
        (local_.EvaluatorReported() ? ")" : ", during start-up)"));
    if (!RestartAfterFailure(JobProcess::kEvaluator, "evaluator", local_.evaluator(),
                             [this] { return local_.StartEvaluator(); })) {
      return false;
    }
    changed = true;
  }
  for (size_t i = 0; i < local_.trainer_count(); ++i) {
    Process* trainer = local_.trainer(i);
    if (over || trainer == nullptr || trainer_slots_[i].down_by_chaos ||
        trainer_slots_[i].scaled_away || trainer_slots_[i].given_up || trainer->Running() ||
        ExitedCleanly(trainer->wait_status())) {
      continue;
    }
    // A user's trainer command writes no ports file: it got through
    // start-up once the coordinator listed it.
    const bool started = local_.TrainerReported(i) ||
                         (local_.TemplateTrainer(i) && TrainerRegistered(i));
    Say(LocalJob::TrainerName(i) + " exited (" + DescribeWaitStatus(trainer->wait_status()) +
        (started ? ")" : ", during start-up)"));
    ++trainers_lost_;
    if (!RestartTrainerAfterFailure(i)) return false;
    changed = true;
  }
  if (changed) run_dir_->WriteEndpoints(job_.name, &local_, getpid());
  return true;
}

void JobRunner::ApplyChaos() {
  if (!options_.chaos.enabled() || Terminal(status_.phase())) return;
  // Only trainers registered with the coordinator are killed, so every kill
  // shows up in its counters: a SIGTERM as a preemption, a SIGKILL as a
  // lease expiry. A restarted trainer counts once it registered anew: the
  // killed process's registration (same host) may still hold a lease, but
  // it has a lower id, since ids only grow.
  // No trainer is killed in the job's last 5% either: a worker stopped as
  // the job ends may leave as finished rather than preempted.
  std::vector<size_t> killable;
  for (size_t i = 0; i < local_.trainer_count() && status_.progress() < 0.95; ++i) {
    const TrainerSlot& slot = trainer_slots_[i];
    Process* trainer = local_.trainer(i);
    if (slot.down_by_chaos || slot.scaled_away || trainer == nullptr || !trainer->Running()) {
      continue;
    }
    if (TrainerRegistered(i)) killable.push_back(i);
  }
  bool changed = false;
  for (const ChaosAction& a : monkey_.Due(Elapsed(), status_.progress(), killable)) {
    switch (a.kind) {
      case ChaosAction::Kind::kKillTrainer: {
        const std::string name = LocalJob::TrainerName(a.trainer);
        Say("chaos: " + std::string(a.signal == SIGTERM ? "SIGTERM" : "SIGKILL") + " to " + name);
        trainer_slots_[a.trainer].down_by_chaos = true;
        ++trainers_lost_;
        local_.trainer(a.trainer)->Signal(a.signal);
        break;
      }
      case ChaosAction::Kind::kRestartTrainer: {
        const std::string name = LocalJob::TrainerName(a.trainer);
        TrainerSlot& slot = trainer_slots_[a.trainer];
        if (!slot.down_by_chaos || slot.scaled_away) {
          // Meanwhile the autoscaler started it again, or stopped its slot.
          slot.down_by_chaos = false;
          Say("chaos: " + name + " not restarted: the autoscaler " +
              (slot.scaled_away ? "stopped it" : "restarted it"));
          break;
        }
        Process* trainer = local_.trainer(a.trainer);
        // A SIGTERM'd trainer may still be finishing its batch.
        if (!trainer->WaitExit(std::chrono::seconds(30))) trainer->Stop(std::chrono::seconds(1));
        slot.down_by_chaos = false;
        slot.registered_above = HighestWorkerId();
        Status s = local_.StartTrainer(a.trainer);
        Say("chaos: restarted " + name + (s.ok() ? "" : ": " + s.ToString()));
        changed = true;
        break;
      }
      case ChaosAction::Kind::kKillMaster: {
        const size_t shard = options_.chaos.master_shard;
        Say("chaos: SIGKILL to the " + local_.MasterName(shard));
        master_down_by_chaos_ = true;
        local_.master(shard)->Signal(SIGKILL);
        local_.master(shard)->WaitExit(std::chrono::seconds(10));
        break;
      }
      case ChaosAction::Kind::kRestartMaster: {
        Status s = local_.StartMaster(options_.chaos.master_shard);
        master_down_by_chaos_ = false;
        ++master_restarts_;
        Say("chaos: restarted the " + local_.MasterName(options_.chaos.master_shard) +
            (s.ok() ? "" : ": " + s.ToString()));
        if (!s.ok()) error_ = "cannot restart the master: " + s.ToString();
        changed = true;
        break;
      }
    }
  }
  if (changed) run_dir_->WriteEndpoints(job_.name, &local_, getpid());
}

bool JobRunner::StartScaledTrainer(size_t slot) {
  local_.EnsureTrainerSlots(slot + 1);
  if (trainer_slots_.size() < slot + 1) trainer_slots_.resize(slot + 1);
  Process* leaving = local_.trainer(slot);
  if (leaving != nullptr && leaving->Running()) {
    // SIGTERM'd by an earlier shrink (or by chaos): it leaves within its
    // grace, or is SIGKILLed.
    leaving->Stop(std::chrono::milliseconds(
        static_cast<int64_t>(1000 * local_.options().worker_grace_seconds)));
  }
  TrainerSlot& t = trainer_slots_[slot];
  t.scaled_away = false;
  t.down_by_chaos = false;
  t.registered_above = HighestWorkerId();
  Status s = local_.StartTrainer(slot);
  if (!s.ok()) {
    error_ = "autoscale: cannot start " + LocalJob::TrainerName(slot) + ": " + s.ToString();
    return false;
  }
  return true;
}

void JobRunner::StopScaledTrainer(size_t slot) {
  trainer_slots_[slot].scaled_away = true;
  // A preemption notice: it hands its task back and leaves within its
  // grace. Supervise() and Finish() reap it.
  Process* trainer = local_.trainer(slot);
  if (trainer != nullptr) trainer->Signal(SIGTERM);
}

void JobRunner::Autoscale() {
  if (autoscaler_ == nullptr || Terminal(status_.phase())) return;
  AutoscaleObservation o;
  o.seconds = Elapsed();
  o.master_reachable = master_reachable_;
  o.master = master_counters_;
  o.running = RunningTrainers();
  o.trainers_lost = trainers_lost_;
  const uint32_t from = autoscaler_->replicas();
  AutoscaleDecision decision;
  if (!autoscaler_->Observe(o, &decision) || decision.replicas == from) return;
  Say(std::string("autoscale: ") + decision.Reason() + ": " + decision.message);
  for (size_t slot : TrainerSlotsToChange(from, decision.replicas)) {
    if (decision.replicas < from) {
      StopScaledTrainer(slot);
    } else if (!StartScaledTrainer(slot)) {
      break;
    }
  }
  run_dir_->WriteEndpoints(job_.name, &local_, getpid());
}

void JobRunner::PrintProgress(bool force) {
  const double now = Elapsed();
  const double period = options_.live_line ? 0 : options_.print_every_seconds;
  if (!force && now - last_print_ < period) return;
  last_print_ = now;
  ProgressInput in;
  in.status = status_;
  in.coordinator_reachable = coordinator_reachable_;
  in.master_reachable = master_reachable_;
  in.elapsed_seconds = now;
  in.master_version = totals_.model_version();
  const uint64_t version = totals_.model_version();
  if (now > last_rate_time_ && version >= last_rate_version_) {
    in.updates_per_second = (version - last_rate_version_) / (now - last_rate_time_);
  }
  const double gap_count = totals_.gap_count() - last_gap_count_;
  in.recent_gap = gap_count > 0 ? (totals_.gap_sum() - last_gap_sum_) / gap_count
                                : std::numeric_limits<double>::quiet_NaN();
  last_rate_time_ = now;
  last_rate_version_ = version;
  last_gap_sum_ = totals_.gap_sum();
  last_gap_count_ = totals_.gap_count();
  in.trainers = WantedTrainers();
  if (autoscaler_ != nullptr) {
    in.autoscale_floor = job_.workers.Floor();
    in.autoscale_ceiling = job_.workers.Ceiling();
  }
  in.lease_seconds = job_.coordinator.lease_seconds;
  in.target = JobTarget(job_.training);
  in.chaos_kills = monkey_.trainer_sigterms() + monkey_.trainer_sigkills() + monkey_.master_kills();
  const std::string line = ProgressLine(in);
  if (options_.live_line) {
    std::fprintf(out_, "\r\033[K%s", line.c_str());
    live_line_open_ = true;
  } else {
    std::fprintf(out_, "%s\n", line.c_str());
  }
  std::fflush(out_);
}

bool JobRunner::WorkersGone() {
  if (local_.evaluator()->Running()) return false;
  for (size_t i = 0; i < local_.trainer_count(); ++i) {
    if (local_.trainer(i) != nullptr && local_.trainer(i)->Running()) return false;
  }
  return true;
}

int JobRunner::Run(RunSummary* summary) {
  start_ = std::chrono::steady_clock::now();
  Status s = local_.StartAll();
  if (s.ok()) s = run_dir_->WriteEndpoints(job_.name, &local_, getpid());
  if (!s.ok()) {
    Say("gaptrain run: " + s.ToString());
    error_ = s.ToString();
    Finish(false, summary);
    return 1;
  }
  CoordinatorClient::Options client_options;
  client_options.token = local_.options().token;
  client_options.deadline_seconds = 2;
  coordinator_ = std::make_unique<CoordinatorClient>(
      grpc::CreateChannel(local_.coordinator_address(), grpc::InsecureChannelCredentials()),
      client_options);

  const std::string autoscaled =
      autoscaler_ == nullptr ? ""
                             : " (autoscale: " + std::to_string(job_.workers.Floor()) + " to " +
                                   std::to_string(job_.workers.Ceiling()) + " trainers)";
  Say("job " + job_.name + ": " + std::to_string(local_.trainer_count()) +
      " trainers and an evaluator" + autoscaled + "; run directory " + run_dir_->path());
  for (size_t i = 0; i < local_.master_count(); ++i) {
    Say("  " + local_.MasterName(i) + std::string(12 - std::min<size_t>(11, local_.MasterName(i).size()), ' ') +
        local_.master_address(i) + "  metrics http://127.0.0.1:" +
        std::to_string(local_.master_http_port(i)) + "/metrics");
  }
  Say("  coordinator " + local_.coordinator_address() + "  status  http://127.0.0.1:" +
      std::to_string(local_.coordinator_http_port()) + "/status");
  Say("  every service's /metrics: " + run_dir_->path() +
      "/prometheus-targets.json (Prometheus file_sd); logs: " + run_dir_->path() + "/logs/");
  Say("  Ctrl-C stops the job with a checkpoint; from another shell: gaptrain status --run-dir " +
      run_dir_->path());

  bool interrupted = false;
  double terminal_since = -1;
  // Chaos looks more often, so that a fault lands near the progress or
  // second it was scheduled for even when the job moves fast.
  const int tick_ms = options_.chaos.enabled() ? 250 : 1000;
  while (true) {
    // Once the job is over, the services are stopped as soon as the last
    // worker has left, not up to a tick later.
    if (TerminationSignal::WaitFor(terminal_since < 0 ? tick_ms : 100) != 0) {
      interrupted = true;
      break;
    }
    Observe();
    if (!Supervise() || !error_.empty()) break;
    ApplyChaos();
    Autoscale();
    if (!error_.empty()) break;
    PrintProgress(false);
    if (Terminal(status_.phase())) {
      if (terminal_since < 0) terminal_since = Elapsed();
      // The evaluator scores the final model, then every worker leaves.
      if (WorkersGone() || Elapsed() - terminal_since > 180) break;
    }
  }
  PrintProgress(true);
  Finish(interrupted, summary);
  if (interrupted) return 130;
  return summary->outcome == "Succeeded" ? 0 : 1;
}

void JobRunner::Finish(bool interrupted, RunSummary* summary) {
  const auto grace = std::chrono::milliseconds(
      static_cast<int64_t>(1000 * (local_.options().worker_grace_seconds + 5)));
  if (interrupted) Say("stopping: the workers leave, then the master writes a checkpoint");
  // Workers first (they leave the coordinator), then the master (its final
  // checkpoint), then the coordinator.
  std::vector<Process*> workers;
  if (local_.evaluator() != nullptr) workers.push_back(local_.evaluator());
  for (size_t i = 0; i < local_.trainer_count(); ++i) {
    if (local_.trainer(i) != nullptr) workers.push_back(local_.trainer(i));
  }
  for (Process* w : workers) w->Signal(SIGTERM);
  for (Process* w : workers) w->Stop(grace);

  // Let the coordinator's view settle: workers lost to SIGKILL are counted
  // when their leases expire.
  if (coordinator_ && local_.coordinator() != nullptr && local_.coordinator()->Running()) {
    const auto deadline = std::chrono::steady_clock::now() +
                          std::chrono::seconds(job_.coordinator.lease_seconds + 5);
    while (std::chrono::steady_clock::now() < deadline) {
      Observe();
      if (coordinator_reachable_ && status_.live_workers() == 0) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  }
  if (local_.master() != nullptr) Observe();  // the master's last counters
  for (size_t shard = 0; shard < local_.master_count(); ++shard) {
    if (local_.master(shard) != nullptr) local_.master(shard)->Stop(std::chrono::seconds(60));
  }
  // The coordinator's gRPC server waits, up to its shutdown deadline, for
  // a client that keeps its connection open: ours goes first.
  coordinator_.reset();
  if (local_.coordinator() != nullptr) local_.coordinator()->Stop(std::chrono::seconds(10));

  RunSummary& s = *summary;
  s.job_name = job_.name;
  s.seconds = Elapsed();
  s.run_dir = run_dir_->path();
  if (!error_.empty()) {
    // Losses end a job as on a cluster (phase Failed, the operator's
    // reason); anything else that stopped the launcher is an error.
    s.outcome = failure_reason_.empty() ? "Error" : "Failed";
    s.reason = failure_reason_.empty() ? status_.reason() : failure_reason_;
    s.message = error_;
  } else if (interrupted) {
    s.outcome = "Interrupted";
    s.reason = status_.reason();
    s.message = "resume with: gaptrain run -f <job.yaml> --resume";
  } else {
    s.outcome = PhaseName(status_.phase());
    s.reason = status_.reason();
    s.message = status_.message();
  }
  s.has_accuracy = status_.has_last_accuracy();
  s.accuracy = status_.last_accuracy();
  s.eval_loss = status_.last_eval_loss();
  s.eval_version = status_.last_eval_version();
  s.eval_metrics.assign(status_.last_eval_metrics().begin(), status_.last_eval_metrics().end());
  s.target = status_.target();
  s.version = totals_.model_version();
  s.pushes_accepted = totals_.pushes_accepted();
  s.mean_staleness = totals_.mean_staleness();
  s.mean_gap = totals_.mean_gap();
  s.joined = status_.joined();
  s.preempted = status_.preempted();
  s.lease_expiries = status_.expired();
  s.failed = status_.failed();
  s.tasks_reassigned = status_.tasks_reassigned();
  s.tasks_released = status_.tasks_released();
  s.chaos_sigterms = monkey_.trainer_sigterms();
  s.chaos_sigkills = monkey_.trainer_sigkills();
  s.master_restarts = master_restarts_;
  s.worker_restarts = worker_restarts_;
  s.chaos_started_at = monkey_.started_at();
  if (autoscaler_ != nullptr) {
    s.autoscaled = true;
    s.autoscale_floor = job_.workers.Floor();
    s.autoscale_ceiling = job_.workers.Ceiling();
    s.trainers_at_end = autoscaler_->replicas();
    s.max_live_trainers = max_live_trainers_;
    s.autoscale_changes = autoscaler_->changes();
  }
  for (const ChaosEvent& e : monkey_.events()) {
    s.chaos_faults.push_back({e.at, ChaosFaultName(e.action), ChaosTargetName(e.action)});
  }
  PushLedger::Totals ledger;
  const std::string checkpoint_dir = LocalJob::CheckpointDir(run_dir_->path());
  if (PushLedger::Read(checkpoint_dir + "/" + PushLedger::kFileName, &ledger).ok()) {
    s.has_ledger = true;
    s.ledger_pushes = ledger.pushes;
    s.ledger_rejected = ledger.rejected;
    s.ledger_updates = ledger.updates;
    s.ledger_updates_lost = ledger.updates_lost;
    s.ledger_restores = ledger.restores;
  }
  s.tasks_retrained = status_.tasks_retrained();
  s.samples_retrained = status_.samples_retrained();
  CheckpointDirectory checkpoints(checkpoint_dir, 1);
  const std::vector<std::string> paths = checkpoints.List();
  s.checkpoint = paths.empty() ? "" : paths.back();
  Say(SummaryText(s));
  Status written = run_dir_->WriteSummary(SummaryJson(s));
  if (!written.ok()) Say("cannot write summary.json: " + written.ToString());
}

}  // namespace gaptrain
