#include "services/coordinator/coordinator_service.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <prometheus/text_serializer.h>

#include <atomic>
#include <cmath>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "services/coordinator/coordinator_client.h"
#include "services/coordinator/status_json.h"
#include "services/net/http_client.h"
#include "services/net/http_server.h"

namespace gaptrain {
namespace {

constexpr char kToken[] = "coordinator-test-token";

CoordinatorConfig Config() {
  CoordinatorConfig c;
  c.job_name = "service-test";
  c.train_samples = 1000;
  c.samples_per_task = 100;
  c.shuffle_seed = 7;
  c.batch_size = 10;
  c.epochs = 2;
  c.min_trainers = 2;
  c.desired_trainers = 3;
  c.lease_seconds = 10;
  return c;
}

// A coordinator on 127.0.0.1:<ephemeral> with a fake clock, a persist
// function that keeps the last snapshot (and can be made to fail), and a
// members function that keeps the newest set.
class CoordinatorServer {
 public:
  explicit CoordinatorServer(CoordinatorConfig config = Config()) {
    std::unique_ptr<CoordinatorState> state;
    EXPECT_TRUE(CoordinatorState::Create(config, now_.load(), &state).ok());
    metrics_ = std::make_shared<CoordinatorMetrics>(std::make_shared<prometheus::Registry>());
    CoordinatorService::Options options;
    options.token = kToken;
    options.master_addresses = {"master:7070"};
    service_ = std::make_unique<CoordinatorService>(std::move(state), options, metrics_,
                                                    [this] { return now_.load(); });
    service_->set_persist_fn([this](const proto::CoordinatorSnapshot& s) {
      std::lock_guard<std::mutex> lock(mu_);
      if (fail_persist_) return Status::Unavailable("disk full");
      persisted_ = s;
      ++writes_;
      return Status::OK();
    });
    service_->set_members_fn([this](uint64_t generation, const std::vector<WorkerId>& m) {
      std::lock_guard<std::mutex> lock(mu_);
      if (generation >= members_generation_) {
        members_generation_ = generation;
        members_ = m;
      }
    });
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    EXPECT_NE(port_, 0);
  }
  ~CoordinatorServer() { server_->Shutdown(); }

  CoordinatorClient Client(const std::string& token = kToken) {
    CoordinatorClient::Options o;
    o.token = token;
    return CoordinatorClient(
        grpc::CreateChannel("127.0.0.1:" + std::to_string(port_), grpc::InsecureChannelCredentials()),
        o);
  }
  void Advance(double seconds) { now_ = now_.load() + seconds; }
  CoordinatorService* service() { return service_.get(); }
  std::string Metrics() {
    return prometheus::TextSerializer().Serialize(metrics_->registry()->Collect());
  }
  proto::CoordinatorSnapshot persisted() {
    std::lock_guard<std::mutex> lock(mu_);
    return persisted_;
  }
  int writes() {
    std::lock_guard<std::mutex> lock(mu_);
    return writes_;
  }
  void set_fail_persist(bool fail) {
    std::lock_guard<std::mutex> lock(mu_);
    fail_persist_ = fail;
  }
  std::vector<WorkerId> members() {
    std::lock_guard<std::mutex> lock(mu_);
    return members_;
  }

 private:
  std::atomic<double> now_{1700000000.0};
  std::shared_ptr<CoordinatorMetrics> metrics_;
  std::unique_ptr<CoordinatorService> service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  std::mutex mu_;
  bool fail_persist_ = false;
  proto::CoordinatorSnapshot persisted_;
  int writes_ = 0;
  uint64_t members_generation_ = 0;
  std::vector<WorkerId> members_;
};

// The value of the series whose line starts with `series` ("name{labels}").
double MetricValue(const std::string& text, const std::string& series) {
  size_t at = text.find("\n" + series + " ");
  if (at == std::string::npos) return std::nan("");
  return std::stod(text.substr(at + series.size() + 2));
}

TEST(CoordinatorServiceTest, SixteenThreadsRegisteringAtOnceGetUniqueIds) {
  CoordinatorServer server;
  constexpr int kThreads = 16;
  std::vector<uint32_t> ids(kThreads);
  std::vector<Status> results(kThreads);
  std::atomic<int> ready{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      CoordinatorClient client = server.Client();  // its own channel
      ready.fetch_add(1);
      while (ready.load() < kThreads) std::this_thread::yield();  // start together
      proto::RegisterResponse r;
      results[i] = client.Register("pod-" + std::to_string(i), proto::WORKER_ROLE_TRAINER, 0, &r);
      ids[i] = r.worker_id();
    });
  }
  for (auto& t : threads) t.join();
  for (const Status& s : results) ASSERT_TRUE(s.ok()) << s.ToString();
  std::set<uint32_t> unique(ids.begin(), ids.end());
  EXPECT_EQ(unique.size(), static_cast<size_t>(kThreads));
  EXPECT_EQ(*unique.begin(), 1u);
  EXPECT_EQ(*unique.rbegin(), static_cast<uint32_t>(kThreads));

  proto::CoordinatorStatusResponse status;
  ASSERT_TRUE(server.Client().GetStatus(&status).ok());
  EXPECT_EQ(status.live_workers(), 16u);
  EXPECT_EQ(status.joined(), 16u);
  EXPECT_EQ(status.phase(), proto::JOB_PHASE_RUNNING);
  EXPECT_EQ(server.members().size(), 16u);  // the newest set reached the master feed
  EXPECT_EQ(server.persisted().next_worker_id(), 17u);
  EXPECT_EQ(server.persisted().workers_size(), 16);
  EXPECT_EQ(MetricValue(server.Metrics(), "gaptrain_coordinator_live_workers"), 16);
  EXPECT_EQ(MetricValue(server.Metrics(), "gaptrain_coordinator_joins_total"), 16);
}

TEST(CoordinatorServiceTest, EveryRpcNeedsTheJobToken) {
  CoordinatorServer server;
  for (const std::string token : {"", "wrong-token"}) {
    CoordinatorClient client = server.Client(token);
    proto::RegisterResponse reg;
    EXPECT_EQ(client.Register("pod-a", proto::WORKER_ROLE_TRAINER, 0, &reg).code(),
              Status::Code::kUnauthenticated);
    proto::HeartbeatRequest hb;
    hb.set_worker_id(1);
    proto::HeartbeatResponse hbr;
    EXPECT_EQ(client.Heartbeat(hb, &hbr).code(), Status::Code::kUnauthenticated);
    proto::NextTaskResponse next;
    EXPECT_EQ(client.NextTask(1, &next).code(), Status::Code::kUnauthenticated);
    proto::CompleteTaskResponse done;
    EXPECT_EQ(client.CompleteTask(1, 1, &done).code(), Status::Code::kUnauthenticated);
    proto::LeaveResponse leave;
    EXPECT_EQ(client.Leave(1, proto::LEAVE_REASON_FAILED, "", &leave).code(),
              Status::Code::kUnauthenticated);
    proto::ReleaseTaskRequest release;
    release.set_worker_id(1);
    release.set_task_id(1);
    release.set_reason(proto::RELEASE_REASON_DATA_UNAVAILABLE);
    proto::ReleaseTaskResponse released;
    EXPECT_EQ(client.ReleaseTask(release, &released).code(), Status::Code::kUnauthenticated);
    proto::ReportEvaluationRequest eval;
    proto::ReportEvaluationResponse evalr;
    EXPECT_EQ(client.ReportEvaluation(eval, &evalr).code(), Status::Code::kUnauthenticated);
    proto::CoordinatorStatusResponse status;
    EXPECT_EQ(client.GetStatus(&status).code(), Status::Code::kUnauthenticated);
  }
  server.service()->WithState(
      [](const CoordinatorState& s) { EXPECT_EQ(s.counters().joins, 0u); });
}

TEST(CoordinatorServiceTest, AWorkersLifeOverGrpc) {
  CoordinatorServer server;
  CoordinatorClient client = server.Client();
  proto::RegisterResponse a, b;
  ASSERT_TRUE(client.Register("pod-a", proto::WORKER_ROLE_UNSPECIFIED, 0, &a).ok());
  EXPECT_EQ(a.role(), proto::WORKER_ROLE_TRAINER);
  EXPECT_EQ(a.job_name(), "service-test");
  EXPECT_EQ(a.master_address(), "master:7070");
  // One master is shard 0 of 1: the list says so too.
  ASSERT_EQ(a.master_addresses_size(), 1);
  EXPECT_EQ(a.master_addresses(0), "master:7070");
  EXPECT_EQ(a.lease_seconds(), 10u);
  EXPECT_EQ(a.train_samples(), 1000u);
  EXPECT_EQ(a.shuffle_seed(), 7u);
  EXPECT_EQ(a.batch_size(), 10u);
  EXPECT_EQ(a.phase(), proto::JOB_PHASE_PENDING);

  proto::NextTaskResponse next;
  ASSERT_TRUE(client.NextTask(a.worker_id(), &next).ok());
  EXPECT_EQ(next.outcome(), proto::NextTaskResponse::WAIT_FOR_WORKERS);
  EXPECT_EQ(next.retry_after_ms(), 100u);  // the job starts with the next registration

  ASSERT_TRUE(client.Register("pod-b", proto::WORKER_ROLE_TRAINER, 0, &b).ok());
  EXPECT_EQ(b.phase(), proto::JOB_PHASE_RUNNING);
  ASSERT_TRUE(client.NextTask(a.worker_id(), &next).ok());
  ASSERT_EQ(next.outcome(), proto::NextTaskResponse::ASSIGNED);
  const proto::DataTask task = next.task();
  EXPECT_EQ(task.epoch(), 0u);
  EXPECT_EQ(task.begin(), 0u);
  EXPECT_EQ(task.end(), 100u);
  // Persisted before the reply.
  EXPECT_EQ(server.persisted().workers(0).task_id(), task.task_id());

  proto::HeartbeatRequest hb;
  hb.set_worker_id(a.worker_id());
  hb.set_task_id(task.task_id());
  hb.set_samples_done(30);
  hb.set_loss(0.75f);
  hb.set_master_version(12);
  proto::HeartbeatResponse hbr;
  ASSERT_TRUE(client.Heartbeat(hb, &hbr).ok());
  EXPECT_EQ(hbr.task_id(), task.task_id());
  EXPECT_EQ(hbr.phase(), proto::JOB_PHASE_RUNNING);

  proto::CompleteTaskResponse done;
  ASSERT_TRUE(client.CompleteTask(a.worker_id(), task.task_id(), &done).ok());
  EXPECT_FALSE(done.already_completed());
  EXPECT_EQ(server.persisted().done_size(), 1);
  ASSERT_TRUE(client.CompleteTask(a.worker_id(), task.task_id(), &done).ok());
  EXPECT_TRUE(done.already_completed());

  proto::LeaveResponse leave;
  ASSERT_TRUE(client.Leave(b.worker_id(), proto::LEAVE_REASON_PREEMPTED, "SIGTERM", &leave).ok());
  EXPECT_FALSE(leave.already_gone());
  ASSERT_TRUE(client.Leave(b.worker_id(), proto::LEAVE_REASON_PREEMPTED, "SIGTERM", &leave).ok());
  EXPECT_TRUE(leave.already_gone());
  EXPECT_EQ(server.members(), (std::vector<WorkerId>{a.worker_id()}));

  const std::string metrics = server.Metrics();
  EXPECT_EQ(MetricValue(metrics, "gaptrain_coordinator_leaves_total{reason=\"preempted\"}"), 1);
  // b left: one trainer of the 3 desired and the 2 needed.
  EXPECT_EQ(MetricValue(metrics, "gaptrain_coordinator_live_trainers"), 1);
  EXPECT_EQ(MetricValue(metrics, "gaptrain_coordinator_desired_trainers"), 3);
  EXPECT_EQ(MetricValue(metrics, "gaptrain_coordinator_min_trainers"), 2);
  EXPECT_EQ(MetricValue(metrics, "gaptrain_coordinator_tasks{state=\"done\"}"), 1);
  EXPECT_EQ(MetricValue(metrics, "gaptrain_coordinator_tasks{state=\"queued\"}"), 9);
  EXPECT_EQ(MetricValue(metrics, "gaptrain_coordinator_phase{phase=\"Pending\"}"), 1);
  EXPECT_EQ(MetricValue(metrics, "gaptrain_coordinator_phase{phase=\"Running\"}"), 0);
  EXPECT_EQ(MetricValue(metrics, "gaptrain_coordinator_master_version"), 12);
}

TEST(CoordinatorServiceTest, LeasesExpireOnTheServiceClockAtTick) {
  CoordinatorServer server;
  CoordinatorClient client = server.Client();
  proto::RegisterResponse a, b;
  ASSERT_TRUE(client.Register("pod-a", proto::WORKER_ROLE_TRAINER, 0, &a).ok());
  ASSERT_TRUE(client.Register("pod-b", proto::WORKER_ROLE_TRAINER, 0, &b).ok());
  proto::NextTaskResponse next;
  ASSERT_TRUE(client.NextTask(a.worker_id(), &next).ok());
  server.Advance(9.5);
  proto::HeartbeatRequest hb;
  hb.set_worker_id(b.worker_id());
  proto::HeartbeatResponse hbr;
  ASSERT_TRUE(client.Heartbeat(hb, &hbr).ok());
  server.Advance(0.5);
  server.service()->Tick();
  EXPECT_EQ(server.members(), (std::vector<WorkerId>{b.worker_id()}));
  hb.set_worker_id(a.worker_id());
  EXPECT_EQ(client.Heartbeat(hb, &hbr).code(), Status::Code::kFailedPrecondition);
  proto::CompleteTaskResponse done;
  EXPECT_EQ(client.CompleteTask(a.worker_id(), next.task().task_id(), &done).code(),
            Status::Code::kFailedPrecondition);
  const std::string metrics = server.Metrics();
  EXPECT_EQ(MetricValue(metrics, "gaptrain_coordinator_lease_expiries_total"), 1);
  EXPECT_EQ(MetricValue(metrics, "gaptrain_coordinator_tasks_reassigned_total"), 1);
  EXPECT_EQ(MetricValue(metrics, "gaptrain_coordinator_stale_completions_total"), 1);
  // The task went back to the front: b gets it.
  ASSERT_TRUE(client.NextTask(b.worker_id(), &next).ok());
  EXPECT_EQ(next.task().begin(), 0u);
}

TEST(CoordinatorServiceTest, BadInputGetsPreciseCodesIsCountedAndChangesNothing) {
  CoordinatorServer server;
  CoordinatorClient client = server.Client();
  proto::RegisterResponse a, e;
  ASSERT_TRUE(client.Register("pod-a", proto::WORKER_ROLE_TRAINER, 0, &a).ok());
  ASSERT_TRUE(client.Register("eval", proto::WORKER_ROLE_EVALUATOR, 0, &e).ok());
  const int writes = server.writes();

  proto::RegisterResponse r;
  Status s = client.Register("", proto::WORKER_ROLE_TRAINER, 0, &r);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(s.message(), "host: required (the pod or host name)");
  EXPECT_EQ(client.Register("pod-x", static_cast<proto::WorkerRole>(9), 0, &r).code(),
            Status::Code::kInvalidArgument);
  EXPECT_EQ(client.Register("eval-2", proto::WORKER_ROLE_EVALUATOR, 0, &r).code(),
            Status::Code::kAlreadyExists);

  proto::NextTaskResponse next;
  s = client.NextTask(99, &next);
  EXPECT_EQ(s.code(), Status::Code::kNotFound);
  EXPECT_EQ(s.message(), "unknown worker 99");
  EXPECT_EQ(client.NextTask(e.worker_id(), &next).code(), Status::Code::kFailedPrecondition);

  proto::CompleteTaskResponse done;
  EXPECT_EQ(client.CompleteTask(a.worker_id(), 3, &done).code(),
            Status::Code::kFailedPrecondition);  // issued, not held

  proto::LeaveResponse leave;
  EXPECT_EQ(client.Leave(a.worker_id(), proto::LEAVE_REASON_UNSPECIFIED, "", &leave).code(),
            Status::Code::kInvalidArgument);

  // ReleaseTask: a reason is required, the message is bounded and one
  // printable line, the worker must be known and hold the task.
  proto::ReleaseTaskRequest release;
  release.set_worker_id(a.worker_id());
  release.set_task_id(1);
  release.set_message("store:9000 refused the connection");
  proto::ReleaseTaskResponse released;
  s = client.ReleaseTask(release, &released);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(s.message(), "reason: required (DATA_UNAVAILABLE)");
  release.set_reason(static_cast<proto::ReleaseReason>(7));
  EXPECT_EQ(client.ReleaseTask(release, &released).code(), Status::Code::kInvalidArgument);
  release.set_reason(proto::RELEASE_REASON_DATA_UNAVAILABLE);
  release.set_message(std::string(2000, 'x'));
  s = client.ReleaseTask(release, &released);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(s.message(), "message: at most 1024 bytes, got 2000");
  release.set_message("refused\r\n");
  s = client.ReleaseTask(release, &released);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(s.message(), "message: UTF-8 without control characters only");
  release.set_message("refused");
  release.set_worker_id(99);
  s = client.ReleaseTask(release, &released);
  EXPECT_EQ(s.code(), Status::Code::kNotFound);
  EXPECT_EQ(s.message(), "unknown worker 99");
  release.set_worker_id(a.worker_id());
  s = client.ReleaseTask(release, &released);  // issued, not held
  EXPECT_EQ(s.code(), Status::Code::kFailedPrecondition);
  EXPECT_EQ(s.message(), "worker 1 does not hold task 1 (it holds none); only a task's holder "
                         "can hand it back");

  proto::ReportEvaluationRequest eval;
  eval.set_worker_id(e.worker_id());
  eval.set_accuracy(std::nan(""));
  eval.set_loss(0.1);
  proto::ReportEvaluationResponse evalr;
  s = client.ReportEvaluation(eval, &evalr);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(s.message().rfind("accuracy: must be in [0, 1]", 0), 0u) << s.message();

  proto::HeartbeatRequest hb;
  hb.set_worker_id(a.worker_id());
  hb.set_loss(std::numeric_limits<float>::infinity());
  proto::HeartbeatResponse hbr;
  EXPECT_EQ(client.Heartbeat(hb, &hbr).code(), Status::Code::kInvalidArgument);

  EXPECT_EQ(server.writes(), writes);  // nothing durable changed
  proto::CoordinatorStatusResponse status;
  ASSERT_TRUE(client.GetStatus(&status).ok());
  EXPECT_EQ(status.live_workers(), 2u);
  EXPECT_EQ(status.tasks_queued(), 10u);
  EXPECT_EQ(status.tasks_released(), 0u);
  EXPECT_FALSE(status.has_data_unavailable());
  EXPECT_FALSE(status.has_last_accuracy());

  const std::string m = server.Metrics();
  auto rejected = [&](const char* verb, const char* code) {
    return MetricValue(m, std::string("gaptrain_coordinator_requests_rejected_total{code=\"") +
                              code + "\",verb=\"" + verb + "\"}");
  };
  EXPECT_EQ(rejected("register", "invalid_argument"), 2);
  EXPECT_EQ(rejected("register", "already_exists"), 1);
  EXPECT_EQ(rejected("next_task", "not_found"), 1);
  EXPECT_EQ(rejected("next_task", "failed_precondition"), 1);
  EXPECT_EQ(rejected("complete_task", "failed_precondition"), 1);
  EXPECT_EQ(rejected("leave", "invalid_argument"), 1);
  EXPECT_EQ(rejected("release_task", "invalid_argument"), 4);
  EXPECT_EQ(rejected("release_task", "not_found"), 1);
  EXPECT_EQ(rejected("release_task", "failed_precondition"), 1);
  EXPECT_EQ(rejected("report_evaluation", "invalid_argument"), 1);
  EXPECT_EQ(rejected("heartbeat", "invalid_argument"), 1);
}

// A trainer whose data store is away hands its task back: persisted before
// the reply, counted, shown in Status, /status and /metrics until the next
// completed task; the other trainer gets the task from the front.
TEST(CoordinatorServiceTest, AReleasedTaskIsRequeuedAndTheJobSaysWhyUntilATaskCompletes) {
  CoordinatorServer server;
  CoordinatorClient client = server.Client();
  proto::RegisterResponse a, b;
  ASSERT_TRUE(client.Register("pod-a", proto::WORKER_ROLE_TRAINER, 0, &a).ok());
  ASSERT_TRUE(client.Register("pod-b", proto::WORKER_ROLE_TRAINER, 0, &b).ok());
  proto::NextTaskResponse next;
  ASSERT_TRUE(client.NextTask(a.worker_id(), &next).ok());
  const proto::DataTask task = next.task();
  server.Advance(5);
  proto::ReleaseTaskRequest release;
  release.set_worker_id(a.worker_id());
  release.set_task_id(task.task_id());
  release.set_reason(proto::RELEASE_REASON_DATA_UNAVAILABLE);
  release.set_message("ConnectionRefusedError: [Errno 111] store:9000 refused the connection");
  proto::ReleaseTaskResponse released;
  ASSERT_TRUE(client.ReleaseTask(release, &released).ok());
  EXPECT_FALSE(released.already_released());
  EXPECT_EQ(released.phase(), proto::JOB_PHASE_RUNNING);
  // Persisted before the reply.
  const proto::CoordinatorSnapshot saved = server.persisted();
  EXPECT_EQ(saved.counters().tasks_released(), 1u);
  EXPECT_EQ(saved.workers(0).task_id(), 0u);
  EXPECT_EQ(saved.workers(0).last_released_task_id(), task.task_id());
  EXPECT_EQ(saved.data_unavailable().releases(), 1u);
  // A retry after a lost reply moves nothing again.
  ASSERT_TRUE(client.ReleaseTask(release, &released).ok());
  EXPECT_TRUE(released.already_released());

  proto::CoordinatorStatusResponse st;
  ASSERT_TRUE(client.GetStatus(&st).ok());
  EXPECT_EQ(st.tasks_released(), 1u);
  EXPECT_EQ(st.tasks_reassigned(), 0u);
  EXPECT_EQ(st.tasks_queued(), 10u);
  EXPECT_EQ(st.live_trainers(), 2u);
  ASSERT_TRUE(st.has_data_unavailable());
  EXPECT_EQ(st.data_unavailable().since(), 1700000005.0);
  EXPECT_EQ(st.data_unavailable().message(), release.message());
  EXPECT_EQ(st.data_unavailable().worker_id(), a.worker_id());
  EXPECT_EQ(st.data_unavailable().host(), "pod-a");
  EXPECT_EQ(st.data_unavailable().releases(), 1u);
  nlohmann::json j = nlohmann::json::parse(JobStatusToJson(server.service()->Describe()));
  EXPECT_EQ(j["tasks"]["released"], 1);
  EXPECT_EQ(j["dataUnavailable"]["since"], "2023-11-14T22:13:25Z");
  EXPECT_EQ(j["dataUnavailable"]["message"], release.message());
  EXPECT_EQ(j["dataUnavailable"]["worker"], a.worker_id());
  EXPECT_EQ(j["dataUnavailable"]["host"], "pod-a");
  EXPECT_EQ(j["dataUnavailable"]["releases"], 1);
  std::string metrics = server.Metrics();
  EXPECT_EQ(MetricValue(metrics,
                        "gaptrain_coordinator_tasks_released_total{reason=\"data_unavailable\"}"),
            1);
  EXPECT_EQ(MetricValue(metrics, "gaptrain_coordinator_data_unavailable"), 1);
  EXPECT_EQ(MetricValue(metrics, "gaptrain_coordinator_tasks_reassigned_total"), 0);

  // b gets the handed-back task from the front and completes it: the
  // store is back.
  ASSERT_TRUE(client.NextTask(b.worker_id(), &next).ok());
  EXPECT_EQ(next.task().task_id(), task.task_id());
  proto::CompleteTaskResponse done;
  ASSERT_TRUE(client.CompleteTask(b.worker_id(), task.task_id(), &done).ok());
  ASSERT_TRUE(client.GetStatus(&st).ok());
  EXPECT_FALSE(st.has_data_unavailable());
  EXPECT_EQ(st.tasks_released(), 1u);
  j = nlohmann::json::parse(JobStatusToJson(server.service()->Describe()));
  EXPECT_FALSE(j.contains("dataUnavailable"));
  metrics = server.Metrics();
  EXPECT_EQ(MetricValue(metrics, "gaptrain_coordinator_data_unavailable"), 0);
  EXPECT_EQ(MetricValue(metrics,
                        "gaptrain_coordinator_tasks_released_total{reason=\"data_unavailable\"}"),
            1);
  // a is still a member and asks again.
  EXPECT_EQ(server.members(), (std::vector<WorkerId>{a.worker_id(), b.worker_id()}));
  ASSERT_TRUE(client.NextTask(a.worker_id(), &next).ok());
  EXPECT_EQ(next.outcome(), proto::NextTaskResponse::ASSIGNED);
}

TEST(CoordinatorServiceTest, APersistFailureIsUnavailableAndTheRetryIsSafe) {
  CoordinatorServer server;
  CoordinatorClient client = server.Client();
  proto::RegisterResponse a, b;
  ASSERT_TRUE(client.Register("pod-a", proto::WORKER_ROLE_TRAINER, 0, &a).ok());
  ASSERT_TRUE(client.Register("pod-b", proto::WORKER_ROLE_TRAINER, 0, &b).ok());
  server.set_fail_persist(true);
  proto::NextTaskResponse next;
  Status s = client.NextTask(a.worker_id(), &next);
  EXPECT_EQ(s.code(), Status::Code::kUnavailable);
  EXPECT_NE(s.message().find("disk full"), std::string::npos);
  server.set_fail_persist(false);
  ASSERT_TRUE(client.NextTask(a.worker_id(), &next).ok());
  EXPECT_EQ(next.task().task_id(), 1u);  // the same task, not a second one
  EXPECT_EQ(server.persisted().workers(0).task_id(), 1u);
  ASSERT_TRUE(client.NextTask(b.worker_id(), &next).ok());
  EXPECT_EQ(next.task().task_id(), 2u);
  EXPECT_EQ(MetricValue(server.Metrics(),
                        "gaptrain_coordinator_state_writes_total{result=\"error\"}"),
            1);
}

TEST(CoordinatorServiceTest, StatusOverGrpcAndAsJsonOverHttp) {
  CoordinatorConfig config = Config();
  config.target.metric = "top5_accuracy";
  config.target.at_least = 0.95;
  CoordinatorServer server(config);
  CoordinatorClient client = server.Client();
  proto::RegisterResponse a, b, e;
  ASSERT_TRUE(client.Register("pod-a", proto::WORKER_ROLE_TRAINER, 0, &a).ok());
  ASSERT_TRUE(client.Register("pod-b", proto::WORKER_ROLE_TRAINER, 0, &b).ok());
  ASSERT_TRUE(client.Register("eval", proto::WORKER_ROLE_EVALUATOR, 0, &e).ok());
  proto::NextTaskResponse next;
  ASSERT_TRUE(client.NextTask(a.worker_id(), &next).ok());
  proto::CompleteTaskResponse done;
  ASSERT_TRUE(client.CompleteTask(a.worker_id(), next.task().task_id(), &done).ok());
  ASSERT_TRUE(client.NextTask(a.worker_id(), &next).ok());
  proto::ReportEvaluationRequest eval;
  eval.set_worker_id(e.worker_id());
  eval.set_accuracy(0.42);
  eval.set_loss(1.5);
  eval.set_version(77);
  proto::EvalMetric* top5 = eval.add_metrics();
  top5->set_name("top5_accuracy");
  top5->set_value(0.875);
  proto::ReportEvaluationResponse evalr;
  ASSERT_TRUE(client.ReportEvaluation(eval, &evalr).ok());
  proto::LeaveResponse leave;
  ASSERT_TRUE(client.Leave(b.worker_id(), proto::LEAVE_REASON_FAILED, "CUDA error", &leave).ok());

  proto::CoordinatorStatusResponse st;
  ASSERT_TRUE(client.GetStatus(&st).ok());
  EXPECT_EQ(st.job_name(), "service-test");
  EXPECT_EQ(st.phase(), proto::JOB_PHASE_PENDING);
  EXPECT_EQ(st.reason(), "NotEnoughWorkers");
  EXPECT_EQ(st.conditions_size(), 2);
  EXPECT_EQ(st.live_workers(), 2u);
  EXPECT_EQ(st.live_trainers(), 1u);
  EXPECT_EQ(st.joined(), 3u);
  EXPECT_EQ(st.failed(), 1u);
  EXPECT_EQ(st.epoch(), 0u);
  EXPECT_EQ(st.tasks_done(), 1u);
  EXPECT_EQ(st.tasks_in_flight(), 1u);
  EXPECT_EQ(st.samples_done_in_epoch(), 100u);
  EXPECT_DOUBLE_EQ(st.progress(), 0.05);
  EXPECT_DOUBLE_EQ(st.last_accuracy(), 0.42);
  EXPECT_EQ(st.last_eval_version(), 77u);
  ASSERT_EQ(st.last_eval_metrics_size(), 1);
  EXPECT_EQ(st.last_eval_metrics(0).name(), "top5_accuracy");
  EXPECT_EQ(st.last_eval_metrics(0).value(), 0.875);
  ASSERT_EQ(st.workers_size(), 2);
  EXPECT_EQ(st.workers(0).host(), "pod-a");
  EXPECT_EQ(st.workers(1).role(), proto::WORKER_ROLE_EVALUATOR);

  std::unique_ptr<HttpServer> http;
  ASSERT_TRUE(HttpServer::Start("127.0.0.1", 0, &http).ok());
  CoordinatorService* service = server.service();
  ServeStatus(http.get(), [service] { return service->Describe(); });
  HttpClientResponse response;
  ASSERT_TRUE(HttpGet("127.0.0.1", http->port(), "/status", 10, &response).ok());
  EXPECT_EQ(response.status, 200);
  EXPECT_EQ(response.Header("content-type"), "application/json");
  nlohmann::json j = nlohmann::json::parse(response.body);
  EXPECT_EQ(j["jobName"], "service-test");
  EXPECT_EQ(j["phase"], "Pending");
  EXPECT_EQ(j["reason"], "NotEnoughWorkers");
  EXPECT_EQ(j["conditions"][0]["type"], "Pending");
  EXPECT_EQ(j["conditions"][0]["status"], "True");
  EXPECT_EQ(j["conditions"][1]["type"], "Running");
  EXPECT_EQ(j["conditions"][1]["status"], "False");
  EXPECT_EQ(j["conditions"][0]["lastTransitionTime"], "2023-11-14T22:13:20Z");
  EXPECT_EQ(j["workers"]["live"], 2);
  EXPECT_EQ(j["workers"]["failed"], 1);
  EXPECT_EQ(j["workers"]["list"][0]["host"], "pod-a");
  EXPECT_TRUE(j["workers"]["list"][0]["loss"].is_null());
  EXPECT_EQ(j["workers"]["list"][1]["role"], "evaluator");
  EXPECT_EQ(j["tasks"]["done"], 1);
  EXPECT_EQ(j["samples"]["doneInEpoch"], 100);
  EXPECT_DOUBLE_EQ(j["progress"].get<double>(), 0.05);
  EXPECT_DOUBLE_EQ(j["evaluation"]["accuracy"].get<double>(), 0.42);
  EXPECT_EQ(j["evaluation"]["version"], 77);
  EXPECT_EQ(j["evaluation"]["metrics"]["top5_accuracy"], 0.875);
  EXPECT_EQ(j["evaluation"]["target"], "top5_accuracy >= 0.95");
  http->Stop();

  // With a status token (the coordinator's --status-token-file): nothing of
  // the job without it or with another.
  std::unique_ptr<HttpServer> locked;
  ASSERT_TRUE(HttpServer::Start("127.0.0.1", 0, &locked).ok());
  ServeStatus(locked.get(), [service] { return service->Describe(); }, "read-me");
  for (const std::string& token : {std::string(), std::string("guess")}) {
    HttpClientResponse refused;
    ASSERT_TRUE(HttpGet("127.0.0.1", locked->port(), "/status", 10, &refused, token).ok());
    EXPECT_EQ(refused.status, 401) << token;
    EXPECT_EQ(refused.Header("www-authenticate"), "Bearer");
    EXPECT_EQ(refused.body.find("service-test"), std::string::npos) << refused.body;
  }
  HttpClientResponse allowed;
  ASSERT_TRUE(HttpGet("127.0.0.1", locked->port(), "/status", 10, &allowed, "read-me").ok());
  EXPECT_EQ(allowed.status, 200);
  EXPECT_EQ(nlohmann::json::parse(allowed.body)["jobName"], "service-test");
  locked->Stop();

  const std::string metrics = server.Metrics();
  EXPECT_EQ(MetricValue(metrics, "gaptrain_coordinator_eval_metric{metric=\"top5_accuracy\"}"),
            0.875);
  EXPECT_EQ(MetricValue(metrics, "gaptrain_coordinator_eval_metric{metric=\"loss\"}"), 1.5);
  EXPECT_EQ(MetricValue(metrics, "gaptrain_coordinator_eval_target{direction=\"at_least\","
                                 "metric=\"top5_accuracy\"}"),
            0.95);
}

}  // namespace
}  // namespace gaptrain
