// ChaosMonkey: the fault schedule of `gaptrain run --chaos`. Every
// `kill_every_seconds` it kills a random trainer, alternating SIGTERM (a
// spot preemption notice: the worker leaves cleanly) and SIGKILL (a node
// lost: the coordinator's lease expires), and brings it back
// `restart_after_seconds` later as a new process; once, at
// `kill_master_at_seconds`, it SIGKILLs the master and restarts it after
// the same delay (it resumes from its newest checkpoint).
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

#include "services/common/status.h"

namespace gaptrain {

struct ChaosOptions {
  double kill_every_seconds = 0;      // 0: no trainer is killed
  double restart_after_seconds = 5;
  double kill_master_at_seconds = 0;  // 0: the master is never killed
  uint64_t seed = 1;

  bool enabled() const { return kill_every_seconds > 0 || kill_master_at_seconds > 0; }
};

// Parses the value of --chaos: comma-separated key=value pairs, e.g.
// "every=20s,restart=5s,master=45s,seed=3" (the "s" is optional); the
// keys are every, restart, master and seed. Errors name the key.
Status ParseChaosOptions(const std::string& text, ChaosOptions* options);

struct ChaosAction {
  enum class Kind { kKillTrainer, kRestartTrainer, kKillMaster, kRestartMaster };
  Kind kind;
  size_t trainer = 0;  // kKillTrainer, kRestartTrainer
  int signal = 0;      // kKillTrainer, kKillMaster
};

class ChaosMonkey {
 public:
  explicit ChaosMonkey(ChaosOptions options);

  // The actions due at `now` (seconds since the job started), in order.
  // `killable` lists the trainers that may be killed now (registered with
  // the coordinator and not already down); a kill that finds none waits
  // for the next call. Trainers this monkey killed are restarted only
  // through the actions it returns.
  std::vector<ChaosAction> Due(double now, const std::vector<size_t>& killable);

  uint64_t trainer_sigterms() const { return trainer_sigterms_; }
  uint64_t trainer_sigkills() const { return trainer_sigkills_; }
  uint64_t master_kills() const { return master_kills_; }

 private:
  ChaosOptions options_;
  std::mt19937_64 random_;
  double next_kill_;
  bool next_is_sigterm_ = true;
  std::vector<std::pair<double, size_t>> restarts_;  // (due, trainer)
  bool master_killed_ = false;
  double master_restart_at_ = -1;
  uint64_t trainer_sigterms_ = 0;
  uint64_t trainer_sigkills_ = 0;
  uint64_t master_kills_ = 0;
};

}  // namespace gaptrain

#endif  // GAPTRAIN_CLI_RUN_CHAOS_MONKEY_H_
