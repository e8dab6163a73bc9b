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

}  // namespace
}  // namespace gaptrain
