// A restarted coordinator: the core saved mid-epoch and loaded into a fresh
// one (directly and through the state file) neither loses the epoch's
// progress nor assigns a task twice.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "services/coordinator/coordinator_state.h"
#include "services/coordinator/state_file.h"
#include "services/testing/test_files.h"

namespace gaptrain {
namespace {

CoordinatorConfig Config() {
  CoordinatorConfig c;
  c.job_name = "restart";
  c.train_samples = 1000;
  c.samples_per_task = 100;
  c.epochs = 2;
  c.min_trainers = 2;
  c.lease_seconds = 10;
  return c;
}

WorkerId Join(CoordinatorState* s, double now, const std::string& host,
              WorkerRole role = WorkerRole::kTrainer) {
  RegisterResult r;
  EXPECT_TRUE(s->Register(now, host, role, 0, &r).ok());
  return r.id;
}

DataTask Take(CoordinatorState* s, double now, WorkerId id) {
  NextTaskResult r;
  EXPECT_TRUE(s->NextTask(now, id, &r).ok());
  EXPECT_EQ(r.outcome, TaskOutcome::kAssigned) << r.reason;
  return r.task;
}

std::unique_ptr<CoordinatorState> SaveAndRestore(const CoordinatorState& s, double now) {
  proto::CoordinatorSnapshot saved, parsed;
  s.Save(&saved);
  EXPECT_TRUE(parsed.ParseFromString(saved.SerializeAsString()));
  std::unique_ptr<CoordinatorState> restored;
  Status st = CoordinatorState::Restore(Config(), parsed, now, &restored);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return restored;
}

std::string TempPath(const std::string& name) {
  return std::string(std::getenv("TEST_TMPDIR")) + "/" + name;
}

TEST(RestoreTest, MidEpochProgressSurvivesAndNoTaskIsAssignedTwice) {
  std::unique_ptr<CoordinatorState> s;
  ASSERT_TRUE(CoordinatorState::Create(Config(), 0, &s).ok());
  WorkerId a = Join(s.get(), 0, "pod-a");
  WorkerId b = Join(s.get(), 0, "pod-b");
  WorkerId e = Join(s.get(), 0, "eval", WorkerRole::kEvaluator);
  std::vector<SampleRange> completed;
  for (int i = 0; i < 3; ++i) {
    DataTask t = Take(s.get(), 1, a);
    CompleteTaskResult r;
    ASSERT_TRUE(s->CompleteTask(2, a, t.id, &r).ok());
    completed.push_back(r.task.range);
  }
  DataTask ta = Take(s.get(), 3, a);  // index 3, in flight
  DataTask tb = Take(s.get(), 3, b);  // index 4, in flight
  WorkerProgress p;
  p.task_id = tb.id;
  p.samples_done = 40;
  uint64_t held = 0;
  ASSERT_TRUE(s->Heartbeat(4, b, p, &held).ok());
  ASSERT_TRUE(s->ReportEvaluation(4, e, 0.5, 0.7, 30, {{"top5", 0.875}}).ok());
  const JobStatus before = s->Describe(4);

  // The coordinator restarts at t = 1000: leases restart then.
  auto r = SaveAndRestore(*s, 1000);
  s.reset();
  JobStatus after = r->Describe(1000);
  EXPECT_EQ(after.phase, JobPhase::kRunning);
  EXPECT_EQ(after.epoch, 0u);
  EXPECT_EQ(after.tasks_done, 3u);
  EXPECT_EQ(after.tasks_in_flight, 2u);
  EXPECT_EQ(after.tasks_queued, 5u);
  EXPECT_EQ(after.samples_done_in_epoch, before.samples_done_in_epoch);
  EXPECT_EQ(after.counters.joins, 3u);
  EXPECT_EQ(after.last_accuracy, 0.5);
  ASSERT_EQ(after.last_eval_metrics.size(), 1u);
  EXPECT_EQ(after.last_eval_metrics[0].name, "top5");
  EXPECT_EQ(after.last_eval_metrics[0].value, 0.875);
  EXPECT_EQ(after.live_workers, 3u);
  EXPECT_EQ(r->lifecycle().conditions().size(), 2u);
  EXPECT_EQ(r->Members(), (std::vector<WorkerId>{a, b}));  // trainers; `e` evaluates

  // a re-registers with its id and continues its task; a newcomer gets the
  // next queued task, never one in flight.
  RegisterResult again;
  ASSERT_TRUE(r->Register(1001, "pod-a", WorkerRole::kTrainer, a, &again).ok());
  EXPECT_TRUE(again.resumed);
  EXPECT_EQ(again.task.id, ta.id);
  WorkerId c = Join(r.get(), 1001, "pod-c");
  EXPECT_GT(c, e);  // ids are never reused
  DataTask tc = Take(r.get(), 1001, c);
  EXPECT_EQ(tc.index, 5u);

  // b never comes back: its lease, restarted at 1000, expires at 1010 and
  // its task returns to the front with its 40 samples counted lost.
  ASSERT_TRUE(r->Heartbeat(1009, a, {}, &held).ok());
  ASSERT_TRUE(r->Heartbeat(1009, c, {}, &held).ok());
  ASSERT_TRUE(r->Heartbeat(1009, e, {}, &held).ok());
  EXPECT_EQ(r->Tick(1010).expired, (std::vector<WorkerId>{b}));
  EXPECT_EQ(r->counters().samples_lost, 40u);
  EXPECT_EQ(r->tasks().QueuedIndices().front(), tb.index);

  // Finish the epoch: every position exactly once across the restart.
  CompleteTaskResult done;
  ASSERT_TRUE(r->CompleteTask(1011, a, ta.id, &done).ok());
  completed.push_back(done.task.range);
  ASSERT_TRUE(r->CompleteTask(1011, c, tc.id, &done).ok());
  completed.push_back(done.task.range);
  while (r->tasks().epoch() == 0) {
    DataTask t = Take(r.get(), 1012, a);
    ASSERT_TRUE(r->CompleteTask(1012, a, t.id, &done).ok());
    completed.push_back(done.task.range);
  }
  std::sort(completed.begin(), completed.end(),
            [](const SampleRange& x, const SampleRange& y) { return x.begin < y.begin; });
  uint32_t next = 0;
  for (const SampleRange& range : completed) {
    ASSERT_EQ(range.begin, next);
    next = range.end;
  }
  EXPECT_EQ(next, 1000u);
}

TEST(RestoreTest, ARetriedCompletionAfterARestartIsStillAcknowledged) {
  std::unique_ptr<CoordinatorState> s;
  ASSERT_TRUE(CoordinatorState::Create(Config(), 0, &s).ok());
  WorkerId a = Join(s.get(), 0, "pod-a");
  Join(s.get(), 0, "pod-b");
  DataTask t = Take(s.get(), 1, a);
  CompleteTaskResult r;
  ASSERT_TRUE(s->CompleteTask(2, a, t.id, &r).ok());
  auto restored = SaveAndRestore(*s, 100);
  ASSERT_TRUE(restored->CompleteTask(101, a, t.id, &r).ok());
  EXPECT_TRUE(r.already_completed);
  EXPECT_EQ(restored->tasks().done(), 1u);
}

TEST(RestoreTest, AFinishedJobStaysFinished) {
  std::unique_ptr<CoordinatorState> s;
  ASSERT_TRUE(CoordinatorState::Create(Config(), 0, &s).ok());
  s->Tick(1000);  // no worker for 600 s
  ASSERT_EQ(s->phase(), JobPhase::kFailed);
  auto r = SaveAndRestore(*s, 2000);
  EXPECT_EQ(r->phase(), JobPhase::kFailed);
  EXPECT_EQ(r->lifecycle().current().reason, "NoLiveWorkers");
  RegisterResult reg;
  EXPECT_EQ(r->Register(2001, "pod-a", WorkerRole::kTrainer, 0, &reg).code(),
            Status::Code::kFailedPrecondition);
}

TEST(RestoreTest, AnotherJobOrTaskCuttingIsRefused) {
  std::unique_ptr<CoordinatorState> s;
  ASSERT_TRUE(CoordinatorState::Create(Config(), 0, &s).ok());
  proto::CoordinatorSnapshot saved;
  s->Save(&saved);
  std::unique_ptr<CoordinatorState> r;
  CoordinatorConfig other = Config();
  other.job_name = "other";
  EXPECT_EQ(CoordinatorState::Restore(other, saved, 0, &r).code(),
            Status::Code::kFailedPrecondition);
  other = Config();
  other.samples_per_task = 50;
  Status st = CoordinatorState::Restore(other, saved, 0, &r);
  EXPECT_EQ(st.code(), Status::Code::kFailedPrecondition);
  EXPECT_NE(st.message().find("--task-batches"), std::string::npos) << st.message();
  other = Config();
  other.epochs = 1;
  saved.set_epoch(1);
  saved.clear_queued();
  for (uint32_t i = 0; i < 10; ++i) saved.add_queued(i);
  EXPECT_EQ(CoordinatorState::Restore(other, saved, 0, &r).code(),
            Status::Code::kFailedPrecondition);
}

TEST(RestoreTest, InconsistentStateIsDataLoss) {
  std::unique_ptr<CoordinatorState> s;
  ASSERT_TRUE(CoordinatorState::Create(Config(), 0, &s).ok());
  WorkerId a = Join(s.get(), 0, "pod-a");
  WorkerId b = Join(s.get(), 0, "pod-b");
  DataTask t = Take(s.get(), 1, a);
  proto::CoordinatorSnapshot good;
  s->Save(&good);
  std::unique_ptr<CoordinatorState> r;
  ASSERT_TRUE(CoordinatorState::Restore(Config(), good, 5, &r).ok());

  auto expect_loss = [&](const proto::CoordinatorSnapshot& bad, const char* what) {
    std::unique_ptr<CoordinatorState> out;
    EXPECT_EQ(CoordinatorState::Restore(Config(), bad, 5, &out).code(), Status::Code::kDataLoss)
        << what;
  };
  proto::CoordinatorSnapshot bad = good;
  bad.mutable_workers(1)->set_task_id(t.id);  // b holds a's task too
  expect_loss(bad, "a task held twice");
  bad = good;
  bad.add_queued(t.index);  // queued and in flight
  expect_loss(bad, "a task in two places");
  bad = good;
  bad.mutable_workers(0)->set_task_id(12345);
  expect_loss(bad, "a task of another epoch");
  bad = good;
  bad.set_next_worker_id(b);  // b was never issued
  expect_loss(bad, "an id never issued");
  bad = good;
  bad.mutable_workers(1)->set_role(proto::WORKER_ROLE_EVALUATOR);
  bad.add_workers()->CopyFrom(bad.workers(1));
  bad.mutable_workers(2)->set_worker_id(b + 1);
  bad.set_next_worker_id(b + 2);
  expect_loss(bad, "two evaluators");
  bad = good;
  bad.set_phase(proto::JOB_PHASE_SUCCEEDED);  // no True condition for it
  expect_loss(bad, "a phase without its condition");
  bad = good;
  bad.mutable_workers(0)->set_host("");
  expect_loss(bad, "a worker without a host");
}

TEST(RestoreTest, EachMasterShardsRunSurvivesARestartThroughTheStateFile) {
  CoordinatorConfig c = Config();
  c.master_shards = 2;
  std::unique_ptr<CoordinatorState> s;
  ASSERT_TRUE(CoordinatorState::Create(c, 0, &s).ok());
  WorkerId a = Join(s.get(), 0, "pod-a");
  Join(s.get(), 0, "pod-b");
  s->ObserveMaster(1, 0, {10, 0, 0}, 100, 3);
  s->ObserveMaster(1, 1, {7, 4, 2}, 80, 4);
  const DataTask t = Take(s.get(), 1, a);
  CompleteTaskResult done;
  ASSERT_TRUE(s->CompleteTask(2, a, t.id, TaskCompletion{{{10, 90, 0}, {7, 70, 1}}, 0}, &done)
                  .ok());
  proto::CoordinatorSnapshot saved;
  s->Save(&saved);
  // Shard 0 where a file from before shards has it; the others beside.
  EXPECT_EQ(saved.master().id(), 10u);
  EXPECT_EQ(saved.master_durable_version(), 3u);
  ASSERT_EQ(saved.master_shards_size(), 1);
  EXPECT_EQ(saved.master_shards(0).shard(), 1u);
  EXPECT_EQ(saved.master_version(), 80u) << "the least of the shards'";

  const std::string path = TempPath("two-shards-state");
  ASSERT_TRUE(WriteStateFile(path, saved).ok());
  proto::CoordinatorSnapshot read;
  ASSERT_TRUE(ReadStateFile(path, &read).ok());
  std::unique_ptr<CoordinatorState> r;
  Status st = CoordinatorState::Restore(c, read, 5, &r);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(r->unconfirmed().master(0).id, 10u);
  EXPECT_EQ(r->unconfirmed().durable_version(0), 3u);
  const MasterRun& one = r->unconfirmed().master(1);
  EXPECT_EQ(one.id, 7u);
  EXPECT_EQ(one.restored_from_id, 4u);
  EXPECT_EQ(one.restored_from_version, 2u);
  EXPECT_EQ(r->unconfirmed().durable_version(1), 4u);
  EXPECT_EQ(r->master_version(), 80u);
  EXPECT_EQ(r->shard_version(0), 80u) << "each shard had reached the least";
  ASSERT_EQ(r->unconfirmed().tasks().count(t.id), 1u);
  const std::vector<MasterPosition>& reached = r->unconfirmed().tasks().at(t.id);
  ASSERT_EQ(reached.size(), 2u);
  EXPECT_EQ(reached[1].shard, 1u);
  proto::CoordinatorSnapshot again;
  r->Save(&again);
  EXPECT_EQ(again.SerializeAsString(), saved.SerializeAsString());
  std::remove(path.c_str());

  auto expect_loss = [&](const proto::CoordinatorSnapshot& bad, const char* what) {
    std::unique_ptr<CoordinatorState> out;
    EXPECT_EQ(CoordinatorState::Restore(c, bad, 5, &out).code(), Status::Code::kDataLoss)
        << what;
  };
  proto::CoordinatorSnapshot bad = saved;
  *bad.add_master_shards() = saved.master_shards(0);
  expect_loss(bad, "a shard saved twice");
  bad = saved;
  bad.mutable_master_shards(0)->set_shard(0);
  expect_loss(bad, "shard 0 beside `master`");
  bad = saved;
  bad.mutable_master_shards(0)->set_shard(kMaxMasterShards);
  expect_loss(bad, "a shard beyond the most");
}

TEST(RestoreTest, AFileFromBeforeShardsLoadsAsOneMaster) {
  std::unique_ptr<CoordinatorState> s;
  ASSERT_TRUE(CoordinatorState::Create(Config(), 0, &s).ok());
  WorkerId a = Join(s.get(), 0, "pod-a");
  Join(s.get(), 0, "pod-b");
  // What a coordinator from before shards wrote (one master's saves have
  // not changed): one master run, positions without a shard.
  s->ObserveMaster(1, {10, 0, 0}, 9, 5);
  const DataTask t = Take(s.get(), 1, a);
  CompleteTaskResult done;
  ASSERT_TRUE(s->CompleteTask(2, a, t.id, TaskCompletion{{{10, 8}}, 0}, &done).ok());
  proto::CoordinatorSnapshot old;
  s->Save(&old);
  ASSERT_EQ(old.unconfirmed_size(), 1);
  EXPECT_EQ(old.unconfirmed(0).reached(0).shard(), 0u);
  ASSERT_EQ(old.master_shards_size(), 0);

  for (uint32_t shards : {1u, 2u}) {
    SCOPED_TRACE(std::to_string(shards) + " shards");
    CoordinatorConfig c = Config();
    c.master_shards = shards;
    std::unique_ptr<CoordinatorState> r;
    Status st = CoordinatorState::Restore(c, old, 5, &r);
    ASSERT_TRUE(st.ok()) << st.ToString();
    EXPECT_EQ(r->unconfirmed().master(0).id, 10u);
    EXPECT_EQ(r->unconfirmed().durable_version(0), 5u);
    EXPECT_EQ(r->unconfirmed().master(1).id, 0u);
    EXPECT_EQ(r->master_version(), 9u);
    // The task reached shard 0: shard 0 resuming from 7 loses it, as a
    // restore of the one master did.
    const MasterObservation o = r->ObserveMaster(6, {20, 10, 7}, 7, 0);
    ASSERT_EQ(o.retrained.size(), 1u);
    EXPECT_EQ(o.retrained[0].id, t.id);
    proto::CoordinatorSnapshot saved;
    r->Save(&saved);
    EXPECT_EQ(saved.master_shards_size(), 0) << "shard 1 never heard of";
  }
}

TEST(StateFileTest, RoundTripsAndRejectsTornOrCorruptFiles) {
  std::unique_ptr<CoordinatorState> s;
  ASSERT_TRUE(CoordinatorState::Create(Config(), 0, &s).ok());
  WorkerId a = Join(s.get(), 0, "pod-a");
  Join(s.get(), 0, "pod-b");
  Take(s.get(), 1, a);
  proto::CoordinatorSnapshot saved;
  s->Save(&saved);
  const std::string path = TempPath(kStateFileName);
  ASSERT_TRUE(WriteStateFile(path, saved).ok());
  proto::CoordinatorSnapshot read;
  ASSERT_TRUE(ReadStateFile(path, &read).ok());
  EXPECT_EQ(read.SerializeAsString(), saved.SerializeAsString());

  const std::string bytes = ReadRaw(path);
  auto write = [&](const std::string& content) {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << content;
  };
  write(bytes.substr(0, bytes.size() - 3));
  Status st = ReadStateFile(path, &read);
  EXPECT_EQ(st.code(), Status::Code::kDataLoss);
  EXPECT_NE(st.message().find("torn"), std::string::npos) << st.message();
  std::string flipped = bytes;
  flipped[flipped.size() - 5] ^= 0x10;
  write(flipped);
  st = ReadStateFile(path, &read);
  EXPECT_EQ(st.code(), Status::Code::kDataLoss);
  EXPECT_NE(st.message().find("CRC"), std::string::npos) << st.message();
  write("not a state file at all");
  EXPECT_EQ(ReadStateFile(path, &read).code(), Status::Code::kDataLoss);
  write("");
  EXPECT_EQ(ReadStateFile(path, &read).code(), Status::Code::kDataLoss);
  std::remove(path.c_str());
  EXPECT_EQ(ReadStateFile(path, &read).code(), Status::Code::kNotFound);
  EXPECT_EQ(WriteStateFile(TempPath("missing-dir/state"), saved).code(), Status::Code::kNotFound);
}

}  // namespace
}  // namespace gaptrain
