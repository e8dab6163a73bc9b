#include "services/coordinator/unconfirmed_tasks.h"

#include <gtest/gtest.h>

namespace gaptrain {
namespace {

using Fate = UnconfirmedTasks::Fate;

TEST(UnconfirmedTasksTest, PositionsOfTheCurrentRunArePendingUntilItsCheckpointHoldsThem) {
  UnconfirmedTasks u;
  EXPECT_TRUE(u.Observe({10, 0, 0}, 0).new_run);
  EXPECT_EQ(u.Judge({{10, 5}}), Fate::kPending);
  u.Add(1, {{10, 5}});
  u.Add(2, {{10, 9}});
  const UnconfirmedTasks::Observation o = u.Observe({10, 0, 0}, 7);
  EXPECT_FALSE(o.new_run);
  EXPECT_TRUE(o.changed);
  EXPECT_TRUE(o.lost.empty());
  EXPECT_EQ(u.size(), 1u) << "task 1 is in the checkpoint at 7";
  EXPECT_EQ(u.Judge({{10, 7}}), Fate::kDurable);
  EXPECT_FALSE(u.Observe({10, 0, 0}, 7).changed) << "nothing new";
}

TEST(UnconfirmedTasksTest, ARunThatResumedFromAnOlderCheckpointLosesWhatCameAfterIt) {
  UnconfirmedTasks u;
  u.Observe({10, 0, 0}, 0);
  u.Add(1, {{10, 5}});
  u.Add(2, {{10, 9}});
  u.Add(3, {{10, 4}, {10, 12}});
  // Run 20 restored run 10's checkpoint at 8.
  const UnconfirmedTasks::Observation o = u.Observe({20, 10, 8}, 0);
  EXPECT_TRUE(o.new_run);
  EXPECT_EQ(o.lost, (std::vector<uint64_t>{2, 3}));
  EXPECT_EQ(u.size(), 0u) << "task 1 is in the checkpoint run 20 resumed from";
  EXPECT_EQ(u.Judge({{10, 8}}), Fate::kDurable);
  EXPECT_EQ(u.Judge({{10, 9}}), Fate::kLost) << "a completion arriving late";
  EXPECT_EQ(u.Judge({{20, 9}}), Fate::kPending);
  EXPECT_EQ(u.Judge({{10, 3}, {20, 9}}), Fate::kPending);
  EXPECT_EQ(u.Judge({{10, 9}, {20, 9}}), Fate::kLost) << "any lost position loses the task";
}

TEST(UnconfirmedTasksTest, AFreshStartAfterACrashLosesEverything) {
  UnconfirmedTasks u;
  u.Observe({10, 0, 0}, 0);
  u.Add(1, {{10, 1}});
  const UnconfirmedTasks::Observation o = u.Observe({20, 0, 0}, 0);
  EXPECT_EQ(o.lost, (std::vector<uint64_t>{1}));
}

TEST(UnconfirmedTasksTest, PositionsOfARunNotHeardOfYetWaitAndOldAnswersAreIgnored) {
  UnconfirmedTasks u;
  u.Observe({10, 0, 0}, 0);
  // A worker already pushed to run 30, which the feed has not reached.
  EXPECT_EQ(u.Judge({{30, 2}}), Fate::kPending);
  u.Add(1, {{30, 2}});
  u.Add(2, {{10, 6}});
  // A late answer from a run older than the newest changes nothing.
  u.Observe({30, 10, 5}, 0);
  EXPECT_FALSE(u.Observe({10, 0, 0}, 100).changed);
  EXPECT_EQ(u.master().id, 30u);
  EXPECT_EQ(u.size(), 1u);
  EXPECT_EQ(u.tasks().count(1), 1u);
}

TEST(UnconfirmedTasksTest, PositionsWithoutARunCountAsDurable) {
  UnconfirmedTasks u;
  EXPECT_EQ(u.Judge({}), Fate::kDurable);
  EXPECT_EQ(u.Judge({{0, 100}}), Fate::kDurable);
  // Before any answer, every numbered run is one the coordinator has not
  // heard of: pending.
  EXPECT_EQ(u.Judge({{5, 1}}), Fate::kPending);
  // An answer from a master without runs changes nothing.
  EXPECT_FALSE(u.Observe({0, 0, 0}, 10).changed);
}

TEST(UnconfirmedTasksTest, EachShardsPositionsAreJudgedAgainstThatShardsRunsAlone) {
  UnconfirmedTasks u;
  // Shards number their runs independently: both start as run 10.
  EXPECT_TRUE(u.Observe(0, {10, 0, 0}, 0).new_run);
  EXPECT_TRUE(u.Observe(1, {10, 0, 0}, 0).new_run);
  u.Add(1, {{10, 5, 0}, {10, 5, 1}});
  u.Add(2, {{10, 9, 0}, {10, 9, 1}});
  u.Add(3, {{10, 9, 0}, {10, 6, 1}});
  // Shard 0's checkpoint at 9 holds every shard-0 position, but each task
  // waits for shard 1's too.
  UnconfirmedTasks::Observation o = u.Observe(0, {10, 0, 0}, 9);
  EXPECT_TRUE(o.changed);
  EXPECT_EQ(o.durable, 0u);
  EXPECT_EQ(u.size(), 3u);
  EXPECT_EQ(u.durable_version(0), 9u);
  EXPECT_EQ(u.durable_version(1), 0u);
  // Shard 1 checkpoints at 5: task 1 is durable on both.
  o = u.Observe(1, {10, 0, 0}, 5);
  EXPECT_EQ(o.durable, 1u);
  EXPECT_TRUE(o.lost.empty());
  // Shard 1 restarts from its checkpoint at 7 (written since): task 2's
  // shard-1 updates are gone, task 3's are in it.
  o = u.Observe(1, {20, 10, 7}, 0);
  EXPECT_TRUE(o.new_run);
  EXPECT_EQ(o.lost, (std::vector<uint64_t>{2}));
  EXPECT_EQ(o.durable, 1u) << "task 3: in shard 0's checkpoint and in the one shard 1 resumed";
  EXPECT_EQ(u.size(), 0u);
  EXPECT_EQ(u.master(0).id, 10u) << "shard 0's run is untouched";
  EXPECT_EQ(u.master(1).id, 20u);
  // A late answer from shard 1's old run is ignored; shard 0's run 10 is
  // still shard 0's newest.
  EXPECT_FALSE(u.Observe(1, {10, 0, 0}, 100).changed);
  EXPECT_EQ(u.Judge({{10, 9, 1}}), Fate::kLost);
  EXPECT_EQ(u.Judge({{10, 9, 0}}), Fate::kDurable);
}

TEST(UnconfirmedTasksTest, AShardZeroRestartLosesNothingHeldByItsCheckpoint) {
  UnconfirmedTasks u;
  u.Observe(0, {10, 0, 0}, 0);
  u.Observe(1, {10, 0, 0}, 0);
  u.Add(1, {{10, 4, 0}, {10, 4, 1}});
  u.Add(2, {{10, 8, 0}, {10, 8, 1}});
  u.Observe(0, {10, 0, 0}, 6);
  // Shard 0 restarts from its checkpoint at 6: task 2's shard-0 updates
  // are lost, task 1's are not, and task 1 still waits for shard 1.
  const UnconfirmedTasks::Observation o = u.Observe(0, {20, 10, 6}, 0);
  EXPECT_EQ(o.lost, (std::vector<uint64_t>{2}));
  EXPECT_EQ(o.durable, 0u);
  ASSERT_EQ(u.size(), 1u);
  EXPECT_EQ(u.tasks().count(1), 1u);
  EXPECT_EQ(u.Observe(1, {10, 0, 0}, 4).durable, 1u);
}

TEST(UnconfirmedTasksTest, APositionOnceDurableStaysSoWhileTheTaskWaitsForAnotherShard) {
  UnconfirmedTasks u;
  u.Observe(0, {10, 0, 0}, 0);
  u.Observe(1, {10, 0, 0}, 0);
  u.Add(1, {{10, 5, 0}, {10, 5, 1}});
  // Shard 1 resumes run 10's checkpoint at 6 (t1 held there), then
  // checkpoints run 11 and resumes that: run 12 never names run 10, yet
  // run 10's position 5 is in its state.
  EXPECT_TRUE(u.Observe(1, {11, 10, 6}, 0).lost.empty());
  EXPECT_TRUE(u.Observe(1, {11, 10, 6}, 9).lost.empty());
  EXPECT_TRUE(u.Observe(1, {12, 11, 9}, 0).lost.empty());
  ASSERT_EQ(u.size(), 1u);
  EXPECT_EQ(u.tasks().at(1).size(), 1u) << "only shard 0's position is left to confirm";
  EXPECT_EQ(u.Observe(0, {10, 0, 0}, 5).durable, 1u);
}

TEST(UnconfirmedTasksTest, PositionsOfAShardNeverHeardOfWaitAndOldWorkersMeanShardZero) {
  UnconfirmedTasks u;
  u.Observe({10, 0, 0}, 5);  // one master: shard 0
  EXPECT_EQ(u.master(0).id, 10u);
  EXPECT_EQ(u.master(3).id, 0u);
  EXPECT_EQ(u.Judge({{10, 5}}), Fate::kDurable) << "no shard: shard 0";
  EXPECT_EQ(u.Judge({{10, 5, 3}}), Fate::kPending);
  EXPECT_EQ(u.Judge({{0, 5, 3}}), Fate::kDurable) << "no run: as before runs";
  EXPECT_EQ(u.shards().size(), 1u);
}

}  // namespace
}  // namespace gaptrain
