// Tests FormatJobStatus, what `gaptrain status` prints, on filled
// CoordinatorStatusResponse messages: phase and reason, message, epoch and
// progress, the last evaluation (or "not evaluated yet"), worker counts,
// and the workers table sorted by worker id.

#include "cli/run/status_command.h"

#include <string>

#include <gtest/gtest.h>

namespace gaptrain {
namespace {

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

void AddWorker(proto::CoordinatorStatusResponse* st, uint32_t id, const std::string& host,
               proto::WorkerRole role, uint64_t task, uint32_t samples, double seen,
               const float* loss) {
  proto::LiveWorker* w = st->add_workers();
  w->set_worker_id(id);
  w->set_host(host);
  w->set_role(role);
  w->set_task_id(task);
  w->set_samples_done(samples);
  w->set_seconds_since_heartbeat(seen);
  if (loss != nullptr) w->set_loss(*loss);
}

proto::CoordinatorStatusResponse RunningJob() {
  proto::CoordinatorStatusResponse st;
  st.set_job_name("mnist-ga");
  st.set_phase(proto::JOB_PHASE_RUNNING);
  st.set_reason("MinReplicasAvailable");
  st.set_message("2 of 2 trainers live");
  st.set_epoch(1);
  st.set_epochs(3);
  st.set_progress(0.4567);
  st.set_tasks_done(5);
  st.set_tasks_total(10);
  st.set_tasks_in_flight(2);
  st.set_tasks_queued(3);
  st.set_master_version(1234);
  st.set_last_accuracy(0.9812);
  st.set_last_eval_loss(0.07123);
  st.set_last_eval_version(1200);
  st.set_live_workers(3);
  st.set_live_trainers(2);
  st.set_min_trainers(1);
  st.set_joined(4);
  st.set_preempted(1);
  st.set_failed(0);
  st.set_expired(1);
  st.set_tasks_reassigned(2);
  // Out of id order on purpose.
  const float loss_7 = 0.1234f, loss_5 = 0.25f;
  AddWorker(&st, 7, "trainer-1", proto::WORKER_ROLE_TRAINER, 12, 640, 0.42, &loss_7);
  AddWorker(&st, 2, "evaluator", proto::WORKER_ROLE_EVALUATOR, 0, 0, 1.5, nullptr);
  AddWorker(&st, 5, "trainer-0", proto::WORKER_ROLE_TRAINER, 11, 320, 0, &loss_5);
  return st;
}

TEST(FormatJobStatusTest, RunningJobWithWorkers) {
  EXPECT_EQ(FormatJobStatus(RunningJob()),
            "job mnist-ga: Running (MinReplicasAvailable)\n"
            "  2 of 2 trainers live\n"
            "  epoch 2 of 3, 45.7% of the job; tasks 5/10 done, 2 in flight, 3 queued\n"
            "  master version 1234; last evaluation 98.12% (loss 0.0712) at version 1200\n"
            "  workers: 3 live (2 trainers, at least 1 needed); 4 joined, 1 preempted, "
            "0 failed, 1 lost (lease expired); 2 tasks reassigned\n"
            "    ID  HOST             ROLE        TASK  SAMPLES     LOSS LAST SEEN\n"
            "     2  evaluator        evaluator      0        0        -      1.5s\n"
            "     5  trainer-0        trainer       11      320   0.2500      0.0s\n"
            "     7  trainer-1        trainer       12      640   0.1234      0.4s\n");
}

TEST(FormatJobStatusTest, TheUsersMetricsAndTheTarget) {
  proto::CoordinatorStatusResponse st = RunningJob();
  proto::EvalMetric* top5 = st.add_last_eval_metrics();
  top5->set_name("top5_accuracy");
  top5->set_value(0.99531);
  st.set_target("top5_accuracy >= 0.999");
  const std::string text = FormatJobStatus(st);
  EXPECT_TRUE(Contains(text, "at version 1200, top5_accuracy 0.9953\n"
                             "  target: top5_accuracy >= 0.999\n  workers:"))
      << text;
}

TEST(FormatJobStatusTest, ATrainersDataThatIsUnavailable) {
  proto::CoordinatorStatusResponse st = RunningJob();
  st.set_tasks_released(3);
  proto::DataUnavailable* d = st.mutable_data_unavailable();
  d->set_worker_id(7);
  d->set_host("trainer-1");
  d->set_message("ConnectionRefusedError: store:9000 refused the connection");
  d->set_releases(2);
  const std::string text = FormatJobStatus(st);
  EXPECT_TRUE(Contains(text, "  data unavailable: trainer trainer-1 (worker 7): "
                             "ConnectionRefusedError: store:9000 refused the connection (2 tasks "
                             "handed back)\n  workers:"))
      << text;
  EXPECT_TRUE(Contains(text, "tasks reassigned, 3 handed back (data unavailable)\n")) << text;
  st.clear_data_unavailable();
  EXPECT_FALSE(Contains(FormatJobStatus(st), "data unavailable:"));
}

TEST(FormatJobStatusTest, SeveralMasterShardsAreListedOneMasterIsNot) {
  proto::CoordinatorStatusResponse st = RunningJob();
  proto::MasterShardStatus* m = st.add_masters();
  m->set_address("127.0.0.1:7070");
  m->set_version(1240);
  m->mutable_totals()->set_updates(1240);
  m->set_reachable(true);
  EXPECT_FALSE(Contains(FormatJobStatus(st), "master shard")) << "one master: as before";
  m = st.add_masters();
  m->set_shard(1);
  m->set_address("127.0.0.1:7071");
  m->set_version(1234);
  m->mutable_totals()->set_updates(300);
  m->set_reachable(false);
  EXPECT_TRUE(Contains(FormatJobStatus(st),
                       "  master shard 0 127.0.0.1:7070: version 1240, 1240 updates this run\n"
                       "  master shard 1 127.0.0.1:7071: version 1234, 300 updates this run, "
                       "unreachable\n"
                       "  master version 1234;"))
      << FormatJobStatus(st);
}

TEST(FormatJobStatusTest, WorkersAreSortedById) {
  proto::CoordinatorStatusResponse st = RunningJob();
  const float loss = 1;
  AddWorker(&st, 1, "trainer-9", proto::WORKER_ROLE_TRAINER, 3, 1, 0, &loss);
  const std::string text = FormatJobStatus(st);
  const size_t p1 = text.find("trainer-9"), p2 = text.find("evaluator "),
               p5 = text.find("trainer-0"), p7 = text.find("trainer-1 ");
  ASSERT_NE(p1, std::string::npos);
  ASSERT_NE(p2, std::string::npos);
  ASSERT_NE(p5, std::string::npos);
  ASSERT_NE(p7, std::string::npos);
  EXPECT_LT(p1, p2);
  EXPECT_LT(p2, p5);
  EXPECT_LT(p5, p7);
}

TEST(FormatJobStatusTest, NotEvaluatedYetAndNoWorkers) {
  proto::CoordinatorStatusResponse st;
  st.set_job_name("fresh");
  st.set_phase(proto::JOB_PHASE_PENDING);
  st.set_master_version(0);
  const std::string text = FormatJobStatus(st);
  EXPECT_EQ(text,
            "job fresh: Pending\n"
            "  epoch 1, 0.0% of the job; tasks 0/0 done, 0 in flight, 0 queued\n"
            "  master version 0; not evaluated yet\n"
            "  workers: 0 live (0 trainers, at least 0 needed); 0 joined, 0 preempted, "
            "0 failed, 0 lost (lease expired); 0 tasks reassigned\n");
  EXPECT_FALSE(Contains(text, "HOST"));
}

TEST(FormatJobStatusTest, AccuracyOfZeroIsStillAnEvaluation) {
  proto::CoordinatorStatusResponse st = RunningJob();
  st.set_last_accuracy(0);
  const std::string text = FormatJobStatus(st);
  EXPECT_TRUE(Contains(text, "last evaluation 0.00% (loss 0.0712) at version 1200")) << text;
  EXPECT_FALSE(Contains(text, "not evaluated yet")) << text;
  st.clear_last_accuracy();
  EXPECT_TRUE(Contains(FormatJobStatus(st), "; not evaluated yet\n")) << FormatJobStatus(st);
}

TEST(FormatJobStatusTest, FinishedJob) {
  proto::CoordinatorStatusResponse st = RunningJob();
  st.set_phase(proto::JOB_PHASE_SUCCEEDED);
  st.set_reason("EpochsCompleted");
  st.set_message("");
  st.set_epochs(2.5);
  st.set_progress(1);
  const std::string text = FormatJobStatus(st);
  EXPECT_EQ(text.rfind("job mnist-ga: Succeeded (EpochsCompleted)\n  epoch 2 of 2.5, 100.0% ", 0),
            0u)
      << text;
  st.set_phase(proto::JOB_PHASE_FAILED);
  st.set_reason("");
  EXPECT_EQ(FormatJobStatus(st).rfind("job mnist-ga: Failed\n", 0), 0u) << FormatJobStatus(st);
}

}  // namespace
}  // namespace gaptrain
