#include "services/coordinator/master_training.h"

#include <gtest/gtest.h>

namespace gaptrain {
namespace {

ShardTotals Totals(uint64_t parameters, uint64_t updates, double gap_sum, uint64_t gap_count,
                   double staleness_sum = 0, uint64_t staleness_count = 0) {
  return ShardTotals{parameters, updates, gap_sum, gap_count, staleness_sum, staleness_count};
}

TEST(MasterTrainingTest, TheGapIsAParametersMeanOverShards) {
  MasterTraining t(2);
  EXPECT_FALSE(t.mean_gap().has_value());
  EXPECT_FALSE(t.mean_staleness().has_value());
  // Shard 0 holds 3/4 of θ at a mean Gap of 2, shard 1 1/4 at 6: 3.
  t.Observe(10, 0, Totals(300, 50, 100.0, 50, 40.0, 50));
  t.Observe(10, 1, Totals(100, 50, 300.0, 50, 60.0, 50));
  ASSERT_TRUE(t.mean_gap().has_value());
  EXPECT_DOUBLE_EQ(*t.mean_gap(), 3.0);
  EXPECT_DOUBLE_EQ(*t.mean_staleness(), 1.0);
  t.Observe(99, 7, Totals(1, 1, 1e9, 1));  // no such shard
  EXPECT_DOUBLE_EQ(*t.mean_gap(), 3.0);
}

TEST(MasterTrainingTest, UpdatesPerSecondIsTheSlowestShardsOverTheWindow) {
  MasterTraining t(2);
  t.Observe(0, 0, Totals(1, 0, 0, 0));
  t.Observe(0, 1, Totals(1, 0, 0, 0));
  EXPECT_EQ(t.updates_per_second(), 0) << "one report each";
  for (int s = 1; s <= 20; ++s) {
    t.Observe(s, 0, Totals(1, 100u * s, 0, 0));  // 100/s
    t.Observe(s, 1, Totals(1, 90u * s, 0, 0));   // 90/s: behind
  }
  EXPECT_DOUBLE_EQ(t.updates_per_second(), 90.0);
  // Shard 1 restarts: its run counts from 0 again; until it has a second
  // report the job's rate is unknown, then it is the new run's.
  t.Observe(21, 1, Totals(1, 5, 0, 0));
  EXPECT_EQ(t.updates_per_second(), 0);
  t.Observe(23, 1, Totals(1, 105, 0, 0));
  EXPECT_DOUBLE_EQ(t.updates_per_second(), 50.0);
  EXPECT_EQ(t.totals(1).updates, 105u);
}

TEST(MasterTrainingTest, TheWindowForgetsOldReports) {
  MasterTraining t(1);
  t.Observe(0, 0, Totals(1, 0, 0, 0));
  t.Observe(100, 0, Totals(1, 10000, 0, 0));  // 100/s long ago
  for (int s = 101; s <= 130; ++s) t.Observe(s, 0, Totals(1, 10000 + 10u * (s - 100), 0, 0));
  EXPECT_NEAR(t.updates_per_second(), 10.0, 1e-9) << "the last 10 s, not since the start";
}

}  // namespace
}  // namespace gaptrain
