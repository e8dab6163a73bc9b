#include "cli/run/run_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>

#include "services/api/master_metric_names.h"
#include "services/learn/chance_level.h"

namespace gaptrain {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
// Classes of every dataset a job can name (mnist-idx, cifar10-bin: 10
// each); the coordinator's status does not carry them.
constexpr int kDatasetClasses = 10;

std::string Printf(const char* format, double value) {
  char text[64];
  std::snprintf(text, sizeof text, format, value);
  return text;
}

// JSON has no NaN: absent values are null.
nlohmann::json NumberOrNull(double value) {
  return std::isfinite(value) ? nlohmann::json(value) : nlohmann::json(nullptr);
}

}  // namespace

void MasterTotals::Counter::Observe(double value) {
  if (!std::isfinite(value)) return;
  if (value < last) base += last;  // the master restarted
  last = value;
}

MasterCounters ReadMasterCounters(const MetricsSample& m) {
  namespace names = master_metric;
  MasterCounters c;
  c.pushes_accepted =
      MetricValue(m, names::Series(names::kPushesTotal, names::kOutcome, names::kApplied)) +
      MetricValue(m, names::Series(names::kPushesTotal, names::kOutcome, names::kAccumulated));
  c.staleness_sum = MetricValue(m, names::HistogramSum(names::kStaleness));
  c.staleness_count = MetricValue(m, names::HistogramCount(names::kStaleness));
  c.gap_sum = MetricValue(m, names::HistogramSum(names::kGap));
  c.gap_count = MetricValue(m, names::HistogramCount(names::kGap));
  c.model_version = MetricValue(m, names::kModelVersion, -1);
  return c;
}

namespace {

// Each shard's share of θ; equal shares when the totals name none.
std::vector<double> ShardWeights(const proto::CoordinatorStatusResponse& status) {
  double parameters = 0;
  for (const proto::MasterShardStatus& m : status.masters()) {
    parameters += static_cast<double>(m.totals().parameters());
  }
  std::vector<double> weights;
  for (const proto::MasterShardStatus& m : status.masters()) {
    weights.push_back(parameters > 0 ? static_cast<double>(m.totals().parameters()) / parameters
                                     : 1.0 / status.masters_size());
  }
  return weights;
}

MasterCounters CountersOf(const proto::MasterTotals& t) {
  MasterCounters c;
  // Every accepted push (applied or accumulated) counts one staleness.
  c.pushes_accepted = static_cast<double>(t.staleness_count());
  c.staleness_sum = t.staleness_sum();
  c.staleness_count = static_cast<double>(t.staleness_count());
  c.gap_sum = t.gap_sum();
  c.gap_count = static_cast<double>(t.gap_count());
  return c;
}

}  // namespace

MasterCounters MasterCountersOfShards(const proto::CoordinatorStatusResponse& status) {
  MasterCounters c;
  if (status.masters_size() == 0) return c;
  c.model_version = static_cast<double>(status.master_version());
  const std::vector<double> weights = ShardWeights(status);
  for (int i = 0; i < status.masters_size(); ++i) {
    const MasterCounters shard = CountersOf(status.masters(i).totals());
    c.pushes_accepted += weights[i] * shard.pushes_accepted;
    c.staleness_sum += weights[i] * shard.staleness_sum;
    c.staleness_count += weights[i] * shard.staleness_count;
    c.gap_sum += weights[i] * shard.gap_sum;
    c.gap_count += weights[i] * shard.gap_count;
  }
  return c;
}

void MasterTotals::Shard::Observe(const MasterCounters& c) {
  pushes.Observe(c.pushes_accepted);
  staleness_sum.Observe(c.staleness_sum);
  staleness_count.Observe(c.staleness_count);
  gap_sum.Observe(c.gap_sum);
  gap_count.Observe(c.gap_count);
}

void MasterTotals::Observe(const MetricsSample& m) {
  const MasterCounters c = ReadMasterCounters(m);
  shards_.resize(1);
  shards_[0].Observe(c);
  if (c.model_version >= 0) version_ = static_cast<uint64_t>(c.model_version);
}

void MasterTotals::ObserveShards(const proto::CoordinatorStatusResponse& status) {
  if (status.masters_size() == 0) return;
  shards_.resize(status.masters_size());
  const std::vector<double> weights = ShardWeights(status);
  for (int i = 0; i < status.masters_size(); ++i) {
    shards_[i].weight = weights[i];
    shards_[i].Observe(CountersOf(status.masters(i).totals()));
  }
  version_ = status.master_version();
}

double MasterTotals::Total(Counter Shard::*counter) const {
  double total = 0;
  for (const Shard& s : shards_) total += s.weight * (s.*counter).total();
  return total;
}

double MasterTotals::mean_staleness() const {
  return staleness_count() > 0 ? staleness_sum() / staleness_count() : kNaN;
}

double MasterTotals::mean_gap() const {
  return gap_count() > 0 ? gap_sum() / gap_count() : kNaN;
}

std::string FormatDuration(double seconds) {
  const long s = std::lround(std::max(0.0, seconds));
  char text[32];
  if (s < 60) {
    std::snprintf(text, sizeof text, "%lds", s);
  } else if (s < 3600) {
    std::snprintf(text, sizeof text, "%ldm%02lds", s / 60, s % 60);
  } else {
    std::snprintf(text, sizeof text, "%ldh%02ldm", s / 3600, (s % 3600) / 60);
  }
  return text;
}

std::string PhaseName(proto::JobPhase phase) {
  switch (phase) {
    case proto::JOB_PHASE_PENDING: return "Pending";
    case proto::JOB_PHASE_RUNNING: return "Running";
    case proto::JOB_PHASE_SUCCEEDED: return "Succeeded";
    case proto::JOB_PHASE_FAILED: return "Failed";
    default: return "Unknown";
  }
}

std::string ProgressLine(const ProgressInput& in) {
  const proto::CoordinatorStatusResponse& st = in.status;
  std::string line = "[" + FormatDuration(in.elapsed_seconds) + "] ";
  if (!in.coordinator_reachable) return line + "waiting for the coordinator...";
  if (st.phase() != proto::JOB_PHASE_RUNNING) line += PhaseName(st.phase()) + " ";
  if (st.epochs() > 0) {
    line += "epoch " + std::to_string(st.epoch() + 1) + "/" + Printf("%g", std::ceil(st.epochs()));
  } else {
    line += "epoch " + std::to_string(st.epoch() + 1);
  }
  line += " " + Printf("%.0f%%", 100 * st.progress());
  // The coordinator hears of versions from the workers, later than the
  // master's own metrics.
  const uint64_t version = std::max<uint64_t>(in.master_version, st.master_version());
  line += " | v" + std::to_string(version);
  if (st.phase() == proto::JOB_PHASE_RUNNING || st.phase() == proto::JOB_PHASE_PENDING) {
    line += " " + Printf("%.0f", in.updates_per_second) + " upd/s";
  }
  // The trainers' mean last loss.
  double loss_sum = 0;
  int losses = 0;
  for (const auto& w : st.workers()) {
    if (w.role() == proto::WORKER_ROLE_TRAINER && w.has_loss()) {
      loss_sum += w.loss();
      ++losses;
    }
  }
  if (losses > 0) line += " | loss " + Printf("%.3f", loss_sum / losses);
  if (st.has_last_accuracy()) line += " | acc " + Printf("%.2f%%", 100 * st.last_accuracy());
  if (in.target.IsSet() && in.target.metric != "accuracy" && st.has_last_accuracy()) {
    std::optional<double> value;
    if (in.target.metric == "loss") value = st.last_eval_loss();
    for (const proto::EvalMetric& m : st.last_eval_metrics()) {
      if (m.name() == in.target.metric) value = m.value();
    }
    if (value) line += " | " + in.target.Progress(*value);
  }
  if (std::isfinite(in.recent_gap)) line += " | gap " + Printf("%.2f", in.recent_gap);
  uint32_t silent = 0;
  for (const auto& w : st.workers()) {
    if (w.role() == proto::WORKER_ROLE_TRAINER && in.lease_seconds > 0 &&
        w.seconds_since_heartbeat() > in.lease_seconds / 2) {
      ++silent;
    }
  }
  silent = std::min(silent, st.live_trainers());
  line += " | trainers " + std::to_string(st.live_trainers() - silent) + "/" +
          std::to_string(in.trainers);
  if (silent > 0) line += " (+" + std::to_string(silent) + " silent)";
  if (in.autoscale_ceiling > 0) {
    line += " (autoscale " + std::to_string(in.autoscale_floor) + "-" +
            std::to_string(in.autoscale_ceiling) + ")";
  }
  if (!in.master_reachable) line += " | master down";
  if (in.chaos_kills > 0) line += " | chaos kills " + std::to_string(in.chaos_kills);
  return line;
}

std::string SummaryText(const RunSummary& s) {
  std::string text = "job " + s.job_name + ": " + s.outcome;
  if (!s.reason.empty()) text += " (" + s.reason + ")";
  text += " after " + FormatDuration(s.seconds) + "\n";
  if (!s.message.empty()) text += "  " + s.message + "\n";
  if (s.has_accuracy) {
    text += "  test accuracy " + Printf("%.2f%%", 100 * s.accuracy) + " (loss " +
            Printf("%.4f", s.eval_loss) + ") at version " + std::to_string(s.eval_version) + "\n";
    // An untrained model (version 0) is at chance for want of training.
    if (s.eval_version > 0 && AtChanceLevel(s.accuracy, s.eval_loss, kDatasetClasses)) {
      text += "  " + std::string(ChanceLevelAdvice()) + "\n";
    }
    if (!s.eval_metrics.empty()) {
      text += "  metrics:";
      for (size_t i = 0; i < s.eval_metrics.size(); ++i) {
        text += (i == 0 ? " " : ", ") + s.eval_metrics[i].name() + " " +
                Printf("%.4g", s.eval_metrics[i].value());
      }
      text += "\n";
    }
  } else {
    text += "  test accuracy: not evaluated\n";
  }
  if (!s.target.empty()) text += "  target: " + s.target + "\n";
  text += "  " + std::to_string(s.version) + " updates, " + Printf("%.0f", s.pushes_accepted) +
          " pushes";
  if (s.seconds > 0) text += " (" + Printf("%.1f", s.pushes_accepted / s.seconds) + "/s)";
  if (std::isfinite(s.mean_staleness)) text += ", mean staleness " + Printf("%.2f", s.mean_staleness);
  if (std::isfinite(s.mean_gap)) text += ", mean Gap " + Printf("%.3f", s.mean_gap);
  text += "\n";
  text += "  workers: " + std::to_string(s.joined) + " joins, " + std::to_string(s.preempted) +
          " preempted, " + std::to_string(s.lease_expiries) + " lost (lease expired), " +
          std::to_string(s.failed) + " failed; " + std::to_string(s.tasks_reassigned) +
          " tasks reassigned" +
          (s.tasks_released > 0
               ? ", " + std::to_string(s.tasks_released) + " handed back (data unavailable)"
               : "") +
          "\n";
  if (s.chaos_sigterms + s.chaos_sigkills + s.master_restarts + s.worker_restarts > 0) {
    text += "  survived: " + std::to_string(s.chaos_sigterms) + " SIGTERM and " +
            std::to_string(s.chaos_sigkills) + " SIGKILL of trainers, " +
            std::to_string(s.master_restarts) + " master restart(s), " +
            std::to_string(s.worker_restarts) + " worker crash restart(s)\n";
  }
  if (s.autoscaled) {
    if (s.autoscale_changes.empty()) {
      text += "  autoscale: stayed at " + std::to_string(s.trainers_at_end) + " trainers";
    } else {
      text += "  autoscale: " + std::to_string(s.autoscale_changes.front().from) + " -> " +
              std::to_string(s.trainers_at_end) + " trainers in " +
              std::to_string(s.autoscale_changes.size()) + " decision(s)";
    }
    text += " (range " + std::to_string(s.autoscale_floor) + "-" +
            std::to_string(s.autoscale_ceiling) + "), at most " +
            std::to_string(s.max_live_trainers) + " live at once\n";
    for (const AutoscaleChange& c : s.autoscale_changes) {
      text += "    [" + FormatDuration(c.at_seconds) + "] " + c.reason + ": " + c.message + "\n";
    }
  }
  if (s.ledger_updates_lost > 0 || s.samples_retrained > 0) {
    text += "  master restores lost " + std::to_string(s.ledger_updates_lost) + " updates; " +
            std::to_string(s.tasks_retrained) + " tasks (" + std::to_string(s.samples_retrained) +
            " samples) trained again\n";
  }
  text += "  checkpoint: " + (s.checkpoint.empty() ? std::string("none") : s.checkpoint) + "\n";
  if (!s.checkpoint.empty()) {
    text += "  export: gaptrain export --run-dir " + s.run_dir + " -o model.pt\n";
  }
  text += "  logs, state and summary.json: " + s.run_dir + "\n";
  return text;
}

std::string SummaryJson(const RunSummary& s) {
  nlohmann::json j;
  j["jobName"] = s.job_name;
  j["outcome"] = s.outcome;
  j["reason"] = s.reason;
  j["message"] = s.message;
  j["seconds"] = s.seconds;
  j["accuracy"] = s.has_accuracy ? NumberOrNull(s.accuracy) : nlohmann::json(nullptr);
  j["evalLoss"] = s.has_accuracy ? NumberOrNull(s.eval_loss) : nlohmann::json(nullptr);
  j["evalVersion"] = s.eval_version;
  nlohmann::json metrics = nlohmann::json::object();
  for (const proto::EvalMetric& m : s.eval_metrics) metrics[m.name()] = NumberOrNull(m.value());
  j["evalMetrics"] = metrics;
  j["target"] = s.target.empty() ? nlohmann::json(nullptr) : nlohmann::json(s.target);
  j["version"] = s.version;
  j["pushesAccepted"] = s.pushes_accepted;
  j["meanStaleness"] = NumberOrNull(s.mean_staleness);
  j["meanGap"] = NumberOrNull(s.mean_gap);
  j["workers"] = {{"joined", s.joined},
                  {"preempted", s.preempted},
                  {"leaseExpiries", s.lease_expiries},
                  {"failed", s.failed},
                  {"tasksReassigned", s.tasks_reassigned},
                  {"tasksReleased", s.tasks_released}};
  nlohmann::json faults = nlohmann::json::array();
  for (const ChaosFault& f : s.chaos_faults) {
    faults.push_back({{"atSeconds", f.at_seconds}, {"fault", f.fault}, {"target", f.target}});
  }
  j["chaos"] = {{"trainerSigterms", s.chaos_sigterms},
                {"trainerSigkills", s.chaos_sigkills},
                {"masterRestarts", s.master_restarts},
                {"startedAtSeconds", s.chaos_started_at >= 0 ? nlohmann::json(s.chaos_started_at)
                                                             : nlohmann::json(nullptr)},
                {"faults", faults}};
  j["ledger"] = s.has_ledger ? nlohmann::json{{"pushes", s.ledger_pushes},
                                              {"rejected", s.ledger_rejected},
                                              {"updates", s.ledger_updates},
                                              {"updatesLost", s.ledger_updates_lost},
                                              {"restores", s.ledger_restores}}
                             : nlohmann::json(nullptr);
  j["retrained"] = {{"tasks", s.tasks_retrained}, {"samples", s.samples_retrained}};
  j["workerRestarts"] = s.worker_restarts;
  nlohmann::json decisions = nlohmann::json::array();
  for (const AutoscaleChange& c : s.autoscale_changes) {
    decisions.push_back({{"atSeconds", c.at_seconds},
                         {"reason", c.reason},
                         {"from", c.from},
                         {"to", c.to},
                         {"message", c.message}});
  }
  j["autoscale"] = s.autoscaled ? nlohmann::json{{"minReplicas", s.autoscale_floor},
                                                 {"maxReplicas", s.autoscale_ceiling},
                                                 {"trainers", s.trainers_at_end},
                                                 {"maxLiveTrainers", s.max_live_trainers},
                                                 {"decisions", decisions}}
                                : nlohmann::json(nullptr);
  j["checkpoint"] = s.checkpoint;
  j["runDir"] = s.run_dir;
  return j.dump(2) + "\n";
}

}  // namespace gaptrain
