#include "cli/run/chaos_monkey.h"

#include <signal.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <sstream>
#include <utility>

namespace gaptrain {
namespace {

Status ParseSeconds(const std::string& key, std::string text, double* out) {
  if (!text.empty() && text.back() == 's') text.pop_back();
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || !std::isfinite(v) || v < 0 || v > 86400) {
    return Status::InvalidArgument("--chaos: " + key + ": must be seconds in [0, 86400], got '" +
                                   text + "'");
  }
  *out = v;
  return Status::OK();
}

bool IsPercent(const std::string& text) { return !text.empty() && text.back() == '%'; }

// "15%" -> 0.15: a point of the job strictly between its start and end.
Status ParsePercent(const std::string& key, std::string text, double* out) {
  text.pop_back();
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || !std::isfinite(v) || v <= 0 || v >= 100) {
    return Status::InvalidArgument("--chaos: " + key +
                                   ": a percentage of the job must be in (0%, 100%), got '" +
                                   text + "%'");
  }
  *out = v / 100;
  return Status::OK();
}

}  // namespace

Status ParseChaosOptions(const std::string& text, ChaosOptions* options) {
  ChaosOptions o;
  std::stringstream pairs(text);
  std::string pair;
  while (std::getline(pairs, pair, ',')) {
    const size_t eq = pair.find('=');
    if (eq == std::string::npos) {
      return Status::InvalidArgument("--chaos: expected key=value, got '" + pair +
                                     "' (keys: every, restart, master, shard, seed)");
    }
    const std::string key = pair.substr(0, eq), value = pair.substr(eq + 1);
    if (key == "every") {
      // The last `every` wins, on whichever clock it names.
      o.kill_every_seconds = o.kill_every_progress = 0;
      GAPTRAIN_RETURN_IF_ERROR(IsPercent(value)
                                   ? ParsePercent(key, value, &o.kill_every_progress)
                                   : ParseSeconds(key, value, &o.kill_every_seconds));
    } else if (key == "restart") {
      GAPTRAIN_RETURN_IF_ERROR(ParseSeconds(key, value, &o.restart_after_seconds));
    } else if (key == "master") {
      double at = 0;
      if (IsPercent(value)) {
        GAPTRAIN_RETURN_IF_ERROR(ParsePercent(key, value, &at));
        o.kill_master_at_progress.push_back(at);
      } else {
        GAPTRAIN_RETURN_IF_ERROR(ParseSeconds(key, value, &at));
        if (at > 0) o.kill_master_at_seconds.push_back(at);
      }
    } else if (key == "shard") {
      const unsigned long shard = std::strtoul(value.c_str(), nullptr, 10);
      if (value.empty() || value.find_first_not_of("0123456789") != std::string::npos ||
          shard > 63) {
        return Status::InvalidArgument("--chaos: shard: must be a master shard, 0 to 63, got '" +
                                       value + "'");
      }
      o.master_shard = static_cast<uint32_t>(shard);
    } else if (key == "seed") {
      // Digits only: strtoull alone would take " -3" as 2^64 - 3 and
      // clamp an overflow to 2^64 - 1.
      errno = 0;
      o.seed = std::strtoull(value.c_str(), nullptr, 10);
      if (value.empty() || value.find_first_not_of("0123456789") != std::string::npos ||
          errno == ERANGE) {
        return Status::InvalidArgument("--chaos: seed: must be an unsigned integer, got '" +
                                       value + "'");
      }
    } else {
      return Status::InvalidArgument("--chaos: unknown key '" + key +
                                     "' (keys: every, restart, master, shard, seed)");
    }
  }
  std::sort(o.kill_master_at_seconds.begin(), o.kill_master_at_seconds.end());
  std::sort(o.kill_master_at_progress.begin(), o.kill_master_at_progress.end());
  if (!o.enabled()) {
    return Status::InvalidArgument(
        "--chaos: set every=SECONDS|PERCENT% (> 0) or master=SECONDS|PERCENT% (> 0)");
  }
  *options = o;
  return Status::OK();
}

std::string ChaosFaultName(const ChaosAction& action) {
  if (action.kind == ChaosAction::Kind::kRestartTrainer ||
      action.kind == ChaosAction::Kind::kRestartMaster) {
    return "restart";
  }
  if (action.signal == SIGTERM) return "SIGTERM";
  if (action.signal == SIGKILL) return "SIGKILL";
  return "signal " + std::to_string(action.signal);
}

std::string ChaosTargetName(const ChaosAction& action) {
  if (action.kind == ChaosAction::Kind::kKillMaster ||
      action.kind == ChaosAction::Kind::kRestartMaster) {
    return "master";
  }
  return "trainer-" + std::to_string(action.trainer);
}

ChaosMonkey::ChaosMonkey(ChaosOptions options) : options_(std::move(options)), random_(options_.seed) {}

namespace {

// The first multiple of `step` above `progress`.
double NextMultiple(double progress, double step) {
  return (std::floor(progress / step + 1e-9) + 1) * step;
}

}  // namespace

std::vector<ChaosAction> ChaosMonkey::Due(double now, double progress,
                                          const std::vector<size_t>& killable) {
  const bool by_progress = options_.kill_every_progress > 0;
  std::vector<ChaosAction> actions;
  if (started_at_ < 0) {
    if (killable.empty()) return actions;
    started_at_ = now;
    next_kill_ = by_progress ? NextMultiple(progress, options_.kill_every_progress)
                             : now + options_.kill_every_seconds;
  }
  const double after_start = now - started_at_;
  // A master killed earlier must be serving again before the next kill.
  const bool master_up = master_restart_at_ < 0;
  // Restarts first: a trainer back up may be killed again later, never in
  // the same call.
  std::sort(restarts_.begin(), restarts_.end());
  while (!restarts_.empty() && restarts_.front().first <= now) {
    actions.push_back({ChaosAction::Kind::kRestartTrainer, restarts_.front().second, 0});
    restarts_.erase(restarts_.begin());
  }
  if (master_restart_at_ >= 0 && master_restart_at_ <= now) {
    actions.push_back({ChaosAction::Kind::kRestartMaster, 0, 0});
    master_restart_at_ = -1;
  }
  // The tolerance: 3 * 0.2 is 0.6000000000000001, and a job 60% done is due.
  const bool kill_due = by_progress ? progress >= next_kill_ - 1e-9
                                    : options_.kill_every_seconds > 0 && now >= next_kill_;
  if (kill_due && !killable.empty()) {
    std::uniform_int_distribution<size_t> pick(0, killable.size() - 1);
    const size_t trainer = killable[pick(random_)];
    const int signal = next_is_sigterm_ ? SIGTERM : SIGKILL;
    next_is_sigterm_ = !next_is_sigterm_;
    (signal == SIGTERM ? trainer_sigterms_ : trainer_sigkills_)++;
    actions.push_back({ChaosAction::Kind::kKillTrainer, trainer, signal});
    restarts_.emplace_back(now + options_.restart_after_seconds, trainer);
    // A kill that waited for a candidate does not bring the next one
    // closer: the interval counts from the kill that happened.
    next_kill_ = by_progress ? NextMultiple(progress, options_.kill_every_progress)
                             : now + options_.kill_every_seconds;
  }
  const std::vector<double>& at_seconds = options_.kill_master_at_seconds;
  const std::vector<double>& at_progress = options_.kill_master_at_progress;
  const bool seconds_due =
      master_seconds_done_ < at_seconds.size() && after_start >= at_seconds[master_seconds_done_];
  const bool progress_due = master_progress_done_ < at_progress.size() &&
                            progress >= at_progress[master_progress_done_];
  if (master_up && (seconds_due || progress_due)) {
    // One kill per call; a second one due waits for this one's restart.
    ++(seconds_due ? master_seconds_done_ : master_progress_done_);
    ++master_kills_;
    actions.push_back({ChaosAction::Kind::kKillMaster, 0, SIGKILL});
    master_restart_at_ = now + options_.restart_after_seconds;
  }
  for (const ChaosAction& a : actions) events_.push_back({now, after_start, a});
  return actions;
}

}  // namespace gaptrain
