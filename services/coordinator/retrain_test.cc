// Training lost in a master restore is done again: completions say where
// their pushes landed, a restore to an older version queues the tasks it
// lost again (in the current epoch or, for earlier epochs, in the retrain
// queue ahead of new work), the job ends only when they are redone, and
// all of it survives a coordinator restart.

#include <gtest/gtest.h>

#include "services/coordinator/coordinator_state.h"

namespace gaptrain {
namespace {

// 1000 samples in tasks of 100: 10 tasks per epoch, two epochs.
CoordinatorConfig Config() {
  CoordinatorConfig c;
  c.job_name = "retrain";
  c.train_samples = 1000;
  c.samples_per_task = 100;
  c.batch_size = 10;
  c.epochs = 2;
  c.min_trainers = 1;
  c.lease_seconds = 10;
  c.no_worker_timeout_seconds = 0;
  c.master_timeout_seconds = 0;
  return c;
}

class RetrainTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(CoordinatorState::Create(config_, 0, &s_).ok());
    RegisterResult r;
    ASSERT_TRUE(s_->Register(0, "pod-a", WorkerRole::kTrainer, 0, &r).ok());
    a_ = r.id;
    ASSERT_TRUE(s_->Register(0, "pod-b", WorkerRole::kTrainer, 0, &r).ok());
    b_ = r.id;
    s_->ObserveMaster(0, {10, 0, 0}, 0, 0);
  }

  DataTask Take(WorkerId w) {
    NextTaskResult r;
    EXPECT_TRUE(s_->NextTask(0, w, &r).ok());
    EXPECT_EQ(r.outcome, TaskOutcome::kAssigned) << r.reason;
    return r.task;
  }

  CompleteTaskResult Complete(WorkerId w, const DataTask& task, uint64_t run, uint64_t version,
                              uint32_t samples_retrained = 0) {
    return Complete(w, task, {{run, version}}, samples_retrained);
  }
  CompleteTaskResult Complete(WorkerId w, const DataTask& task,
                              std::vector<MasterPosition> reached,
                              uint32_t samples_retrained = 0) {
    TaskCompletion c;
    c.reached = std::move(reached);
    c.samples_retrained = samples_retrained;
    CompleteTaskResult r;
    Status st = s_->CompleteTask(0, w, task.id, c, &r);
    EXPECT_TRUE(st.ok()) << st.ToString();
    return r;
  }

  // Takes and completes the next task with worker a at (run, version).
  DataTask Train(uint64_t run, uint64_t version) {
    const DataTask t = Take(a_);
    Complete(a_, t, run, version);
    return t;
  }

  void RestartCoordinator() {
    proto::CoordinatorSnapshot saved;
    s_->Save(&saved);
    proto::CoordinatorSnapshot parsed;
    ASSERT_TRUE(parsed.ParseFromString(saved.SerializeAsString()));
    std::unique_ptr<CoordinatorState> restored;
    Status st = CoordinatorState::Restore(config_, parsed, 1, &restored);
    ASSERT_TRUE(st.ok()) << st.ToString();
    s_ = std::move(restored);
  }

  CoordinatorConfig config_ = Config();
  std::unique_ptr<CoordinatorState> s_;
  WorkerId a_ = 0, b_ = 0;
};

TEST_F(RetrainTest, TasksOfTheCurrentEpochWhoseUpdatesARestoreLostAreQueuedAgainAtTheFront) {
  const DataTask t1 = Train(10, 5);
  const DataTask t2 = Train(10, 9);
  const DataTask t3 = Take(b_);  // in flight during the restart
  EXPECT_EQ(s_->Describe(0).tasks_unconfirmed, 2u);

  // Run 20 resumed from run 10's checkpoint at 7: t2's updates are gone.
  const MasterObservation o = s_->ObserveMaster(0, {20, 10, 7}, 7, 0);
  EXPECT_TRUE(o.new_run);
  EXPECT_TRUE(o.restore);
  ASSERT_EQ(o.retrained.size(), 1u);
  EXPECT_EQ(o.retrained[0].id, t2.id);
  const JobStatus st = s_->Describe(0);
  EXPECT_EQ(st.tasks_done, 1u);
  EXPECT_EQ(st.tasks_unconfirmed, 0u) << "t1 is in the checkpoint run 20 resumed from";
  EXPECT_EQ(st.counters.tasks_retrained, 1u);
  EXPECT_EQ(st.counters.samples_retrained, 100u);
  EXPECT_EQ(st.counters.master_restores, 1u);
  EXPECT_EQ(st.master_version, 7u) << "the version went back with the master";

  // The lost task is the next one handed out; t1 stays done.
  EXPECT_EQ(Take(a_).id, t2.id);
  Complete(a_, t2, 20, 8);
  // The worker holding t3 noticed the restart and retrained 30 samples of
  // it itself: counted too.
  Complete(b_, t3, 20, 9, /*samples_retrained=*/30);
  EXPECT_EQ(s_->counters().samples_retrained, 130u);
  EXPECT_EQ(s_->tasks().done(), 3u);
  EXPECT_EQ(t1.epoch, 0u);
}

TEST_F(RetrainTest, ACompletionWhoseUpdatesAreKnownLostIsQueuedAgainAtOnce) {
  const DataTask t = Take(a_);
  s_->ObserveMaster(0, {20, 10, 4}, 4, 0);
  // The worker pushed its last gradient to run 10 at version 6 before it
  // died, and completes only now.
  const CompleteTaskResult r = Complete(a_, t, 10, 6);
  EXPECT_TRUE(r.retrain);
  EXPECT_EQ(s_->tasks().done(), 0u);
  EXPECT_EQ(s_->counters().tasks_retrained, 1u);
  EXPECT_EQ(Take(b_).id, t.id);
  // A retry of the lost reply is still answered as completed once.
  CompleteTaskResult again;
  ASSERT_TRUE(s_->CompleteTask(0, a_, t.id, TaskCompletion{{{10, 6}}, 0}, &again).ok());
  EXPECT_TRUE(again.already_completed);
  EXPECT_EQ(s_->counters().tasks_retrained, 1u);
}

TEST_F(RetrainTest, EarlierEpochsAreRetrainedFirstAndTheJobWaitsForThem) {
  for (uint64_t v = 1; v <= 10; ++v) Train(10, v);
  ASSERT_EQ(s_->tasks().epoch(), 1u);
  // Run 20 resumed at 6: epoch 0's last four tasks are lost.
  const MasterObservation o = s_->ObserveMaster(0, {20, 10, 6}, 6, 0);
  ASSERT_EQ(o.retrained.size(), 4u);
  EXPECT_EQ(s_->retrain().queued(), 4u);
  EXPECT_EQ(s_->Describe(0).tasks_retrain_queued, 4u);
  EXPECT_EQ(s_->tasks().epoch(), 1u) << "the epoch does not go back";

  // Before new work: epoch 0's tasks 7..10, with their ranges.
  const DataTask first = Take(a_);
  EXPECT_EQ(first.epoch, 0u);
  EXPECT_EQ(first.id, 7u);
  EXPECT_EQ(first.range.begin, 600u);
  EXPECT_EQ(first.range.end, 700u);
  // A heartbeat about a retrain task is checked against its size.
  WorkerProgress p;
  p.task_id = first.id;
  p.samples_done = 100;
  uint64_t held = 0;
  ASSERT_TRUE(s_->Heartbeat(0, a_, p, &held).ok());
  EXPECT_EQ(held, first.id);
  p.samples_done = 101;
  EXPECT_EQ(s_->Heartbeat(0, a_, p, &held).code(), Status::Code::kInvalidArgument);
  Complete(a_, first, 20, 7);
  for (int i = 0; i < 2; ++i) {
    const DataTask t = Take(a_);
    EXPECT_EQ(t.epoch, 0u);
    Complete(a_, t, 20, 8 + i);
  }
  const DataTask last_retrain = Take(b_);
  EXPECT_EQ(last_retrain.id, 10u);

  // Epoch 1 completes meanwhile: the job is not done until task 10 is.
  for (uint64_t v = 11; v <= 20; ++v) {
    const DataTask t = Take(a_);
    EXPECT_EQ(t.epoch, 1u);
    Complete(a_, t, 20, v);
  }
  EXPECT_EQ(s_->phase(), JobPhase::kRunning);
  NextTaskResult wait;
  ASSERT_TRUE(s_->NextTask(0, a_, &wait).ok());
  EXPECT_EQ(wait.outcome, TaskOutcome::kEpochFinishing) << wait.reason;
  Complete(b_, last_retrain, 20, 21);
  EXPECT_EQ(s_->phase(), JobPhase::kSucceeded);
  EXPECT_EQ(s_->lifecycle().current().reason, "EpochsCompleted");
  EXPECT_EQ(s_->counters().tasks_retrained, 4u);
}

TEST_F(RetrainTest, ARetrainTaskOfADepartedWorkerGoesBackToTheFrontOfTheRetrainQueue) {
  for (uint64_t v = 1; v <= 10; ++v) Train(10, v);
  s_->ObserveMaster(0, {20, 10, 8}, 8, 0);  // tasks 9 and 10 lost
  const DataTask t = Take(b_);
  EXPECT_EQ(t.id, 9u);
  bool gone = false;
  ASSERT_TRUE(s_->Leave(0, b_, LeaveReason::kPreempted, &gone).ok());
  EXPECT_EQ(s_->counters().tasks_reassigned, 1u);
  EXPECT_EQ(Take(a_).id, 9u);
}

TEST_F(RetrainTest, EverythingSurvivesACoordinatorRestart) {
  for (uint64_t v = 1; v <= 10; ++v) Train(10, v);
  Train(10, 11);  // epoch 1, task 11: pending in run 10
  s_->ObserveMaster(0, {20, 10, 11}, 11, 0);  // resumed at 11: nothing lost
  EXPECT_EQ(s_->counters().tasks_retrained, 0u);
  Train(20, 12);  // task 12, pending in run 20
  s_->ObserveMaster(0, {30, 20, 11}, 11, 0);  // task 12 lost
  ASSERT_EQ(s_->tasks().done(), 1u);
  const DataTask held = Take(b_);
  EXPECT_EQ(held.id, 12u);
  Complete(a_, Take(a_), 30, 13);  // task 13, pending in run 30

  RestartCoordinator();
  EXPECT_EQ(s_->unconfirmed().master().id, 30u);
  EXPECT_EQ(s_->unconfirmed().size(), 1u);
  EXPECT_EQ(s_->counters().tasks_retrained, 1u);
  EXPECT_EQ(s_->counters().master_restores, 2u);
  // b resumes its task; a restore of run 30 to 12 loses task 13 after the
  // restart just as before it.
  RegisterResult r;
  ASSERT_TRUE(s_->Register(1, "pod-b", WorkerRole::kTrainer, b_, &r).ok());
  EXPECT_TRUE(r.resumed);
  EXPECT_EQ(r.task.id, 12u);
  const MasterObservation o = s_->ObserveMaster(1, {40, 30, 12}, 12, 0);
  ASSERT_EQ(o.retrained.size(), 1u);
  EXPECT_EQ(o.retrained[0].id, 13u);
}

TEST_F(RetrainTest, ARetrainTaskHeldAcrossARestartStaysWithItsHolder) {
  for (uint64_t v = 1; v <= 10; ++v) Train(10, v);
  s_->ObserveMaster(0, {20, 10, 8}, 8, 0);
  const DataTask t = Take(b_);
  ASSERT_EQ(t.epoch, 0u);
  RestartCoordinator();
  EXPECT_EQ(s_->retrain().in_flight(), 1u);
  EXPECT_EQ(s_->retrain().queued(), 1u);
  NextTaskResult again;
  ASSERT_TRUE(s_->NextTask(1, b_, &again).ok());
  EXPECT_EQ(again.task.id, t.id) << "the same task, never a second one";
  EXPECT_EQ(Take(a_).id, 10u);
}

TEST_F(RetrainTest, RestoreRefusesInconsistentRetrainEntries) {
  for (uint64_t v = 1; v <= 10; ++v) Train(10, v);
  s_->ObserveMaster(0, {20, 10, 8}, 8, 0);
  Take(b_);  // task 9, held by b
  proto::CoordinatorSnapshot saved;
  s_->Save(&saved);
  std::unique_ptr<CoordinatorState> restored;

  proto::CoordinatorSnapshot current_epoch = saved;
  current_epoch.mutable_retrain(0)->set_task_id(11);  // epoch 1's: not an earlier epoch
  EXPECT_EQ(CoordinatorState::Restore(Config(), current_epoch, 1, &restored).code(),
            Status::Code::kDataLoss);

  proto::CoordinatorSnapshot wrong_holder = saved;
  for (auto& r : *wrong_holder.mutable_retrain()) {
    if (r.holder() != 0) r.set_holder(a_);
  }
  EXPECT_EQ(CoordinatorState::Restore(Config(), wrong_holder, 1, &restored).code(),
            Status::Code::kDataLoss);

  proto::CoordinatorSnapshot twice = saved;
  *twice.add_retrain() = twice.retrain(0);
  EXPECT_EQ(CoordinatorState::Restore(Config(), twice, 1, &restored).code(),
            Status::Code::kDataLoss);

  proto::CoordinatorSnapshot bad_unconfirmed = saved;
  bad_unconfirmed.add_unconfirmed()->set_task_id(999);
  EXPECT_EQ(CoordinatorState::Restore(Config(), bad_unconfirmed, 1, &restored).code(),
            Status::Code::kDataLoss);

  EXPECT_TRUE(CoordinatorState::Restore(Config(), saved, 1, &restored).ok());
}

TEST_F(RetrainTest, AFinishedJobIgnoresLaterRestores) {
  for (uint64_t v = 1; v <= 20; ++v) Train(10, v);
  ASSERT_EQ(s_->phase(), JobPhase::kSucceeded);
  const MasterObservation o = s_->ObserveMaster(0, {20, 10, 1}, 1, 0);
  EXPECT_TRUE(o.retrained.empty());
  EXPECT_EQ(s_->phase(), JobPhase::kSucceeded);
}

// θ in two shards, each a master with runs of its own: both start as run
// 10, and every task's pushes reach both.
class ShardedRetrainTest : public RetrainTest {
 protected:
  void SetUp() override {
    config_.master_shards = 2;
    RetrainTest::SetUp();
    s_->ObserveMaster(0, 1, {10, 0, 0}, 0, 0);
  }

  // Takes the next task with worker a and completes it at `version` of
  // run 10 of both shards.
  DataTask TrainBoth(uint64_t version) {
    const DataTask t = Take(a_);
    Complete(a_, t, {{10, version, 0}, {10, version, 1}});
    return t;
  }
};

TEST_F(ShardedRetrainTest, AShardRestoredFromBelowATasksPositionThereHasTheTaskRetrained) {
  const DataTask t1 = TrainBoth(5);
  const DataTask t2 = TrainBoth(9);
  s_->ObserveMaster(0, 0, {10, 0, 0}, 9, 9);  // shard 0's checkpoint holds both
  EXPECT_EQ(s_->Describe(0).tasks_unconfirmed, 2u) << "shard 1 holds neither on disk";

  // Shard 1 resumed from its checkpoint at 7: t2's updates there are gone,
  // t1's are in it.
  const MasterObservation o = s_->ObserveMaster(0, 1, {20, 10, 7}, 7, 0);
  EXPECT_TRUE(o.restore);
  ASSERT_EQ(o.retrained.size(), 1u);
  EXPECT_EQ(o.retrained[0].id, t2.id);
  const JobStatus st = s_->Describe(0);
  EXPECT_EQ(st.tasks_unconfirmed, 0u) << "t1 is durable on both shards";
  EXPECT_EQ(st.tasks_done, 1u);
  EXPECT_EQ(st.counters.tasks_retrained, 1u);
  EXPECT_EQ(st.counters.master_restores, 1u);
  EXPECT_EQ(s_->unconfirmed().master(0).id, 10u) << "shard 0 did not restart";
  // Trained again whole: shard 0 applies t2's part a second time.
  EXPECT_EQ(Take(b_).id, t2.id);
  EXPECT_EQ(t1.epoch, 0u);
}

TEST_F(ShardedRetrainTest, AShardZeroRestartKeepsTasksItsCheckpointHolds) {
  const DataTask t1 = TrainBoth(4);
  const DataTask t2 = TrainBoth(8);
  s_->ObserveMaster(0, 0, {10, 0, 0}, 8, 6);
  s_->ObserveMaster(0, 1, {10, 0, 0}, 8, 8);  // shard 1 holds both on disk
  EXPECT_EQ(s_->Describe(0).tasks_unconfirmed, 1u) << "t2 waits for shard 0's checkpoint";
  // Shard 0 resumes from its checkpoint at 6: t2's shard-0 part is lost.
  MasterObservation o = s_->ObserveMaster(0, 0, {20, 10, 6}, 6, 0);
  ASSERT_EQ(o.retrained.size(), 1u);
  EXPECT_EQ(o.retrained[0].id, t2.id);
  EXPECT_EQ(s_->Describe(0).tasks_unconfirmed, 0u);
  // A restart of shard 1 from its checkpoint at 8 now loses nothing: t1
  // was durable on both, and t2 is queued already.
  o = s_->ObserveMaster(0, 1, {20, 10, 8}, 8, 0);
  EXPECT_TRUE(o.restore);
  EXPECT_TRUE(o.retrained.empty());
  EXPECT_EQ(s_->counters().master_restores, 2u);
  EXPECT_EQ(s_->tasks().done(), 1u);
  EXPECT_EQ(t1.id, 1u);
}

TEST_F(ShardedRetrainTest, ACompletionIsConfirmedOnlyWhenEveryShardItReachedHoldsIt) {
  TrainBoth(5);
  s_->ObserveMaster(0, 1, {10, 0, 0}, 5, 5);
  EXPECT_EQ(s_->Describe(0).tasks_unconfirmed, 1u);
  s_->ObserveMaster(0, 0, {10, 0, 0}, 5, 4);
  EXPECT_EQ(s_->Describe(0).tasks_unconfirmed, 1u) << "shard 0's checkpoint is at 4";
  s_->ObserveMaster(0, 0, {10, 0, 0}, 6, 5);
  EXPECT_EQ(s_->Describe(0).tasks_unconfirmed, 0u);
  // A completion from a worker without shards speaks of shard 0 alone.
  const DataTask old = Take(a_);
  Complete(a_, old, 10, 5);
  EXPECT_EQ(s_->Describe(0).tasks_unconfirmed, 0u) << "in shard 0's checkpoint at 5";
}

TEST_F(ShardedRetrainTest, ShardRunsSurviveACoordinatorRestart) {
  const DataTask t1 = TrainBoth(5);
  // Shard 1 resumed from its checkpoint at 5: t1 is safe there.
  s_->ObserveMaster(0, 1, {30, 10, 5}, 5, 0);
  const DataTask t2 = Take(a_);
  Complete(a_, t2, {{10, 9, 0}, {30, 9, 1}});
  s_->ObserveMaster(0, 1, {30, 10, 5}, 9, 9);
  ASSERT_EQ(s_->Describe(0).tasks_unconfirmed, 2u) << "both wait for shard 0";

  RestartCoordinator();
  EXPECT_EQ(s_->unconfirmed().master(0).id, 10u);
  EXPECT_EQ(s_->unconfirmed().master(1).id, 30u);
  EXPECT_EQ(s_->unconfirmed().master(1).restored_from_version, 5u);
  EXPECT_EQ(s_->unconfirmed().durable_version(1), 9u);
  EXPECT_EQ(s_->counters().master_restores, 1u);
  EXPECT_EQ(s_->counters().tasks_retrained, 0u);
  // Shard 0 resumes from its checkpoint at 7: t2's shard-0 part is lost;
  // what shard 1 holds (remembered across the restart) confirms t1.
  const MasterObservation o = s_->ObserveMaster(1, 0, {20, 10, 7}, 7, 0);
  ASSERT_EQ(o.retrained.size(), 1u);
  EXPECT_EQ(o.retrained[0].id, t2.id);
  EXPECT_EQ(s_->Describe(1).tasks_unconfirmed, 0u);
  EXPECT_EQ(t1.epoch, 0u);
}

}  // namespace
}  // namespace gaptrain
