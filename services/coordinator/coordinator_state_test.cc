#include "services/coordinator/coordinator_state.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace gaptrain {
namespace {

// 1000 samples in tasks of 100: 10 tasks per epoch, two epochs, two
// trainers needed, 10-second leases.
CoordinatorConfig Config() {
  CoordinatorConfig c;
  c.job_name = "test-job";
  c.train_samples = 1000;
  c.samples_per_task = 100;
  c.batch_size = 10;
  c.epochs = 2;
  c.min_trainers = 2;
  c.lease_seconds = 10;
  c.no_worker_timeout_seconds = 600;
  c.master_timeout_seconds = 300;
  return c;
}

std::unique_ptr<CoordinatorState> NewState(const CoordinatorConfig& config = Config(),
                                           double now = 0) {
  std::unique_ptr<CoordinatorState> s;
  Status st = CoordinatorState::Create(config, now, &s);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return s;
}

WorkerId Join(CoordinatorState* s, double now, const std::string& host,
              WorkerRole role = WorkerRole::kTrainer) {
  RegisterResult r;
  Status st = s->Register(now, host, role, 0, &r);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return r.id;
}

DataTask Take(CoordinatorState* s, double now, WorkerId id) {
  NextTaskResult r;
  Status st = s->NextTask(now, id, &r);
  EXPECT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(r.outcome, TaskOutcome::kAssigned) << r.reason;
  return r.task;
}

void Finish(CoordinatorState* s, double now, WorkerId id, uint64_t task) {
  CompleteTaskResult r;
  Status st = s->CompleteTask(now, id, task, &r);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_FALSE(r.already_completed);
}

std::string Saved(const CoordinatorState& s) {
  proto::CoordinatorSnapshot snapshot;
  s.Save(&snapshot);
  return snapshot.SerializeAsString();
}

TEST(CoordinatorStateTest, RegisterIssuesIncreasingIdsAndTrainerRoles) {
  auto s = NewState();
  RegisterResult r;
  ASSERT_TRUE(s->Register(0, "pod-a", WorkerRole::kTrainer, 0, &r).ok());
  EXPECT_EQ(r.id, 1u);
  EXPECT_EQ(r.role, WorkerRole::kTrainer);
  EXPECT_FALSE(r.resumed);
  EXPECT_EQ(r.task.id, 0u);
  ASSERT_TRUE(s->Register(0, "pod-b", WorkerRole::kTrainer, 0, &r).ok());
  EXPECT_EQ(r.id, 2u);
  EXPECT_EQ(s->Members(), (std::vector<WorkerId>{1, 2}));
  EXPECT_EQ(s->counters().joins, 2u);
}

TEST(CoordinatorStateTest, PendingUntilMinTrainersThenRunning) {
  auto s = NewState();
  WorkerId a = Join(s.get(), 1, "pod-a");
  EXPECT_EQ(s->phase(), JobPhase::kPending);
  NextTaskResult next;
  ASSERT_TRUE(s->NextTask(2, a, &next).ok());
  EXPECT_EQ(next.outcome, TaskOutcome::kWaitForWorkers);
  EXPECT_EQ(next.reason, "waiting for trainers: 1 of at least 2 live");
  Join(s.get(), 3, "pod-b");
  EXPECT_EQ(s->phase(), JobPhase::kRunning);
  EXPECT_EQ(s->lifecycle().current().reason, "EnoughWorkers");
  EXPECT_EQ(s->lifecycle().current().last_transition_time, 3);
  EXPECT_EQ(Take(s.get(), 4, a).range.begin, 0u);
}

TEST(CoordinatorStateTest, LeaseExpiresAtExactlyLeaseSeconds) {
  auto s = NewState();
  WorkerId a = Join(s.get(), 100, "pod-a");
  const uint64_t members = s->members_generation();
  EXPECT_TRUE(s->Tick(109.999).expired.empty());
  EXPECT_NE(s->membership().Find(a), nullptr);
  TickResult t = s->Tick(110);
  EXPECT_EQ(t.expired, (std::vector<WorkerId>{a}));
  EXPECT_EQ(s->membership().Find(a), nullptr);
  EXPECT_EQ(s->counters().expiries, 1u);
  EXPECT_GT(s->members_generation(), members);
  EXPECT_TRUE(s->Members().empty());
  EXPECT_TRUE(s->Tick(200).expired.empty());  // expired once
}

TEST(CoordinatorStateTest, HeartbeatsAndOtherCallsRenewTheLease) {
  auto s = NewState();
  WorkerId a = Join(s.get(), 0, "pod-a");
  WorkerId b = Join(s.get(), 0, "pod-b");
  uint64_t held = 99;
  ASSERT_TRUE(s->Heartbeat(8, a, {}, &held).ok());
  EXPECT_EQ(held, 0u);
  Take(s.get(), 9, b);  // NextTask renews b
  EXPECT_TRUE(s->Tick(17.5).expired.empty());
  ASSERT_TRUE(s->Heartbeat(17.5, a, {}, &held).ok());
  EXPECT_EQ(s->Tick(19).expired, (std::vector<WorkerId>{b}));
  EXPECT_TRUE(s->Tick(27.25).expired.empty());
  EXPECT_EQ(s->Tick(27.5).expired, (std::vector<WorkerId>{a}));
}

TEST(CoordinatorStateTest, ARejectedCallDoesNotRenewTheLease) {
  auto s = NewState();
  WorkerId a = Join(s.get(), 0, "pod-a");
  WorkerProgress bad;
  bad.loss = std::numeric_limits<float>::quiet_NaN();
  uint64_t held = 0;
  EXPECT_EQ(s->Heartbeat(5, a, bad, &held).code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(s->Tick(10).expired, (std::vector<WorkerId>{a}));
}

TEST(CoordinatorStateTest, AnExpiredWorkersTaskGoesBackToTheFrontAndItsProgressIsLost) {
  auto s = NewState();
  WorkerId a = Join(s.get(), 0, "pod-a");
  WorkerId b = Join(s.get(), 0, "pod-b");
  DataTask ta = Take(s.get(), 1, a);
  DataTask tb = Take(s.get(), 1, b);
  EXPECT_EQ(ta.index, 0u);
  EXPECT_EQ(tb.index, 1u);
  WorkerProgress p;
  p.task_id = ta.id;
  p.samples_done = 60;
  p.loss = 0.5f;
  uint64_t held = 0;
  ASSERT_TRUE(s->Heartbeat(2, a, p, &held).ok());
  EXPECT_EQ(held, ta.id);
  EXPECT_EQ(s->Describe(2).samples_done_in_epoch, 60u);
  ASSERT_TRUE(s->Heartbeat(11, b, {}, &held).ok());
  EXPECT_EQ(s->Tick(12).expired, (std::vector<WorkerId>{a}));
  EXPECT_EQ(s->counters().tasks_reassigned, 1u);
  EXPECT_EQ(s->counters().samples_lost, 60u);
  EXPECT_EQ(s->tasks().QueuedIndices().front(), 0u);
  EXPECT_EQ(s->phase(), JobPhase::kPending);  // one trainer left

  WorkerId c = Join(s.get(), 13, "pod-c");
  EXPECT_EQ(s->phase(), JobPhase::kRunning);
  DataTask tc = Take(s.get(), 13, c);
  EXPECT_EQ(tc.id, ta.id);  // the lost task first
  EXPECT_EQ(tc.range.begin, 0u);
}

TEST(CoordinatorStateTest, LeaveCountsEachReasonAndGivesTheTaskBack) {
  auto s = NewState();
  WorkerId a = Join(s.get(), 0, "pod-a");
  WorkerId b = Join(s.get(), 0, "pod-b");
  WorkerId c = Join(s.get(), 0, "pod-c");
  DataTask t = Take(s.get(), 1, a);
  bool gone = true;
  ASSERT_TRUE(s->Leave(2, a, LeaveReason::kPreempted, &gone).ok());
  EXPECT_FALSE(gone);
  ASSERT_TRUE(s->Leave(2, b, LeaveReason::kFailed, &gone).ok());
  ASSERT_TRUE(s->Leave(2, c, LeaveReason::kFinished, &gone).ok());
  EXPECT_EQ(s->counters().left_preempted, 1u);
  EXPECT_EQ(s->counters().left_failed, 1u);
  EXPECT_EQ(s->counters().left_finished, 1u);
  EXPECT_EQ(s->counters().tasks_reassigned, 1u);
  EXPECT_EQ(s->tasks().queued(), 10u);
  EXPECT_EQ(s->tasks().QueuedIndices().front(), t.index);
  EXPECT_TRUE(s->Members().empty());

  // A retried Leave is OK and counts nothing; an id never issued is not.
  ASSERT_TRUE(s->Leave(3, a, LeaveReason::kPreempted, &gone).ok());
  EXPECT_TRUE(gone);
  EXPECT_EQ(s->counters().left_preempted, 1u);
  EXPECT_EQ(s->Leave(3, 99, LeaveReason::kFailed, &gone).code(), Status::Code::kNotFound);
}

ReleaseTaskResult Release(CoordinatorState* s, double now, WorkerId id, uint64_t task,
                          const std::string& message = "store:9000 refused the connection") {
  ReleaseTaskResult r;
  Status st = s->ReleaseTask(now, id, task, ReleaseReason::kDataUnavailable, message, &r);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return r;
}

// A trainer whose data store is away hands its task back: it goes to the
// front of the queue, nothing of it is credited (its reported progress is
// lost), and the trainer stays live; a second trainer then gets it.
TEST(CoordinatorStateTest, AReleasedTaskGoesBackToTheFrontAndNothingIsCredited) {
  auto s = NewState();
  WorkerId a = Join(s.get(), 0, "pod-a");
  WorkerId b = Join(s.get(), 0, "pod-b");
  DataTask ta = Take(s.get(), 1, a);
  DataTask tb = Take(s.get(), 1, b);
  WorkerProgress p;
  p.task_id = ta.id;
  p.samples_done = 30;
  uint64_t held = 0;
  ASSERT_TRUE(s->Heartbeat(2, a, p, &held).ok());
  const uint64_t durable = s->durable_generation();

  ReleaseTaskResult r = Release(s.get(), 3, a, ta.id);
  EXPECT_FALSE(r.already_released);
  EXPECT_EQ(r.task.id, ta.id);
  EXPECT_EQ(r.task.range.begin, ta.range.begin);
  EXPECT_GT(s->durable_generation(), durable);
  EXPECT_EQ(s->counters().tasks_released, 1u);
  EXPECT_EQ(s->counters().samples_lost, 30u);
  EXPECT_EQ(s->counters().tasks_reassigned, 0u);  // no worker departed
  EXPECT_EQ(s->tasks().done(), 0u);
  EXPECT_EQ(s->tasks().in_flight(), 1u);
  EXPECT_EQ(s->tasks().QueuedIndices().front(), ta.index);
  const WorkerRecord* w = s->membership().Find(a);
  ASSERT_NE(w, nullptr);  // still a live member
  EXPECT_EQ(w->task_id, 0u);
  EXPECT_EQ(w->last_seen, 3);  // the release renewed its lease
  EXPECT_EQ(s->Members(), (std::vector<WorkerId>{a, b}));
  EXPECT_EQ(s->phase(), JobPhase::kRunning);
  EXPECT_EQ(s->Describe(3).samples_done_in_epoch, 0u);
  ASSERT_TRUE(s->Heartbeat(4, a, {}, &held).ok());
  EXPECT_EQ(held, 0u);

  // b finishes its own task, then gets the handed-back one first.
  Finish(s.get(), 5, b, tb.id);
  EXPECT_EQ(Take(s.get(), 5, b).id, ta.id);
  EXPECT_EQ(s->tasks().worker(ta.index), b);
  // a asks again and gets the next task in line.
  EXPECT_EQ(Take(s.get(), 6, a).index, 2u);
  Finish(s.get(), 7, b, ta.id);
  EXPECT_EQ(s->tasks().done(), 2u);
}

// The releasing trainer itself gets its task back when it asks first, and
// may hand it back again; an earlier epoch's task in retraining goes back to
// the retrain queue.
TEST(CoordinatorStateTest, TheReleasingTrainerGetsItsTaskBackFromTheFront) {
  auto s = NewState();
  WorkerId a = Join(s.get(), 0, "pod-a");
  Join(s.get(), 0, "pod-b");
  DataTask t = Take(s.get(), 1, a);
  Release(s.get(), 2, a, t.id);
  EXPECT_EQ(Take(s.get(), 3, a).id, t.id);
  Release(s.get(), 4, a, t.id);
  EXPECT_EQ(Take(s.get(), 5, a).id, t.id);
  EXPECT_EQ(s->counters().tasks_released, 2u);
  Finish(s.get(), 6, a, t.id);
  EXPECT_EQ(s->tasks().done(), 1u);
}

// In sync mode a trainer without data holds no step: it is no member from
// its release until its next task.
TEST(CoordinatorStateTest, InSyncModeATrainerThatReleasedIsNoMemberUntilItsNextTask) {
  CoordinatorConfig c = Config();
  c.idle_trainers_are_members = false;
  auto s = NewState(c);
  WorkerId a = Join(s.get(), 0, "pod-a");
  WorkerId b = Join(s.get(), 0, "pod-b");
  DataTask t = Take(s.get(), 1, a);
  Take(s.get(), 1, b);
  const uint64_t generation = s->members_generation();
  Release(s.get(), 2, a, t.id);
  EXPECT_EQ(s->Members(), (std::vector<WorkerId>{b}));
  EXPECT_GT(s->members_generation(), generation);
  EXPECT_EQ(Take(s.get(), 3, a).id, t.id);
  EXPECT_EQ(s->Members(), (std::vector<WorkerId>{a, b}));
}

TEST(CoordinatorStateTest, ReleasingATaskNotHeldIsRefusedAndARetryIsAcknowledgedOnce) {
  auto s = NewState();
  WorkerId a = Join(s.get(), 0, "pod-a");
  WorkerId b = Join(s.get(), 0, "pod-b");
  WorkerId e = Join(s.get(), 0, "eval", WorkerRole::kEvaluator);
  DataTask ta = Take(s.get(), 1, a);
  DataTask tb = Take(s.get(), 1, b);
  const std::string before = Saved(*s);
  const uint64_t durable = s->durable_generation();
  ReleaseTaskResult r;
  const ReleaseReason why = ReleaseReason::kDataUnavailable;
  Status other = s->ReleaseTask(2, a, tb.id, why, "", &r);
  EXPECT_EQ(other.code(), Status::Code::kFailedPrecondition);
  EXPECT_EQ(other.message(),
            "worker 1 does not hold task 2 (it holds task 1); only a task's holder can hand it "
            "back");
  EXPECT_EQ(s->ReleaseTask(2, a, 1000000, why, "", &r).code(), Status::Code::kNotFound);
  EXPECT_EQ(s->ReleaseTask(2, a, 0, why, "", &r).code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(s->ReleaseTask(2, e, ta.id, why, "", &r).code(), Status::Code::kFailedPrecondition);
  EXPECT_EQ(s->ReleaseTask(2, 0, ta.id, why, "", &r).code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(s->ReleaseTask(2, 42, ta.id, why, "", &r).code(), Status::Code::kNotFound);
  Status long_message =
      s->ReleaseTask(2, a, ta.id, why, std::string(kMaxReleaseMessageBytes + 1, 'x'), &r);
  EXPECT_EQ(long_message.code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(long_message.message(), "message: at most 1024 bytes, got 1025");
  Status two_lines = s->ReleaseTask(2, a, ta.id, why, "refused\nby the store", &r);
  EXPECT_EQ(two_lines.code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(two_lines.message(), "message: UTF-8 without control characters only");
  EXPECT_EQ(s->ReleaseTask(2, a, ta.id, why, "\xff\xfe", &r).code(),
            Status::Code::kInvalidArgument);
  EXPECT_EQ(Saved(*s), before);
  EXPECT_EQ(s->durable_generation(), durable);
  EXPECT_FALSE(s->data_unavailable());

  // A message of exactly 1024 bytes is fine; a retry after a lost reply
  // is acknowledged without moving anything again.
  Release(s.get(), 3, a, ta.id, std::string(kMaxReleaseMessageBytes, 'x'));
  const std::string released = Saved(*s);
  r = Release(s.get(), 4, a, ta.id);
  EXPECT_TRUE(r.already_released);
  EXPECT_EQ(r.task.id, ta.id);
  EXPECT_EQ(s->counters().tasks_released, 1u);
  EXPECT_EQ(s->data_unavailable()->releases, 1u);
  EXPECT_EQ(Saved(*s), released);
  // Once someone else holds it, a's retry still changes nothing, and b
  // cannot hand back what a released.
  EXPECT_EQ(Take(s.get(), 5, a).id, ta.id);
  Release(s.get(), 6, a, ta.id);
  Finish(s.get(), 7, b, tb.id);
  EXPECT_EQ(Take(s.get(), 8, b).id, ta.id);
  EXPECT_TRUE(Release(s.get(), 9, a, ta.id).already_released);
  EXPECT_EQ(s->tasks().worker(ta.index), b);
}

// Why the job waits: set by a data-unavailable release (since the first of
// the episode, the last message and worker, the releases), kept across a
// restart, cleared by the next completed task.
TEST(CoordinatorStateTest, DataUnavailableIsSetByAReleaseAndClearedByTheNextCompletion) {
  auto s = NewState();
  WorkerId a = Join(s.get(), 0, "pod-a");
  WorkerId b = Join(s.get(), 0, "pod-b");
  DataTask ta = Take(s.get(), 1, a);
  DataTask tb = Take(s.get(), 1, b);
  EXPECT_FALSE(s->Describe(1).data_unavailable);
  Release(s.get(), 10, a, ta.id, "ConnectionRefusedError: store:9000");
  Release(s.get(), 12, b, tb.id, "EndpointConnectionError: s3.local");
  JobStatus st = s->Describe(13);
  ASSERT_TRUE(st.data_unavailable);
  EXPECT_EQ(st.data_unavailable->since, 10);
  EXPECT_EQ(st.data_unavailable->message, "EndpointConnectionError: s3.local");
  EXPECT_EQ(st.data_unavailable->worker, b);
  EXPECT_EQ(st.data_unavailable->host, "pod-b");
  EXPECT_EQ(st.data_unavailable->releases, 2u);
  EXPECT_EQ(st.counters.tasks_released, 2u);

  // A restart keeps it, the counter, and what makes a retry safe.
  proto::CoordinatorSnapshot snapshot;
  s->Save(&snapshot);
  std::unique_ptr<CoordinatorState> restored;
  Status rs = CoordinatorState::Restore(Config(), snapshot, 20, &restored);
  ASSERT_TRUE(rs.ok()) << rs.ToString();
  EXPECT_EQ(Saved(*restored), Saved(*s));
  st = restored->Describe(20);
  ASSERT_TRUE(st.data_unavailable);
  EXPECT_EQ(st.data_unavailable->since, 10);
  EXPECT_EQ(st.data_unavailable->releases, 2u);
  EXPECT_EQ(st.counters.tasks_released, 2u);
  EXPECT_TRUE(Release(restored.get(), 21, a, ta.id).already_released);
  EXPECT_EQ(restored->counters().tasks_released, 2u);

  // The store is back: the next completed task clears it.
  DataTask again = Take(restored.get(), 22, b);
  EXPECT_EQ(again.id, tb.id);  // the last one handed back is at the front
  CompleteTaskResult done;
  ASSERT_TRUE(restored->CompleteTask(23, b, again.id, &done).ok());
  EXPECT_TRUE(done.data_available_again);
  EXPECT_FALSE(restored->data_unavailable());
  EXPECT_FALSE(restored->Describe(23).data_unavailable);
  EXPECT_EQ(restored->counters().tasks_released, 2u);
  // A retried completion says nothing of it.
  ASSERT_TRUE(restored->CompleteTask(24, b, again.id, &done).ok());
  EXPECT_TRUE(done.already_completed);
  EXPECT_FALSE(done.data_available_again);
  // A new episode starts at its own first release.
  Release(restored.get(), 30, a, Take(restored.get(), 30, a).id);
  EXPECT_EQ(restored->data_unavailable()->since, 30);
  EXPECT_EQ(restored->data_unavailable()->releases, 1u);

  // A saved message the coordinator would have refused is corrupt.
  restored->Save(&snapshot);
  snapshot.mutable_data_unavailable()->set_message("a\nb");
  EXPECT_EQ(CoordinatorState::Restore(Config(), snapshot, 40, &restored).code(),
            Status::Code::kDataLoss);
}

TEST(CoordinatorStateTest, ReRegistrationWithALiveIdResumesItsTask) {
  auto s = NewState();
  WorkerId a = Join(s.get(), 0, "pod-a");
  WorkerId b = Join(s.get(), 0, "pod-b");
  DataTask t = Take(s.get(), 1, a);
  RegisterResult r;
  ASSERT_TRUE(s->Register(8, "pod-a", WorkerRole::kTrainer, a, &r).ok());
  EXPECT_EQ(r.id, a);
  EXPECT_TRUE(r.resumed);
  EXPECT_EQ(r.task.id, t.id);
  EXPECT_EQ(s->counters().joins, 2u);  // not a new join
  EXPECT_EQ(s->Tick(17).expired, (std::vector<WorkerId>{b}));  // a renewed at 8
  EXPECT_NE(s->membership().Find(a), nullptr);

  // Someone else claiming the id, or another role, is refused.
  EXPECT_EQ(s->Register(9, "pod-x", WorkerRole::kTrainer, a, &r).code(),
            Status::Code::kFailedPrecondition);
  EXPECT_EQ(s->Register(9, "pod-a", WorkerRole::kEvaluator, a, &r).code(),
            Status::Code::kFailedPrecondition);
}

TEST(CoordinatorStateTest, ReRegistrationAfterExpiryGetsANewId) {
  auto s = NewState();
  WorkerId a = Join(s.get(), 0, "pod-a");
  s->Tick(10);
  RegisterResult r;
  ASSERT_TRUE(s->Register(11, "pod-a", WorkerRole::kTrainer, a, &r).ok());
  EXPECT_NE(r.id, a);
  EXPECT_FALSE(r.resumed);
  // An id the coordinator never issued is ignored too.
  ASSERT_TRUE(s->Register(11, "pod-b", WorkerRole::kTrainer, 77, &r).ok());
  EXPECT_EQ(r.id, 3u);
}

TEST(CoordinatorStateTest, OneEvaluatorWhichTakesNoTasks) {
  auto s = NewState();
  WorkerId e = Join(s.get(), 0, "eval-0", WorkerRole::kEvaluator);
  RegisterResult r;
  EXPECT_EQ(s->Register(0, "eval-1", WorkerRole::kEvaluator, 0, &r).code(),
            Status::Code::kAlreadyExists);
  Join(s.get(), 0, "pod-a");
  EXPECT_EQ(s->phase(), JobPhase::kPending);  // the evaluator is no trainer
  WorkerId b = Join(s.get(), 0, "pod-b");
  EXPECT_EQ(s->phase(), JobPhase::kRunning);
  // The evaluator reads with observer pulls: the master's members are the
  // trainers only.
  EXPECT_EQ(s->Members(), (std::vector<WorkerId>{2, 3}));

  NextTaskResult next;
  EXPECT_EQ(s->NextTask(1, e, &next).code(), Status::Code::kFailedPrecondition);
  CompleteTaskResult done;
  EXPECT_EQ(s->CompleteTask(1, e, 1, &done).code(), Status::Code::kFailedPrecondition);
  EXPECT_EQ(s->ReportEvaluation(1, b, 0.5, 1.0, 10).code(), Status::Code::kFailedPrecondition);
  ASSERT_TRUE(s->ReportEvaluation(1, e, 0.5, 1.0, 10).ok());
  EXPECT_EQ(s->Describe(1).last_accuracy, 0.5);

  bool gone = false;
  ASSERT_TRUE(s->Leave(2, e, LeaveReason::kPreempted, &gone).ok());
  ASSERT_TRUE(s->Register(3, "eval-1", WorkerRole::kEvaluator, 0, &r).ok());
  EXPECT_EQ(r.role, WorkerRole::kEvaluator);
}

TEST(CoordinatorStateTest, InSyncModeTheEvaluatorIsNoMember) {
  CoordinatorConfig c = Config();
  c.evaluator_is_member = false;
  auto s = NewState(c);
  Join(s.get(), 0, "eval-0", WorkerRole::kEvaluator);
  WorkerId a = Join(s.get(), 0, "pod-a");
  EXPECT_EQ(s->Members(), (std::vector<WorkerId>{a}));
}

TEST(CoordinatorStateTest, NextTaskReturnsTheHeldTaskUntilItIsCompleted) {
  auto s = NewState();
  WorkerId a = Join(s.get(), 0, "pod-a");
  Join(s.get(), 0, "pod-b");
  DataTask t = Take(s.get(), 1, a);
  const uint64_t durable = s->durable_generation();
  EXPECT_EQ(Take(s.get(), 2, a).id, t.id);
  EXPECT_EQ(s->durable_generation(), durable);  // nothing new to persist
  EXPECT_EQ(s->tasks().in_flight(), 1u);
  Finish(s.get(), 3, a, t.id);
  EXPECT_EQ(Take(s.get(), 4, a).index, 1u);
}

TEST(CoordinatorStateTest, RetriedCompletionIsAcknowledgedOnceAndStaleOnesAreRefused) {
  auto s = NewState();
  WorkerId a = Join(s.get(), 0, "pod-a");
  WorkerId b = Join(s.get(), 0, "pod-b");
  DataTask t = Take(s.get(), 1, a);
  Finish(s.get(), 2, a, t.id);
  CompleteTaskResult r;
  ASSERT_TRUE(s->CompleteTask(3, a, t.id, &r).ok());
  EXPECT_TRUE(r.already_completed);
  EXPECT_EQ(s->tasks().done(), 1u);

  // a takes task 2 and goes silent; b gets it after a's lease expires.
  DataTask lost = Take(s.get(), 4, a);
  uint64_t held = 0;
  ASSERT_TRUE(s->Heartbeat(13, b, {}, &held).ok());
  s->Tick(14);
  WorkerId c = Join(s.get(), 14, "pod-c");
  EXPECT_EQ(Take(s.get(), 15, c).id, lost.id);
  // a is gone; b never held it.
  EXPECT_EQ(s->CompleteTask(16, a, lost.id, &r).code(), Status::Code::kFailedPrecondition);
  EXPECT_EQ(s->counters().stale_completions, 1u);
  EXPECT_EQ(s->CompleteTask(16, b, lost.id, &r).code(), Status::Code::kFailedPrecondition);
  EXPECT_EQ(s->counters().stale_completions, 2u);
  EXPECT_EQ(s->CompleteTask(16, b, 1000000, &r).code(), Status::Code::kNotFound);
  EXPECT_EQ(s->CompleteTask(16, b, 0, &r).code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(s->tasks().done(), 1u);
  EXPECT_EQ(s->tasks().worker(lost.index), c);
  Finish(s.get(), 17, c, lost.id);
  EXPECT_EQ(s->tasks().done(), 2u);
}

TEST(CoordinatorStateTest, AnEpochAdvancesWhenAllItsTasksAreDone) {
  auto s = NewState();
  WorkerId a = Join(s.get(), 0, "pod-a");
  WorkerId b = Join(s.get(), 0, "pod-b");
  for (int i = 0; i < 9; ++i) Finish(s.get(), 1, a, Take(s.get(), 1, a).id);
  DataTask last = Take(s.get(), 1, b);
  NextTaskResult next;
  ASSERT_TRUE(s->NextTask(1, a, &next).ok());
  EXPECT_EQ(next.outcome, TaskOutcome::kEpochFinishing);
  EXPECT_EQ(next.reason, "epoch 0 finishing: 1 tasks in flight");
  EXPECT_EQ(s->Describe(1).epoch, 0u);
  CompleteTaskResult r;
  ASSERT_TRUE(s->CompleteTask(2, b, last.id, &r).ok());
  EXPECT_TRUE(r.epoch_advanced);
  EXPECT_EQ(s->tasks().epoch(), 1u);
  EXPECT_EQ(s->tasks().queued(), 10u);
  DataTask first = Take(s.get(), 3, a);
  EXPECT_EQ(first.epoch, 1u);
  EXPECT_EQ(first.id, 11u);  // ids continue across epochs
  EXPECT_EQ(first.range.begin, 0u);
}

// Sync mode: a step waits for (members - backups) gradients, so a trainer
// waiting at the epoch's end without data must not count as a member, or
// the epoch's last tasks could never finish. It rejoins with its next task.
TEST(CoordinatorStateTest, InSyncModeTrainersWaitingForTheEpochEndAreNoMembers) {
  CoordinatorConfig c = Config();
  c.idle_trainers_are_members = false;
  auto s = NewState(c);
  WorkerId a = Join(s.get(), 0, "pod-a");
  WorkerId b = Join(s.get(), 0, "pod-b");
  for (int i = 0; i < 9; ++i) Finish(s.get(), 1, a, Take(s.get(), 1, a).id);
  DataTask last = Take(s.get(), 1, b);
  EXPECT_EQ(s->Members(), (std::vector<WorkerId>{a, b}));
  const uint64_t generation = s->members_generation();
  NextTaskResult next;
  ASSERT_TRUE(s->NextTask(1, a, &next).ok());
  ASSERT_EQ(next.outcome, TaskOutcome::kEpochFinishing);
  EXPECT_EQ(s->Members(), (std::vector<WorkerId>{b}));
  EXPECT_GT(s->members_generation(), generation);  // the master hears of it
  // Asking again changes nothing.
  const uint64_t idle_generation = s->members_generation();
  ASSERT_TRUE(s->NextTask(1, a, &next).ok());
  EXPECT_EQ(s->members_generation(), idle_generation);
  CompleteTaskResult r;
  ASSERT_TRUE(s->CompleteTask(2, b, last.id, &r).ok());
  EXPECT_EQ(Take(s.get(), 3, a).epoch, 1u);
  EXPECT_EQ(s->Members(), (std::vector<WorkerId>{a, b}));
}

TEST(CoordinatorStateTest, InAsyncModeWaitingTrainersStayMembers) {
  auto s = NewState();
  WorkerId a = Join(s.get(), 0, "pod-a");
  WorkerId b = Join(s.get(), 0, "pod-b");
  for (int i = 0; i < 9; ++i) Finish(s.get(), 1, a, Take(s.get(), 1, a).id);
  Take(s.get(), 1, b);
  const uint64_t generation = s->members_generation();
  NextTaskResult next;
  ASSERT_TRUE(s->NextTask(1, a, &next).ok());
  ASSERT_EQ(next.outcome, TaskOutcome::kEpochFinishing);
  EXPECT_EQ(s->Members(), (std::vector<WorkerId>{a, b}));
  EXPECT_EQ(s->members_generation(), generation);
}

TEST(CoordinatorStateTest, SucceedsWhenTheLastEpochCompletes) {
  auto s = NewState();
  WorkerId a = Join(s.get(), 0, "pod-a");
  Join(s.get(), 0, "pod-b");
  for (int i = 0; i < 20; ++i) Finish(s.get(), 1 + i, a, Take(s.get(), 1 + i, a).id);
  EXPECT_EQ(s->phase(), JobPhase::kSucceeded);
  EXPECT_EQ(s->lifecycle().current().reason, "EpochsCompleted");
  EXPECT_EQ(s->lifecycle().current().message, "completed 2 epochs");
  EXPECT_EQ(s->Describe(30).progress, 1.0);
  NextTaskResult next;
  ASSERT_TRUE(s->NextTask(31, a, &next).ok());
  EXPECT_EQ(next.outcome, TaskOutcome::kJobFinished);
  uint64_t held = 0;
  EXPECT_TRUE(s->Heartbeat(31, a, {}, &held).ok());  // workers learn the phase
  RegisterResult r;
  EXPECT_EQ(s->Register(32, "pod-late", WorkerRole::kTrainer, 0, &r).code(),
            Status::Code::kFailedPrecondition);
}

// An evaluator that starts after the last epoch still scores the final
// model: it registers, learns the phase and reports; a trainer may not.
TEST(CoordinatorStateTest, AnEvaluatorJoiningAFinishedJobReportsTheFinalEvaluation) {
  auto s = NewState();
  WorkerId a = Join(s.get(), 0, "pod-a");
  Join(s.get(), 0, "pod-b");
  for (int i = 0; i < 20; ++i) Finish(s.get(), 1 + i, a, Take(s.get(), 1 + i, a).id);
  ASSERT_EQ(s->phase(), JobPhase::kSucceeded);
  RegisterResult r;
  ASSERT_TRUE(s->Register(30, "eval", WorkerRole::kEvaluator, 0, &r).ok());
  EXPECT_EQ(r.role, WorkerRole::kEvaluator);
  ASSERT_TRUE(s->ReportEvaluation(31, r.id, 0.9, 0.3, 20).ok());
  EXPECT_EQ(s->Describe(31).last_eval_version, 20u);
  EXPECT_EQ(s->phase(), JobPhase::kSucceeded);
  EXPECT_EQ(s->lifecycle().current().reason, "EpochsCompleted");
  RegisterResult second;
  EXPECT_EQ(s->Register(32, "eval-2", WorkerRole::kEvaluator, 0, &second).code(),
            Status::Code::kAlreadyExists);
}

TEST(CoordinatorStateTest, AFractionalLastEpochCoversThatFractionOfTheData) {
  CoordinatorConfig c = Config();
  c.epochs = 1.25;  // epoch 0: 1000 samples; epoch 1: 250
  auto s = NewState(c);
  WorkerId a = Join(s.get(), 0, "pod-a");
  Join(s.get(), 0, "pod-b");
  for (int i = 0; i < 10; ++i) Finish(s.get(), 1, a, Take(s.get(), 1, a).id);
  EXPECT_EQ(s->tasks().epoch(), 1u);
  EXPECT_EQ(s->tasks().num_tasks(), 3u);
  EXPECT_EQ(s->tasks().Task(2).range.end, 250u);
  EXPECT_NEAR(s->Describe(1).progress, 1.0 / 1.25, 1e-12);
  for (int i = 0; i < 3; ++i) Finish(s.get(), 1, a, Take(s.get(), 1, a).id);
  EXPECT_EQ(s->phase(), JobPhase::kSucceeded);
}

TEST(CoordinatorStateTest, SucceedsWhenTheMasterReachesMaxUpdates) {
  CoordinatorConfig c = Config();
  c.epochs = 0;
  c.max_updates = 500;
  auto s = NewState(c);
  WorkerId a = Join(s.get(), 0, "pod-a");
  Join(s.get(), 0, "pod-b");
  WorkerProgress p;
  p.master_version = 250;
  uint64_t held = 0;
  ASSERT_TRUE(s->Heartbeat(1, a, p, &held).ok());
  EXPECT_EQ(s->phase(), JobPhase::kRunning);
  EXPECT_DOUBLE_EQ(s->Describe(1).progress, 0.5);
  p.master_version = 500;
  ASSERT_TRUE(s->Heartbeat(2, a, p, &held).ok());
  EXPECT_EQ(s->phase(), JobPhase::kSucceeded);
  EXPECT_EQ(s->lifecycle().current().reason, "MaxUpdatesReached");
}

TEST(CoordinatorStateTest, MaxUpdatesJobsRunEpochAfterEpoch) {
  CoordinatorConfig c = Config();
  c.epochs = 0;
  c.max_updates = 1000000;
  auto s = NewState(c);
  WorkerId a = Join(s.get(), 0, "pod-a");
  Join(s.get(), 0, "pod-b");
  for (int i = 0; i < 35; ++i) Finish(s.get(), 1, a, Take(s.get(), 1, a).id);
  EXPECT_EQ(s->tasks().epoch(), 3u);
  EXPECT_EQ(s->phase(), JobPhase::kRunning);
}

TEST(CoordinatorStateTest, SucceedsWhenTheEvaluatorReportsTheTargetAccuracy) {
  CoordinatorConfig c = Config();
  c.target.metric = "accuracy";
  c.target.at_least = 0.9;
  auto s = NewState(c);
  WorkerId e = Join(s.get(), 0, "eval", WorkerRole::kEvaluator);
  Join(s.get(), 0, "pod-a");
  Join(s.get(), 0, "pod-b");
  ASSERT_TRUE(s->ReportEvaluation(1, e, 0.85, 0.4, 100).ok());
  EXPECT_EQ(s->phase(), JobPhase::kRunning);
  // An older version's result is accepted and ignored.
  ASSERT_TRUE(s->ReportEvaluation(2, e, 0.95, 0.1, 50).ok());
  EXPECT_EQ(s->phase(), JobPhase::kRunning);
  EXPECT_EQ(s->Describe(2).last_eval_version, 100u);
  ASSERT_TRUE(s->ReportEvaluation(3, e, 0.91, 0.2, 200).ok());
  EXPECT_EQ(s->phase(), JobPhase::kSucceeded);
  EXPECT_EQ(s->lifecycle().current().reason, "TargetAccuracyReached");
  EXPECT_EQ(s->Describe(3).master_version, 200u);
}

TEST(CoordinatorStateTest, SucceedsWhenTheUsersMetricReachesItsBound) {
  CoordinatorConfig c = Config();
  c.target.metric = "perplexity";
  c.target.at_most = 20;
  auto s = NewState(c);
  WorkerId e = Join(s.get(), 0, "eval", WorkerRole::kEvaluator);
  Join(s.get(), 0, "pod-a");
  Join(s.get(), 0, "pod-b");
  // An evaluation without the metric, and one above the bound, go on.
  ASSERT_TRUE(s->ReportEvaluation(1, e, 0.99, 0.1, 10).ok());
  ASSERT_TRUE(s->ReportEvaluation(2, e, 0.2, 3.1, 20, {{"perplexity", 22.5}, {"top5", 0.7}}).ok());
  EXPECT_EQ(s->phase(), JobPhase::kRunning);
  JobStatus running = s->Describe(2);
  ASSERT_EQ(running.last_eval_metrics.size(), 2u);
  EXPECT_EQ(running.last_eval_metrics[0].name, "perplexity");
  EXPECT_EQ(running.last_eval_metrics[0].value, 22.5);
  ASSERT_TRUE(s->ReportEvaluation(3, e, 0.25, 2.9, 30, {{"perplexity", 18.4}}).ok());
  EXPECT_EQ(s->phase(), JobPhase::kSucceeded);
  EXPECT_EQ(s->lifecycle().current().reason, "TargetReached");
  EXPECT_EQ(s->lifecycle().current().message,
            "perplexity 18.4 at version 30 reached the target perplexity <= 20");
}

TEST(CoordinatorStateTest, LossAtMostIsATarget) {
  CoordinatorConfig c = Config();
  c.target.metric = "loss";
  c.target.at_most = 0.5;
  auto s = NewState(c);
  WorkerId e = Join(s.get(), 0, "eval", WorkerRole::kEvaluator);
  ASSERT_TRUE(s->ReportEvaluation(1, e, 0.9, 0.6, 10).ok());
  EXPECT_EQ(s->phase(), JobPhase::kPending);
  ASSERT_TRUE(s->ReportEvaluation(2, e, 0.9, 0.5, 20).ok());
  EXPECT_EQ(s->phase(), JobPhase::kSucceeded);
  EXPECT_EQ(s->lifecycle().current().reason, "TargetReached");
}

TEST(CoordinatorStateTest, RefusesMalformedMetricsNamingTheEntry) {
  auto s = NewState();
  WorkerId e = Join(s.get(), 0, "eval", WorkerRole::kEvaluator);
  auto refused = [&](const EvalMetrics& metrics) {
    return s->ReportEvaluation(1, e, 0.5, 0.5, 5, metrics).message();
  };
  EXPECT_EQ(refused({{"top5", 0.7}, {"Top-5", 0.7}}),
            std::string("metrics[1].name: ") + kMetricNameMeaning + ", got 'Top-5'");
  EXPECT_EQ(refused({{"accuracy", 0.7}}),
            "metrics[0].name: accuracy has a field of its own in the request");
  EXPECT_EQ(refused({{"f1", 0.7}, {"f1", 0.6}}), "metrics[1].name: f1 is also metrics[0]");
  EXPECT_EQ(refused({{"f1", std::nan("")}}), "metrics[0].value: must be finite, got nan");
  EvalMetrics many;
  for (size_t i = 0; i <= kMaxEvalMetrics; ++i) many.push_back({"m" + std::to_string(i), 1});
  EXPECT_EQ(refused(many), "metrics: at most 32 metrics, got 33");
  EXPECT_FALSE(s->Describe(1).last_accuracy.has_value());
}

TEST(CoordinatorStateTest, BackToPendingWhenTooFewTrainersRemain) {
  auto s = NewState();
  WorkerId a = Join(s.get(), 0, "pod-a");
  WorkerId b = Join(s.get(), 0, "pod-b");
  DataTask t = Take(s.get(), 1, a);
  bool gone = false;
  ASSERT_TRUE(s->Leave(2, b, LeaveReason::kPreempted, &gone).ok());
  EXPECT_EQ(s->phase(), JobPhase::kPending);
  EXPECT_EQ(s->lifecycle().current().reason, "NotEnoughWorkers");
  EXPECT_EQ(s->lifecycle().current().message, "1 of at least 2 trainers live");
  // a keeps its task and may finish it, but gets no new one.
  EXPECT_EQ(Take(s.get(), 3, a).id, t.id);
  Finish(s.get(), 4, a, t.id);
  NextTaskResult next;
  ASSERT_TRUE(s->NextTask(5, a, &next).ok());
  EXPECT_EQ(next.outcome, TaskOutcome::kWaitForWorkers);
}

TEST(CoordinatorStateTest, FailsWhenNoWorkerIsLiveForTheTimeout) {
  auto s = NewState();
  WorkerId a = Join(s.get(), 0, "pod-a");
  bool gone = false;
  ASSERT_TRUE(s->Leave(100, a, LeaveReason::kPreempted, &gone).ok());
  s->Tick(699.9);
  EXPECT_EQ(s->phase(), JobPhase::kPending);
  TickResult t = s->Tick(700);
  EXPECT_TRUE(t.phase_changed);
  EXPECT_EQ(s->phase(), JobPhase::kFailed);
  EXPECT_EQ(s->lifecycle().current().reason, "NoLiveWorkers");
  EXPECT_EQ(s->lifecycle().current().message, "no worker was live for 600 s");
}

TEST(CoordinatorStateTest, FailsWhenNoWorkerEverJoins) {
  auto s = NewState(Config(), 50);
  s->Tick(649);
  EXPECT_EQ(s->phase(), JobPhase::kPending);
  s->Tick(650);
  EXPECT_EQ(s->phase(), JobPhase::kFailed);
}

TEST(CoordinatorStateTest, FailsWhenTheMasterIsUnreachableForTheTimeout) {
  auto s = NewState();
  WorkerId a = Join(s.get(), 0, "pod-a");
  Join(s.get(), 0, "pod-b");
  uint64_t held = 0;
  s->ReportMasterHealth(10, false, "connection refused");
  s->ReportMasterHealth(200, true, "");  // it came back: the clock restarts
  s->ReportMasterHealth(250, false, "connection refused");
  for (double t = 250; t < 550; t += 5) {
    ASSERT_TRUE(s->Heartbeat(t, a, {}, &held).ok());
    ASSERT_TRUE(s->Heartbeat(t, 2, {}, &held).ok());
    s->Tick(t);
  }
  EXPECT_EQ(s->phase(), JobPhase::kRunning);
  s->Tick(550);
  EXPECT_EQ(s->phase(), JobPhase::kFailed);
  EXPECT_EQ(s->lifecycle().current().reason, "MasterUnreachable");
  EXPECT_EQ(s->lifecycle().current().message,
            "the master was unreachable for 300 s: connection refused");
}

TEST(CoordinatorStateTest, WithShardsTheMasterIsUnreachableWhileAnyShardIs) {
  CoordinatorConfig c = Config();
  c.master_shards = 3;
  auto s = NewState(c);
  WorkerId a = Join(s.get(), 0, "pod-a");
  WorkerId b = Join(s.get(), 0, "pod-b");
  uint64_t held = 0;
  s->ReportMasterHealth(10, 1, false, "master shard 1 (m1:7070): connection refused");
  s->ReportMasterHealth(100, 2, false, "master shard 2 (m2:7070): connection refused");
  // The other shards answering does not restart shard 1's clock; shard 2
  // coming back leaves shard 1 the longest unreachable.
  s->ReportMasterHealth(150, 0, true, "");
  s->ReportMasterHealth(200, 2, true, "");
  s->ReportMasterHealth(250, 2, false, "master shard 2 (m2:7070): deadline exceeded");
  s->ReportMasterHealth(260, 7, false, "no such shard");  // ignored
  for (double t = 250; t < 310; t += 5) {
    ASSERT_TRUE(s->Heartbeat(t, a, {}, &held).ok());
    ASSERT_TRUE(s->Heartbeat(t, b, {}, &held).ok());
    s->Tick(t);
  }
  EXPECT_EQ(s->phase(), JobPhase::kRunning);
  s->Tick(310);
  EXPECT_EQ(s->phase(), JobPhase::kFailed);
  EXPECT_EQ(s->lifecycle().current().reason, "MasterUnreachable");
  EXPECT_EQ(s->lifecycle().current().message,
            "the master was unreachable for 300 s: master shard 1 (m1:7070): connection refused");

  // A shard back in time keeps the job running.
  c.lease_seconds = 10000;
  auto r = NewState(c);
  Join(r.get(), 0, "pod-a");
  Join(r.get(), 0, "pod-b");
  r->ReportMasterHealth(10, 1, false, "down");
  r->ReportMasterHealth(300, 1, true, "");
  r->ReportMasterHealth(305, 0, false, "down");
  r->Tick(600);
  EXPECT_EQ(r->phase(), JobPhase::kRunning);
  r->Tick(605);
  EXPECT_EQ(r->phase(), JobPhase::kFailed);
}

TEST(CoordinatorStateTest, WithShardsTheJobsVersionIsTheLeastOfTheShards) {
  CoordinatorConfig c = Config();
  c.epochs = 0;
  c.max_updates = 500;
  c.master_shards = 2;
  auto s = NewState(c);
  WorkerId a = Join(s.get(), 0, "pod-a");
  Join(s.get(), 0, "pod-b");
  s->ObserveMaster(1, 0, {10, 0, 0}, 300, 0);
  EXPECT_EQ(s->master_version(), 0u) << "shard 1 not heard of: it may have applied nothing";
  s->ObserveMaster(1, 1, {10, 0, 0}, 200, 0);
  EXPECT_EQ(s->master_version(), 200u);
  EXPECT_DOUBLE_EQ(s->Describe(1).progress, 0.4);
  // The feed's versions of the same run only raise a shard's.
  s->ObserveMaster(2, 1, {10, 0, 0}, 150, 0);
  EXPECT_EQ(s->shard_version(1), 200u);
  s->ObserveMaster(2, 1, {10, 0, 0}, 350, 0);
  EXPECT_EQ(s->master_version(), 300u);
  // A heartbeat's version is one every shard reached.
  WorkerProgress p;
  p.master_version = 400;
  uint64_t held = 0;
  ASSERT_TRUE(s->Heartbeat(3, a, p, &held).ok());
  EXPECT_EQ(s->master_version(), 400u);
  EXPECT_EQ(s->shard_version(0), 400u);
  EXPECT_EQ(s->shard_version(1), 400u);
  // Shard 0 restarted from its checkpoint at 250: the job's version goes
  // back with it.
  s->ObserveMaster(4, 0, {20, 10, 250}, 250, 0);
  EXPECT_EQ(s->master_version(), 250u);
  EXPECT_EQ(s->Describe(4).master_version, 250u);
  // maxUpdates needs every shard there.
  s->ObserveMaster(5, 1, {10, 0, 0}, 600, 0);
  EXPECT_EQ(s->phase(), JobPhase::kRunning);
  s->ObserveMaster(6, 0, {20, 10, 250}, 500, 0);
  EXPECT_EQ(s->phase(), JobPhase::kSucceeded);
  EXPECT_EQ(s->lifecycle().current().reason, "MaxUpdatesReached");
}

TEST(CoordinatorStateTest, FailsAfterTheActiveDeadline) {
  CoordinatorConfig c = Config();
  c.active_deadline_seconds = 3600;
  c.no_worker_timeout_seconds = 0;
  auto s = NewState(c, 1000);
  s->Tick(4599);
  EXPECT_EQ(s->phase(), JobPhase::kPending);
  s->Tick(4600);
  EXPECT_EQ(s->phase(), JobPhase::kFailed);
  EXPECT_EQ(s->lifecycle().current().reason, "DeadlineExceeded");
}

TEST(CoordinatorStateTest, TimeoutsOfZeroNeverFire) {
  CoordinatorConfig c = Config();
  c.no_worker_timeout_seconds = 0;
  c.master_timeout_seconds = 0;
  auto s = NewState(c);
  s->ReportMasterHealth(1, false, "down");
  s->Tick(1e9);
  EXPECT_EQ(s->phase(), JobPhase::kPending);
}

TEST(CoordinatorStateTest, ATerminalPhaseIsNeverLeft) {
  auto s = NewState();
  s->Tick(600);
  ASSERT_EQ(s->phase(), JobPhase::kFailed);
  s->ReportMasterHealth(601, true, "");
  s->Tick(602);
  EXPECT_EQ(s->phase(), JobPhase::kFailed);
  EXPECT_EQ(s->lifecycle().current().reason, "NoLiveWorkers");
}

TEST(CoordinatorStateTest, BadInputIsRefusedWithAPreciseCodeAndChangesNothing) {
  auto s = NewState();
  WorkerId a = Join(s.get(), 0, "pod-a");
  WorkerId b = Join(s.get(), 0, "pod-b");
  WorkerId e = Join(s.get(), 0, "eval", WorkerRole::kEvaluator);
  DataTask t = Take(s.get(), 1, a);
  const std::string before = Saved(*s);
  const uint64_t durable = s->durable_generation();

  RegisterResult r;
  EXPECT_EQ(s->Register(2, "", WorkerRole::kTrainer, 0, &r).code(),
            Status::Code::kInvalidArgument);
  EXPECT_EQ(s->Register(2, "pod a", WorkerRole::kTrainer, 0, &r).code(),
            Status::Code::kInvalidArgument);
  EXPECT_EQ(s->Register(2, std::string(254, 'x'), WorkerRole::kTrainer, 0, &r).code(),
            Status::Code::kInvalidArgument);
  EXPECT_EQ(s->Register(2, "eval-2", WorkerRole::kEvaluator, 0, &r).code(),
            Status::Code::kAlreadyExists);

  uint64_t held = 0;
  WorkerProgress p;
  EXPECT_EQ(s->Heartbeat(2, 0, p, &held).code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(s->Heartbeat(2, 42, p, &held).code(), Status::Code::kNotFound);
  p.loss = std::numeric_limits<float>::infinity();
  EXPECT_EQ(s->Heartbeat(2, a, p, &held).code(), Status::Code::kInvalidArgument);
  p.loss.reset();
  p.task_id = t.id;
  p.samples_done = 101;
  Status too_many = s->Heartbeat(2, a, p, &held);
  EXPECT_EQ(too_many.code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(too_many.message(), "samples_done: 101 exceeds task 1's 100 samples");

  NextTaskResult next;
  EXPECT_EQ(s->NextTask(2, 42, &next).code(), Status::Code::kNotFound);
  CompleteTaskResult done;
  EXPECT_EQ(s->CompleteTask(2, a, 0, &done).code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(s->CompleteTask(2, a, 999, &done).code(), Status::Code::kNotFound);

  const double nan = std::nan("");
  EXPECT_EQ(s->ReportEvaluation(2, e, nan, 0.1, 5).code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(s->ReportEvaluation(2, e, 1.5, 0.1, 5).code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(s->ReportEvaluation(2, e, 0.5, -1, 5).code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(s->ReportEvaluation(2, e, 0.5, nan, 5).code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(s->ReportEvaluation(2, a, 0.5, 0.1, 5).code(), Status::Code::kFailedPrecondition);
  bool gone = false;
  EXPECT_EQ(s->Leave(2, 0, LeaveReason::kFailed, &gone).code(), Status::Code::kInvalidArgument);

  EXPECT_EQ(Saved(*s), before);
  EXPECT_EQ(s->durable_generation(), durable);
  // None of the rejected calls renewed a lease: all expire at 10 (b and e
  // joined at 0, a's last call was at 1).
  EXPECT_EQ(s->Tick(10).expired, (std::vector<WorkerId>{b, e}));
  EXPECT_EQ(s->Tick(11).expired, (std::vector<WorkerId>{a}));
}

TEST(CoordinatorStateTest, CallsFromAGoneWorkerAreFailedPrecondition) {
  auto s = NewState();
  WorkerId a = Join(s.get(), 0, "pod-a");
  s->Tick(10);
  uint64_t held = 0;
  Status st = s->Heartbeat(11, a, {}, &held);
  EXPECT_EQ(st.code(), Status::Code::kFailedPrecondition);
  EXPECT_EQ(st.message(),
            "worker 1 is no longer live (it left or its lease expired); register again");
  NextTaskResult next;
  EXPECT_EQ(s->NextTask(11, a, &next).code(), Status::Code::kFailedPrecondition);
}

TEST(CoordinatorStateTest, HeartbeatProgressAboutAnotherTaskIsIgnored) {
  auto s = NewState();
  WorkerId a = Join(s.get(), 0, "pod-a");
  Join(s.get(), 0, "pod-b");
  DataTask t1 = Take(s.get(), 1, a);
  Finish(s.get(), 2, a, t1.id);
  DataTask t2 = Take(s.get(), 2, a);
  WorkerProgress late;  // sent before the completion, arriving after it
  late.task_id = t1.id;
  late.samples_done = 100;
  uint64_t held = 0;
  ASSERT_TRUE(s->Heartbeat(3, a, late, &held).ok());
  EXPECT_EQ(held, t2.id);
  EXPECT_EQ(s->membership().Find(a)->samples_done, 0u);
}

TEST(CoordinatorStateTest, DescribeReportsWorkersTasksAndProgress) {
  auto s = NewState();
  WorkerId a = Join(s.get(), 0, "pod-a");
  Join(s.get(), 0, "pod-b");
  Finish(s.get(), 1, a, Take(s.get(), 1, a).id);
  DataTask t = Take(s.get(), 1, a);
  WorkerProgress p;
  p.task_id = t.id;
  p.samples_done = 50;
  p.loss = 0.25f;
  uint64_t held = 0;
  ASSERT_TRUE(s->Heartbeat(2, a, p, &held).ok());
  JobStatus st = s->Describe(4);
  EXPECT_EQ(st.job_name, "test-job");
  EXPECT_EQ(st.phase, JobPhase::kRunning);
  EXPECT_EQ(st.live_workers, 2u);
  EXPECT_EQ(st.live_trainers, 2u);
  EXPECT_EQ(st.counters.joins, 2u);
  ASSERT_EQ(st.workers.size(), 2u);
  EXPECT_EQ(st.workers[0].record.host, "pod-a");
  EXPECT_EQ(st.workers[0].record.task_id, t.id);
  EXPECT_TRUE(st.workers[0].record.has_loss);
  EXPECT_EQ(st.workers[0].record.loss, 0.25f);
  EXPECT_EQ(st.workers[0].seconds_since_heartbeat, 2);
  EXPECT_EQ(st.tasks_total, 10u);
  EXPECT_EQ(st.tasks_done, 1u);
  EXPECT_EQ(st.tasks_in_flight, 1u);
  EXPECT_EQ(st.tasks_queued, 8u);
  EXPECT_EQ(st.samples_done_in_epoch, 150u);
  EXPECT_DOUBLE_EQ(st.progress, 0.15 / 2);
}

TEST(CoordinatorStateTest, ConfigsOutOfRangeAreRefused) {
  std::unique_ptr<CoordinatorState> s;
  CoordinatorConfig c = Config();
  c.samples_per_task = 0;
  EXPECT_EQ(CoordinatorState::Create(c, 0, &s).code(), Status::Code::kInvalidArgument);
  c = Config();
  c.max_updates = 10;  // and epochs
  EXPECT_EQ(CoordinatorState::Create(c, 0, &s).code(), Status::Code::kInvalidArgument);
  c = Config();
  c.lease_seconds = 0;
  EXPECT_EQ(CoordinatorState::Create(c, 0, &s).code(), Status::Code::kInvalidArgument);
  c = Config();
  c.epochs = 0.0001;  // less than one sample
  EXPECT_EQ(CoordinatorState::Create(c, 0, &s).code(), Status::Code::kInvalidArgument);
}

TEST(CoordinatorStateTest, ConfigFromTheJobManifest) {
  TrainingJob job;
  job.name = "mnist";
  job.training.batch_size = 128;
  job.training.epochs = 3;
  job.workers.replicas = 8;
  job.workers.min_replicas = 0;  // = replicas
  job.coordinator.lease_seconds = 15;
  job.training.mode = "sync";
  CoordinatorConfig c;
  ASSERT_TRUE(CoordinatorConfigFromJob(job, 60000, 200, &c).ok());
  // 8 trainers: at least 8 tasks each per epoch, 60000 / 64 = 937 samples,
  // so 7 batches (896 samples) per task rather than 200.
  EXPECT_EQ(c.samples_per_task, 7u * 128);
  EXPECT_EQ(c.min_trainers, 8u);
  EXPECT_EQ(c.desired_trainers, 8u);
  EXPECT_EQ(c.lease_seconds, 15);
  EXPECT_FALSE(c.evaluator_is_member);
  EXPECT_FALSE(c.idle_trainers_are_members);  // sync
  // One trainer and a bigger set: --task-batches bounds the task.
  job.workers.replicas = 1;
  job.training.mode = "async";
  ASSERT_TRUE(CoordinatorConfigFromJob(job, 1000000, 200, &c).ok());
  EXPECT_EQ(c.samples_per_task, 200u * 128);
  EXPECT_TRUE(c.idle_trainers_are_members);
  job.workers.replicas = 8;
  // Tasks hold at least one batch, and never exceed the epoch.
  ASSERT_TRUE(CoordinatorConfigFromJob(job, 1000, 200, &c).ok());
  EXPECT_EQ(c.samples_per_task, 128u);
  ASSERT_TRUE(CoordinatorConfigFromJob(job, 100, 200, &c).ok());
  EXPECT_EQ(c.samples_per_task, 100u);
  EXPECT_EQ(CoordinatorConfigFromJob(job, 0, 200, &c).code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(CoordinatorConfigFromJob(job, 1000, 0, &c).code(), Status::Code::kInvalidArgument);
}

// Sharded data: a position is a shard and a task one shard, whatever the
// samples; an epoch of 40 shards is 40 tasks, each assigned once.
TEST(CoordinatorStateTest, ShardedDataIsCutIntoOneShardPerTask) {
  TrainingJob job;
  job.name = "shards";
  job.training.batch_size = 64;
  job.training.epochs = 1;
  job.workers.replicas = 2;
  job.workers.min_replicas = 1;
  job.data.format = "shards";
  job.data.shards = 40;
  job.data.train_samples = 60000;
  CoordinatorConfig c;
  ASSERT_TRUE(CoordinatorConfigFromJob(job, 60000, 200, &c).ok());
  EXPECT_TRUE(c.shards);
  EXPECT_EQ(c.train_samples, 40u);
  EXPECT_EQ(c.samples_per_task, 1u);
  std::unique_ptr<CoordinatorState> state;
  ASSERT_TRUE(CoordinatorState::Create(c, 0, &state).ok());
  EXPECT_EQ(state->tasks().num_tasks(), 40u);
  RegisterResult r;
  ASSERT_TRUE(state->Register(0, "pod-a", WorkerRole::kTrainer, 0, &r).ok());
  NextTaskResult next;
  ASSERT_TRUE(state->NextTask(0, r.id, &next).ok());
  ASSERT_EQ(next.outcome, TaskOutcome::kAssigned);
  EXPECT_EQ(next.task.range.begin, 0u);
  EXPECT_EQ(next.task.range.end, 1u);
  // Fewer shards than an epoch's fraction can cover: refused.
  job.training.epochs = 0.01;
  EXPECT_EQ(CoordinatorConfigFromJob(job, 60000, 200, &c).code(), Status::Code::kInvalidArgument);
}

}  // namespace
}  // namespace gaptrain
