// ChaosMonkey: the fault schedule of `gaptrain run --chaos`. Its clock
// starts when the first trainer can be killed (the first call of Due with
// a candidate: the first trainer registered), whatever the others are
// doing, so a job whose trainers take seconds each to start is attacked
// from the start of its training. From then on, every `kill_every_seconds`
// (or each time the job's progress passes a multiple of
// `kill_every_progress`) it kills a random trainer, alternating SIGTERM (a
// spot preemption notice: the worker leaves cleanly) and SIGKILL (a node
// lost: the coordinator's lease expires), and brings it back
// `restart_after_seconds` later as a new process; at each of
// `kill_master_at_seconds` and `kill_master_at_progress` it SIGKILLs the
// master and restarts it after the same delay (it resumes from its newest
// checkpoint). A master kill due while the master is still down waits for
// its restart.
//
// Faults on the progress clock happen at the same point of the training
// on any machine, however fast: a test that needs a number of faults
// before the job ends uses it.
//
// Every action it returns is logged with its time (events()), for the
// run's summary.json.
//
// The monkey only decides; the launcher acts. It is a pure function of the
// seed and the times and candidates the caller passes, so a test can
// replay a schedule exactly. Not thread-safe.

#ifndef GAPTRAIN_CLI_RUN_CHAOS_MONKEY_H_
#define GAPTRAIN_CLI_RUN_CHAOS_MONKEY_H_

#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "services/base/status.h"

namespace gaptrain {

struct ChaosOptions {
  // At most one of the two is > 0; both 0: no trainer is killed.
  double kill_every_seconds = 0;
  double kill_every_progress = 0;  // a fraction of the job, (0, 1)
  double restart_after_seconds = 5;
  // Seconds after the first trainer's registration, and fractions of the
  // job's progress, each ascending; both empty: the master is never killed.
  std::vector<double> kill_master_at_seconds;
  std::vector<double> kill_master_at_progress;
  // Which master the master kills hit, of spec.master.shards (the
  // launcher refuses one the job does not have).
  uint32_t master_shard = 0;
  uint64_t seed = 1;

  bool enabled() const {
    return kill_every_seconds > 0 || kill_every_progress > 0 || !kill_master_at_seconds.empty() ||
           !kill_master_at_progress.empty();
  }
};

// Parses the value of --chaos: comma-separated key=value pairs, e.g.
// "every=20s,restart=5s,master=45s,seed=3" (the "s" is optional); the
// keys are every, restart, master, shard (the master shard master= kills)
// and seed. `every` and `master` also take
// a percentage of the job's progress ("every=15%,master=40%"). `master`
// may be given more than once ("master=15s,master=40s"), one kill each;
// master=0 kills nothing. Errors name the key.
Status ParseChaosOptions(const std::string& text, ChaosOptions* options);

struct ChaosAction {
  enum class Kind { kKillTrainer, kRestartTrainer, kKillMaster, kRestartMaster };
  Kind kind;
  size_t trainer = 0;  // kKillTrainer, kRestartTrainer
  int signal = 0;      // kKillTrainer, kKillMaster
};

// An action as Due returned it: `at` is the `now` of that call, and
// `after_start` the seconds since the monkey's clock started.
struct ChaosEvent {
  double at = 0;
  double after_start = 0;
  ChaosAction action;
};

// "SIGTERM", "SIGKILL" or "restart", and "trainer-3" or "master".
std::string ChaosFaultName(const ChaosAction& action);
std::string ChaosTargetName(const ChaosAction& action);

class ChaosMonkey {
 public:
  explicit ChaosMonkey(ChaosOptions options);

  // The actions due at `now` (seconds since the job started, never
  // decreasing) and `progress` (the fraction of the job done, [0, 1]), in
  // order. `killable` lists the trainers that may be
  // killed now (registered with the coordinator and not already down);
  // the first call with any starts the clock; a kill that finds none
  // waits for the next call. Trainers this monkey killed are restarted
  // only through the actions it returns.
  std::vector<ChaosAction> Due(double now, double progress, const std::vector<size_t>& killable);

  // When the clock started (a `now` of Due); negative until it has.
  double started_at() const { return started_at_; }
  const std::vector<ChaosEvent>& events() const { return events_; }

  uint64_t trainer_sigterms() const { return trainer_sigterms_; }
  uint64_t trainer_sigkills() const { return trainer_sigkills_; }
  uint64_t master_kills() const { return master_kills_; }

 private:
  ChaosOptions options_;
  std::mt19937_64 random_;
  double started_at_ = -1;
  double next_kill_ = 0;  // a `now` or a progress, once started
  bool next_is_sigterm_ = true;
  std::vector<std::pair<double, size_t>> restarts_;  // (due, trainer)
  size_t master_seconds_done_ = 0;   // of options_.kill_master_at_seconds
  size_t master_progress_done_ = 0;  // of options_.kill_master_at_progress
  double master_restart_at_ = -1;
  std::vector<ChaosEvent> events_;
  uint64_t trainer_sigterms_ = 0;
  uint64_t trainer_sigkills_ = 0;
  uint64_t master_kills_ = 0;
};

}  // namespace gaptrain

#endif  // GAPTRAIN_CLI_RUN_CHAOS_MONKEY_H_
