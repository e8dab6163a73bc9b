// MasterTraining: the job's training as its masters report it, one shard
// at a time, in their SetMembers replies (proto MasterTotals: a run's
// updates, Gap and staleness sums since it started), put together as the
// coordinator's status shows it (CoordinatorStatusResponse.masters,
// mean_gap, mean_staleness, updates_per_second), so readers of the job's
// progress need no master's /metrics, however many shards hold θ.
//
// What callers may rely on:
//   - mean_gap() is Σ_shards parameters·(gap_sum/gap_count) / Σ parameters
//     over the shards that measured a Gap: the mean Gap of one parameter
//     of θ, as one master would report it; none before any shard has one.
//     mean_staleness() is the mean over all shards' pushes.
//   - updates_per_second() is the slowest shard's rate over its reports of
//     the last kWindowSeconds (every push reaches every shard, so the
//     slowest one paces the job's version); 0 until a shard has two
//     reports a second apart. A shard whose updates go back (a new run)
//     starts its window again.
//   - Nothing here is saved: a restarted coordinator learns it again from
//     the next replies (within a second). Not thread-safe.

#ifndef GAPTRAIN_SERVICES_COORDINATOR_MASTER_TRAINING_H_
#define GAPTRAIN_SERVICES_COORDINATOR_MASTER_TRAINING_H_

#include <cstdint>
#include <deque>
#include <optional>
#include <utility>
#include <vector>

namespace gaptrain {

// One shard's run's training so far (proto MasterTotals).
struct ShardTotals {
  uint64_t parameters = 0;
  uint64_t updates = 0;
  double gap_sum = 0;
  uint64_t gap_count = 0;
  double staleness_sum = 0;
  uint64_t staleness_count = 0;
};

class MasterTraining {
 public:
  static constexpr double kWindowSeconds = 10;

  explicit MasterTraining(uint32_t shards) : shards_(shards) {}

  // Shard `shard`'s totals as it answered at `now` (seconds); a shard
  // beyond the job's is ignored.
  void Observe(double now, uint32_t shard, const ShardTotals& totals);

  const ShardTotals& totals(uint32_t shard) const { return shards_.at(shard).totals; }
  std::optional<double> mean_gap() const;
  std::optional<double> mean_staleness() const;
  double updates_per_second() const;

 private:
  struct Shard {
    ShardTotals totals;
    std::deque<std::pair<double, uint64_t>> reports;  // (time, updates), oldest first
  };
  std::vector<Shard> shards_;
};

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_COORDINATOR_MASTER_TRAINING_H_
