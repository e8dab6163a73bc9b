#include "services/coordinator/task_queue.h"

#include <gtest/gtest.h>

namespace gaptrain {
namespace {

TEST(TaskQueueTest, TasksCutTheEpochIntoConsecutiveRanges) {
  for (uint32_t samples : {1u, 99u, 100u, 101u, 60000u}) {
    for (uint32_t per_task : {1u, 7u, 100u, 25600u}) {
      if (per_task > samples * 2) continue;
      TaskQueue q(3, samples, per_task, 1000);
      uint32_t next = 0;
      for (uint32_t i = 0; i < q.num_tasks(); ++i) {
        DataTask t = q.Task(i);
        EXPECT_EQ(t.id, 1000u + i + 1);
        EXPECT_EQ(t.epoch, 3u);
        EXPECT_EQ(t.range.begin, next);
        EXPECT_GT(t.range.size(), 0u);
        EXPECT_LE(t.range.size(), per_task);
        next = t.range.end;
      }
      EXPECT_EQ(next, samples) << samples << " / " << per_task;
      EXPECT_EQ(q.queued(), q.num_tasks());
    }
  }
}

TEST(TaskQueueTest, IndexOfAcceptsOnlyThisEpochsIds) {
  TaskQueue q(1, 100, 30, 4);  // 4 tasks: ids 5..8
  uint32_t index = 99;
  EXPECT_FALSE(q.IndexOf(0, &index));
  EXPECT_FALSE(q.IndexOf(4, &index));
  EXPECT_TRUE(q.IndexOf(5, &index));
  EXPECT_EQ(index, 0u);
  EXPECT_TRUE(q.IndexOf(8, &index));
  EXPECT_EQ(index, 3u);
  EXPECT_FALSE(q.IndexOf(9, &index));
}

TEST(TaskQueueTest, AssignCompleteAndRequeueToTheFront) {
  TaskQueue q(0, 40, 10, 0);
  DataTask a, b, c;
  ASSERT_TRUE(q.Assign(7, &a));
  ASSERT_TRUE(q.Assign(8, &b));
  EXPECT_EQ(a.index, 0u);
  EXPECT_EQ(b.index, 1u);
  EXPECT_EQ(q.state(0), TaskQueue::State::kInFlight);
  EXPECT_EQ(q.worker(0), 7u);
  EXPECT_EQ(q.in_flight(), 2u);

  q.Complete(a.index);
  EXPECT_EQ(q.state(0), TaskQueue::State::kDone);
  EXPECT_EQ(q.worker(0), 7u);
  EXPECT_EQ(q.samples_done(), 10u);

  q.Requeue(b.index);  // its worker left: back to the front
  EXPECT_EQ(q.QueuedIndices(), (std::vector<uint32_t>{1, 2, 3}));
  ASSERT_TRUE(q.Assign(9, &c));
  EXPECT_EQ(c.index, 1u);
  EXPECT_EQ(q.worker(1), 9u);

  DataTask d;
  ASSERT_TRUE(q.Assign(9, &d));
  ASSERT_TRUE(q.Assign(9, &d));
  EXPECT_FALSE(q.Assign(9, &d));
  EXPECT_EQ(q.queued(), 0u);
  EXPECT_FALSE(q.all_done());
  q.Complete(1);
  q.Complete(2);
  q.Complete(3);
  EXPECT_TRUE(q.all_done());
  EXPECT_EQ(q.samples_done(), 40u);
}

TEST(TaskQueueTest, RestoreNeedsEveryTaskInExactlyOnePlace) {
  TaskQueue q(0, 50, 10, 0);  // 5 tasks
  EXPECT_TRUE(q.Restore({3, 4}, {{1, 7}}, {{0, 7}, {2, 8}}).ok());
  EXPECT_EQ(q.QueuedIndices(), (std::vector<uint32_t>{3, 4}));
  EXPECT_EQ(q.state(1), TaskQueue::State::kInFlight);
  EXPECT_EQ(q.worker(1), 7u);
  EXPECT_EQ(q.done(), 2u);
  EXPECT_EQ(q.samples_done(), 20u);

  TaskQueue r(0, 50, 10, 0);
  EXPECT_EQ(r.Restore({3, 4}, {{1, 7}}, {{0, 7}}).code(), Status::Code::kDataLoss);  // 2 missing
  EXPECT_EQ(r.Restore({3, 4, 2}, {{1, 7}}, {{0, 7}, {2, 8}}).code(),
            Status::Code::kDataLoss);  // 2 twice
  EXPECT_EQ(r.Restore({3, 4, 9}, {{1, 7}}, {{0, 7}, {2, 8}}).code(),
            Status::Code::kDataLoss);  // beyond the epoch
  EXPECT_EQ(r.queued(), 5u);           // unchanged by the failures
}

}  // namespace
}  // namespace gaptrain
