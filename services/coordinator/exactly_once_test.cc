// Exactly once under churn: seeded random schedules of 8 workers that take
// tasks, push gradients to a simulated master, report progress, complete
// them or hand them back (their data away), go silent (their leases
// expire), come back as zombies with stale completions, leave,
// re-register, while the coordinator itself restarts
// from saved state now and then, and the master checkpoints, crashes and
// resumes from its newest checkpoint, losing the updates after it. The
// coordinator hears of master runs through ObserveMaster at random times,
// as from its membership feed. With θ in two shards every push reaches
// both masters, which checkpoint and crash independently. For every epoch,
// the ranges of the completions the coordinator accepted whose updates are
// all still in the final state of every master must tile the epoch's
// positions with no gap and no overlap, and no task may ever be held by
// two live workers.

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <optional>
#include <random>
#include <set>

#include "services/coordinator/coordinator_state.h"

namespace gaptrain {
namespace {

CoordinatorConfig Config(uint32_t master_shards) {
  CoordinatorConfig c;
  c.master_shards = master_shards;
  c.job_name = "churn";
  c.train_samples = 1000;
  c.samples_per_task = 37;  // 28 tasks, the last one of 1
  c.epochs = 3.5;           // three full epochs and 500 positions of a fourth
  c.min_trainers = 2;
  c.lease_seconds = 10;
  c.no_worker_timeout_seconds = 0;
  c.master_timeout_seconds = 0;
  return c;
}

// One simulated worker process.
struct Sim {
  enum class Mode { kAbsent, kLive, kSilent } mode = Mode::kAbsent;
  WorkerId id = 0;       // the id it believes it has
  DataTask task;         // the task it believes it holds (id 0: none)
  uint32_t progress = 0;
  int silent_steps = 0;
  // The pushes of its task: update ids, and per master shard and run the
  // newest version they reached.
  std::vector<uint64_t> updates;
  std::map<std::pair<uint32_t, uint64_t>, uint64_t> reached;

  void Drop() {
    task = DataTask();
    progress = 0;
    updates.clear();
    reached.clear();
  }
};

// The parameter server as the coordinator must reason about it: updates
// applied in order, checkpoints, and crashes that resume from the newest
// checkpoint (or from nothing), each start a new run with a larger id.
class SimMaster {
 public:
  // Applies update `u` (one push); sets where it landed.
  void Push(uint64_t u, MasterPosition* position) {
    state_.insert(u);
    position->incarnation = run_.id;
    position->version = ++version_;
  }
  void Checkpoint() { checkpoint_ = Saved{run_.id, version_, state_}; }
  void Crash() {
    ++crashes_;
    run_.id += 1 + crashes_ % 3;  // ids grow, not necessarily by one
    if (checkpoint_) {
      run_.restored_from_id = checkpoint_->run;
      run_.restored_from_version = checkpoint_->version;
      version_ = checkpoint_->version;
      state_ = checkpoint_->state;
    } else {
      run_.restored_from_id = 0;
      run_.restored_from_version = 0;
      version_ = 0;
      state_.clear();
    }
  }
  // What a SetMembers reply says.
  const MasterRun& run() const { return run_; }
  uint64_t version() const { return version_; }
  uint64_t durable_version() const {
    return checkpoint_ && checkpoint_->run == run_.id ? checkpoint_->version : 0;
  }
  bool Holds(uint64_t update) const { return state_.count(update) == 1; }
  int crashes() const { return crashes_; }

 private:
  struct Saved {
    uint64_t run;
    uint64_t version;
    std::set<uint64_t> state;
  };
  MasterRun run_{100, 0, 0};  // every shard's first run: ids are per shard
  uint64_t version_ = 0;
  std::set<uint64_t> state_;  // the updates θ holds
  std::optional<Saved> checkpoint_;
  int crashes_ = 0;
};

// A completion the coordinator accepted.
struct Accepted {
  uint32_t epoch;
  SampleRange range;
  std::vector<uint64_t> updates;
};

class Churn {
 public:
  Churn(uint32_t seed, uint32_t master_shards)
      : rng_(seed), masters_(master_shards), run_seen_(master_shards, false) {
    EXPECT_TRUE(CoordinatorState::Create(Config(master_shards), 0, &state_).ok());
  }

  // Runs until the job succeeds; false when it does not within the limit.
  bool Run(int max_steps) {
    for (int step = 0; step < max_steps && state_->phase() != JobPhase::kSucceeded; ++step) {
      now_ += 1;
      for (Sim& w : sims_) Act(w);
      state_->Tick(now_);
      if (Chance(0.01)) Restart();
      // Once the job has succeeded the master is stopped with a final
      // checkpoint, which holds every update: no crash loses any.
      if (state_->phase() != JobPhase::kSucceeded) ActMaster();
    }
    return state_->phase() == JobPhase::kSucceeded;
  }

  // Ranges of accepted completions whose updates every master still
  // holds, per epoch.
  std::map<uint32_t, std::vector<SampleRange>> Completed() const {
    std::map<uint32_t, std::vector<SampleRange>> completed;
    auto held = [&](uint64_t u) {
      return std::all_of(masters_.begin(), masters_.end(),
                         [&](const SimMaster& m) { return m.Holds(u); });
    };
    for (const Accepted& a : accepted_) {
      if (std::all_of(a.updates.begin(), a.updates.end(), held)) {
        completed[a.epoch].push_back(a.range);
      }
    }
    return completed;
  }
  const CoordinatorState& state() const { return *state_; }
  int restarts() const { return restarts_; }
  int zombie_rejections() const { return zombie_rejections_; }
  int releases() const { return releases_; }
  int master_crashes() const {
    int crashes = 0;
    for (const SimMaster& m : masters_) crashes += m.crashes();
    return crashes;
  }
  int shard_crashes(uint32_t shard) const { return masters_[shard].crashes(); }

 private:
  bool Chance(double p) { return std::uniform_real_distribution<double>(0, 1)(rng_) < p; }

  // The master checkpoints now and then and crashes rarely; the feed
  // reaches it at random. A run lives at least until the feed has reached
  // it once (a master takes seconds to start; the feed calls every second):
  // a run the coordinator never heard of would make it retrain more than
  // was lost (UnconfirmedTasks), which this test would see as an overlap.
  // Each shard on its own.
  void ActMaster() {
    for (uint32_t shard = 0; shard < masters_.size(); ++shard) {
      SimMaster& master = masters_[shard];
      if (Chance(0.1)) master.Checkpoint();
      if (Chance(0.3)) {
        state_->ObserveMaster(now_, shard, master.run(), master.version(),
                              master.durable_version());
        run_seen_[shard] = true;
      }
      if (run_seen_[shard] && Chance(0.03 / masters_.size())) {
        master.Crash();
        run_seen_[shard] = false;
      }
    }
  }

  // One push of the worker's task: its slice reaches every shard.
  void Push(Sim& w) {
    const uint64_t u = next_update_++;
    w.updates.push_back(u);
    for (uint32_t shard = 0; shard < masters_.size(); ++shard) {
      MasterPosition p;
      masters_[shard].Push(u, &p);
      uint64_t& newest = w.reached[{shard, p.incarnation}];
      newest = std::max(newest, p.version);
    }
  }

  void Act(Sim& w) {
    switch (w.mode) {
      case Sim::Mode::kAbsent:
        if (Chance(0.3)) Register(w, Chance(0.5) ? w.id : 0);
        return;
      case Sim::Mode::kSilent:
        // A stalled process: after a while it wakes up and tries to finish
        // its old task, then registers again with its old id; or registers
        // first and then reports the old task under whatever id it got.
        if (++w.silent_steps < 8 + static_cast<int>(rng_() % 10)) return;
        if (Chance(0.5)) {
          if (w.task.id != 0) TryComplete(w, /*zombie=*/true);
          Register(w, w.id);
        } else {
          const DataTask old = w.task;
          Register(w, w.id);
          if (w.mode == Sim::Mode::kLive && old.id != 0) {
            w.task = old;
            TryComplete(w, /*zombie=*/true);
          }
        }
        return;
      case Sim::Mode::kLive:
        break;
    }
    const double r = std::uniform_real_distribution<double>(0, 1)(rng_);
    if (r < 0.02) {
      w.mode = Sim::Mode::kSilent;
      w.silent_steps = 0;
    } else if (r < 0.035) {
      bool gone = false;
      ASSERT_TRUE(state_->Leave(now_, w.id, Chance(0.5) ? LeaveReason::kPreempted
                                                         : LeaveReason::kFailed,
                                &gone)
                      .ok());
      w.mode = Sim::Mode::kAbsent;
      w.Drop();
    } else if (r < 0.05) {
      Register(w, w.id);  // a network blip: same id, same task
    } else if (w.task.id == 0) {
      NextTaskResult next;
      Status s = state_->NextTask(now_, w.id, &next);
      if (!Alive(w, s)) return;
      if (next.outcome == TaskOutcome::kAssigned) {
        CheckNotHeldElsewhere(w, next.task);
        w.Drop();
        w.task = next.task;
      }
    } else if (r < 0.35) {
      TryComplete(w, /*zombie=*/false);
    } else if (r < 0.37) {
      Release(w);
    } else {
      w.progress = std::min(w.task.range.size(), w.progress + 5);
      Push(w);
      WorkerProgress p;
      p.task_id = w.task.id;
      p.samples_done = w.progress;
      p.loss = 1.0f;
      uint64_t held = 0;
      Status s = state_->Heartbeat(now_, w.id, p, &held);
      if (!Alive(w, s)) return;
      EXPECT_EQ(held, w.task.id);
    }
  }

  // A call failed because the coordinator declared the worker gone (its
  // lease expired while it was slow, or the coordinator restarted and the
  // lease ran out): the process starts over with a new registration.
  bool Alive(Sim& w, const Status& s) {
    if (s.ok()) return true;
    EXPECT_EQ(s.code(), Status::Code::kFailedPrecondition) << s.ToString();
    w.mode = Sim::Mode::kAbsent;
    w.Drop();
    return false;
  }

  void Register(Sim& w, WorkerId previous) {
    RegisterResult r;
    Status s = state_->Register(now_, "host-" + std::to_string(&w - sims_), WorkerRole::kTrainer,
                                previous, &r);
    if (!s.ok()) {
      // Only the job's end refuses a registration here.
      EXPECT_EQ(state_->phase(), JobPhase::kSucceeded) << s.ToString();
      return;
    }
    if (r.resumed) {
      EXPECT_EQ(r.id, w.id);
      EXPECT_EQ(r.task.id, w.task.id);
    } else {
      w.Drop();
    }
    w.id = r.id;
    w.mode = Sim::Mode::kLive;
  }

  void TryComplete(Sim& w, bool zombie) {
    TaskCompletion completion;
    for (const auto& [where, version] : w.reached) {
      completion.reached.push_back({where.second, version, where.first});
    }
    CompleteTaskResult result;
    Status s = state_->CompleteTask(now_, w.id, w.task.id, completion, &result);
    if (s.ok()) {
      // Still live (never expired): a legitimate completion.
      EXPECT_FALSE(result.already_completed);
      EXPECT_EQ(result.task.id, w.task.id);
      if (!result.retrain) accepted_.push_back({result.task.epoch, result.task.range, w.updates});
      if (Chance(0.2)) {  // the reply was lost: the retry must not count twice
        CompleteTaskResult again;
        ASSERT_TRUE(state_->CompleteTask(now_, w.id, w.task.id, completion, &again).ok());
        EXPECT_TRUE(again.already_completed);
      }
    } else {
      EXPECT_EQ(s.code(), Status::Code::kFailedPrecondition) << s.ToString();
      zombie_rejections_ += zombie;
      if (!zombie && state_->membership().Find(w.id) == nullptr) w.mode = Sim::Mode::kAbsent;
    }
    w.Drop();
  }

  // Its data store is away: the task goes back untrained, its pushes stay
  // applied but count for nothing (they are never in an accepted range).
  void Release(Sim& w) {
    ReleaseTaskResult result;
    Status s = state_->ReleaseTask(now_, w.id, w.task.id, ReleaseReason::kDataUnavailable,
                                   "store unreachable", &result);
    if (!Alive(w, s)) return;
    EXPECT_FALSE(result.already_released);
    ++releases_;
    if (Chance(0.2)) {  // the reply was lost: the retry moves nothing
      ReleaseTaskResult again;
      ASSERT_TRUE(state_->ReleaseTask(now_, w.id, w.task.id, ReleaseReason::kDataUnavailable,
                                      "store unreachable", &again)
                      .ok());
      EXPECT_TRUE(again.already_released);
    }
    w.Drop();
  }

  // The coordinator must never hand a task to a second live worker.
  void CheckNotHeldElsewhere(const Sim& taker, const DataTask& task) {
    for (const Sim& other : sims_) {
      if (&other == &taker || other.task.id != task.id) continue;
      EXPECT_EQ(state_->membership().Find(other.id), nullptr)
          << "task " << task.id << " handed to worker " << taker.id << " while worker "
          << other.id << " holds it";
    }
  }

  void Restart() {
    proto::CoordinatorSnapshot saved;
    state_->Save(&saved);
    proto::CoordinatorSnapshot parsed;
    ASSERT_TRUE(parsed.ParseFromString(saved.SerializeAsString()));
    std::unique_ptr<CoordinatorState> restored;
    Status s = CoordinatorState::Restore(state_->config(), parsed, now_, &restored);
    ASSERT_TRUE(s.ok()) << s.ToString();
    state_ = std::move(restored);
    ++restarts_;
  }

  std::mt19937 rng_;
  double now_ = 0;
  std::unique_ptr<CoordinatorState> state_;
  Sim sims_[8];
  std::vector<SimMaster> masters_;  // one per shard
  std::vector<bool> run_seen_;      // per shard
  uint64_t next_update_ = 0;
  std::vector<Accepted> accepted_;
  int restarts_ = 0;
  int zombie_rejections_ = 0;
  int releases_ = 0;
};

void ExpectTiles(std::vector<SampleRange> ranges, uint32_t samples, uint32_t epoch) {
  std::sort(ranges.begin(), ranges.end(),
            [](const SampleRange& a, const SampleRange& b) { return a.begin < b.begin; });
  uint32_t next = 0;
  for (const SampleRange& r : ranges) {
    ASSERT_EQ(r.begin, next) << "epoch " << epoch << ": "
                             << (r.begin < next ? "overlap" : "gap") << " at position " << next;
    next = r.end;
  }
  EXPECT_EQ(next, samples) << "epoch " << epoch;
}

// Runs `churn` to the job's end: every epoch is covered exactly once.
void ExpectEveryEpochOnce(Churn* churn) {
  ASSERT_TRUE(churn->Run(20000)) << "the job did not finish";
  const auto completed = churn->Completed();
  ASSERT_EQ(completed.size(), 4u);
  for (uint32_t e = 0; e < 3; ++e) ExpectTiles(completed.at(e), 1000, e);
  ExpectTiles(completed.at(3), 500, 3);
  EXPECT_EQ(churn->state().lifecycle().current().reason, "EpochsCompleted");
  // The last task completed: no store is away any more.
  EXPECT_FALSE(churn->state().data_unavailable());
  EXPECT_EQ(churn->state().counters().tasks_released, static_cast<uint64_t>(churn->releases()));
}

TEST(ExactlyOnceTest, CompletedTasksCoverEveryEpochOnceUnderChurnAndRestarts) {
  uint64_t reassigned = 0, lost = 0, stale = 0, expiries = 0, retrained = 0, master_restores = 0;
  int restarts = 0, zombies = 0, crashes = 0, releases = 0;
  for (uint32_t seed : {1u, 2u, 3u, 4u, 5u, 6u}) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    Churn churn(seed, /*master_shards=*/1);
    ExpectEveryEpochOnce(&churn);
    const CoordinatorCounters& c = churn.state().counters();
    reassigned += c.tasks_reassigned;
    lost += c.samples_lost;
    stale += c.stale_completions;
    expiries += c.expiries;
    retrained += c.tasks_retrained;
    master_restores += c.master_restores;
    restarts += churn.restarts();
    zombies += churn.zombie_rejections();
    crashes += churn.master_crashes();
    releases += churn.releases();
  }
  // The schedules did exercise what the test is about.
  EXPECT_GT(reassigned, 20u);
  EXPECT_GT(lost, 0u);
  EXPECT_GT(stale, 0u);
  EXPECT_GT(expiries, 10u);
  EXPECT_GT(restarts, 5);
  EXPECT_GT(zombies, 5);
  EXPECT_GT(crashes, 5);
  EXPECT_GT(retrained, 10u);
  EXPECT_GT(releases, 20);
  EXPECT_GE(master_restores, static_cast<uint64_t>(crashes) / 2);
  std::printf("reassigned %lu, samples lost %lu, stale completions %lu, expiries %lu, "
              "restarts %d, master crashes %d, tasks retrained %lu, released %d\n",
              static_cast<unsigned long>(reassigned), static_cast<unsigned long>(lost),
              static_cast<unsigned long>(stale), static_cast<unsigned long>(expiries), restarts,
              crashes, static_cast<unsigned long>(retrained), releases);
}

// Two masters crash and resume on their own: what one shard lost is
// retrained whole, and nothing only the other lost is.
TEST(ExactlyOnceTest, CompletedTasksCoverEveryEpochOnceWithTwoMasterShards) {
  uint64_t retrained = 0, master_restores = 0;
  int crashes[2] = {0, 0};
  for (uint32_t seed : {11u, 12u, 13u, 14u, 15u, 16u}) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    Churn churn(seed, /*master_shards=*/2);
    ExpectEveryEpochOnce(&churn);
    retrained += churn.state().counters().tasks_retrained;
    master_restores += churn.state().counters().master_restores;
    for (uint32_t shard = 0; shard < 2; ++shard) crashes[shard] += churn.shard_crashes(shard);
  }
  EXPECT_GT(crashes[0], 2);
  EXPECT_GT(crashes[1], 2);
  EXPECT_GT(retrained, 5u);
  EXPECT_GE(master_restores, static_cast<uint64_t>(crashes[0] + crashes[1]) / 2);
  std::printf("two shards: crashes %d and %d, master restores %lu, tasks retrained %lu\n",
              crashes[0], crashes[1], static_cast<unsigned long>(master_restores),
              static_cast<unsigned long>(retrained));
}

}  // namespace
}  // namespace gaptrain
