// gaptrain-coordinator as a real process, with a real gaptrain-master: the
// membership feed reaches the master; SIGTERM persists the state and a
// restart resumes mid-epoch without handing out a task twice; /status,
// /metrics, /healthz and gRPC health; bad flags and a corrupt state file
// stop the start.

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <thread>

#include "proto/health.grpc.pb.h"
#include "services/common/http_client.h"
#include "services/coordinator/coordinator_client.h"
#include "services/master/master_client.h"

namespace gaptrain {
namespace {

constexpr char kToken[] = "coordinator-process-token";

std::string TempDir(const std::string& name) {
  std::string dir = std::string(std::getenv("TEST_TMPDIR")) + "/" + name;
  std::string cmd = "rm -rf '" + dir + "' && mkdir -p '" + dir + "'";
  EXPECT_EQ(std::system(cmd.c_str()), 0);
  return dir;
}

std::string WriteJob(const std::string& dir) {
  std::string path = dir + "/job.yaml";
  std::ofstream(path) << R"(apiVersion: gaptrain.io/v1alpha1
kind: TrainingJob
metadata: {name: coordinator-process-test}
spec:
  model: {builtin: mlp}
  data: {format: mnist-idx, path: /unused}
  training:
    batchSize: 100
    epochs: 2
    staleness: {rule: gap-aware}
  workers: {replicas: 2}
  master:
    checkpoint: {intervalSeconds: 3600, keep: 1, path: )"
                      << dir << R"(/ckpt}
  coordinator: {leaseSeconds: 30}
)";
  return path;
}

// Polls `condition` every 20 ms for up to 30 s: for state inside another
// process, which a test can only observe from outside.
bool Eventually(const std::function<bool()>& condition) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < deadline) {
    if (condition()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return condition();
}

// A child process that writes "GRPC_PORT HTTP_PORT" to --ports-file once
// it serves.
class Child {
 public:
  Child(const std::string& binary, const std::string& ports_file, std::vector<std::string> args) {
    std::remove(ports_file.c_str());
    args.insert(args.begin(), binary);
    args.insert(args.end(), {"--ports-file", ports_file});
    pid_ = fork();
    if (pid_ == 0) {
      setenv("GAPTRAIN_TOKEN", kToken, 1);
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    Eventually([&] {
      std::ifstream in(ports_file);
      if (in >> grpc_port_ >> http_port_) return true;
      grpc_port_ = 0;
      int status;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return true;
      }
      return false;
    });
    EXPECT_NE(grpc_port_, 0) << binary << " did not start";
  }
  ~Child() { Kill(SIGKILL); }

  // Returns the wait status.
  int Kill(int signal) {
    if (pid_ <= 0) return -1;
    kill(pid_, signal);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return status;
  }
  std::string address() const { return "127.0.0.1:" + std::to_string(grpc_port_); }
  int grpc_port() const { return grpc_port_; }
  int http_port() const { return http_port_; }

 private:
  pid_t pid_ = -1;
  int grpc_port_ = 0;
  int http_port_ = 0;
};

std::unique_ptr<Child> StartMaster(const std::string& dir) {
  return std::make_unique<Child>(
      "services/master/gaptrain-master", dir + "/master-ports",
      std::vector<std::string>{"--job", WriteJob(dir), "--listen", "127.0.0.1:0",
                               "--http-address", "127.0.0.1", "--http-port", "0",
                               "--train-samples", "1000"});
}

std::unique_ptr<Child> StartCoordinator(const std::string& dir,
                                        const std::vector<std::string>& extra = {}) {
  std::vector<std::string> args = {"--job", WriteJob(dir), "--listen", "127.0.0.1:0",
                                   "--http-address", "127.0.0.1", "--http-port", "0",
                                   "--train-samples", "1000", "--task-batches", "2",
                                   "--state-dir", dir + "/state"};
  args.insert(args.end(), extra.begin(), extra.end());
  return std::make_unique<Child>("services/coordinator/gaptrain-coordinator",
                                 dir + "/coordinator-ports", args);
}

CoordinatorClient Client(const Child& coordinator) {
  CoordinatorClient::Options o;
  o.token = kToken;
  return CoordinatorClient(grpc::CreateChannel(coordinator.address(),
                                               grpc::InsecureChannelCredentials()),
                           o);
}

TEST(CoordinatorProcessTest, TheMasterLearnsTheLiveWorkers) {
  const std::string dir = TempDir("feed");
  auto master = StartMaster(dir);
  auto coordinator = StartCoordinator(dir, {"--master", master->address()});
  CoordinatorClient client = Client(*coordinator);
  proto::RegisterResponse a, b;
  ASSERT_TRUE(client.Register("pod-a", proto::WORKER_ROLE_TRAINER, 0, &a).ok());
  ASSERT_TRUE(client.Register("pod-b", proto::WORKER_ROLE_TRAINER, 0, &b).ok());
  EXPECT_EQ(a.master_address(), master->address());

  MasterClient::Options o;
  o.token = kToken;
  MasterClient master_client(
      grpc::CreateChannel(master->address(), grpc::InsecureChannelCredentials()), o);
  auto live_at_master = [&] {
    proto::DescribeResponse d;
    return master_client.Describe(&d).ok() ? static_cast<int>(d.live_workers()) : -1;
  };
  EXPECT_TRUE(Eventually([&] { return live_at_master() == 2; })) << live_at_master();

  proto::LeaveResponse leave;
  ASSERT_TRUE(client.Leave(a.worker_id(), proto::LEAVE_REASON_PREEMPTED, "", &leave).ok());
  EXPECT_TRUE(Eventually([&] { return live_at_master() == 1; })) << live_at_master();

  HttpClientResponse metrics;
  ASSERT_TRUE(HttpGet("127.0.0.1", coordinator->http_port(), "/metrics", 10, &metrics).ok());
  EXPECT_NE(metrics.body.find("gaptrain_coordinator_master_member_updates_total{result=\"ok\"}"),
            std::string::npos);
}

TEST(CoordinatorProcessTest, SigtermPersistsAndARestartResumesMidEpoch) {
  const std::string dir = TempDir("restart");
  uint32_t a = 0, b = 0;
  uint64_t held_by_a = 0, done_by_b = 0;
  {
    auto coordinator = StartCoordinator(dir);
    CoordinatorClient client = Client(*coordinator);
    proto::RegisterResponse ra, rb;
    ASSERT_TRUE(client.Register("pod-a", proto::WORKER_ROLE_TRAINER, 0, &ra).ok());
    ASSERT_TRUE(client.Register("pod-b", proto::WORKER_ROLE_TRAINER, 0, &rb).ok());
    a = ra.worker_id();
    b = rb.worker_id();
    proto::NextTaskResponse next;
    ASSERT_TRUE(client.NextTask(a, &next).ok());
    ASSERT_EQ(next.outcome(), proto::NextTaskResponse::ASSIGNED);
    held_by_a = next.task().task_id();
    ASSERT_TRUE(client.NextTask(b, &next).ok());
    done_by_b = next.task().task_id();
    proto::CompleteTaskResponse done;
    ASSERT_TRUE(client.CompleteTask(b, done_by_b, &done).ok());
    const int status = coordinator->Kill(SIGTERM);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0);
  }
  auto coordinator = StartCoordinator(dir);
  CoordinatorClient client = Client(*coordinator);
  proto::CoordinatorStatusResponse st;
  ASSERT_TRUE(client.GetStatus(&st).ok());
  EXPECT_EQ(st.phase(), proto::JOB_PHASE_RUNNING);
  EXPECT_EQ(st.live_workers(), 2u);
  EXPECT_EQ(st.tasks_done(), 1u);
  EXPECT_EQ(st.tasks_in_flight(), 1u);
  EXPECT_EQ(st.tasks_queued(), 8u);  // 10 tasks of one batch: 8 per trainer and epoch at most

  proto::RegisterResponse again;
  ASSERT_TRUE(client.Register("pod-a", proto::WORKER_ROLE_TRAINER, a, &again).ok());
  EXPECT_TRUE(again.resumed());
  EXPECT_EQ(again.task().task_id(), held_by_a);
  proto::NextTaskResponse next;
  ASSERT_TRUE(client.NextTask(b, &next).ok());
  EXPECT_NE(next.task().task_id(), held_by_a);
  EXPECT_NE(next.task().task_id(), done_by_b);
  // b's completion from before the restart, retried: acknowledged, not
  // counted again.
  proto::CompleteTaskResponse done;
  ASSERT_TRUE(client.CompleteTask(b, done_by_b, &done).ok());
  EXPECT_TRUE(done.already_completed());
  ASSERT_TRUE(client.GetStatus(&st).ok());
  EXPECT_EQ(st.tasks_done(), 1u);
}

TEST(CoordinatorProcessTest, StatusMetricsAndHealthOverHttpAndGrpc) {
  const std::string dir = TempDir("http");
  auto coordinator = StartCoordinator(dir);
  CoordinatorClient client = Client(*coordinator);
  proto::RegisterResponse r;
  ASSERT_TRUE(client.Register("pod-a", proto::WORKER_ROLE_TRAINER, 0, &r).ok());

  HttpClientResponse status;
  ASSERT_TRUE(HttpGet("127.0.0.1", coordinator->http_port(), "/status", 10, &status).ok());
  EXPECT_EQ(status.status, 200);
  nlohmann::json j = nlohmann::json::parse(status.body);
  EXPECT_EQ(j["jobName"], "coordinator-process-test");
  EXPECT_EQ(j["phase"], "Pending");
  EXPECT_EQ(j["workers"]["live"], 1);
  EXPECT_EQ(j["workers"]["minTrainers"], 2);
  EXPECT_EQ(j["tasks"]["total"], 10);

  HttpClientResponse metrics;
  ASSERT_TRUE(HttpGet("127.0.0.1", coordinator->http_port(), "/metrics", 10, &metrics).ok());
  EXPECT_NE(metrics.body.find("gaptrain_coordinator_live_workers 1"), std::string::npos);
  EXPECT_NE(metrics.body.find("gaptrain_coordinator_phase{phase=\"Pending\"} 1"),
            std::string::npos);
  HttpClientResponse health;
  ASSERT_TRUE(HttpGet("127.0.0.1", coordinator->http_port(), "/healthz", 10, &health).ok());
  EXPECT_EQ(health.status, 200);

  auto stub = grpc::health::v1::Health::NewStub(
      grpc::CreateChannel(coordinator->address(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  grpc::health::v1::HealthCheckRequest request;
  grpc::health::v1::HealthCheckResponse response;
  ASSERT_TRUE(stub->Check(&context, request, &response).ok());
  EXPECT_EQ(response.status(), grpc::health::v1::HealthCheckResponse::SERVING);
}

TEST(CoordinatorProcessTest, BadFlagsOrACorruptStateFileStopTheStart) {
  const std::string dir = TempDir("bad");
  auto run = [](const std::string& args) {
    std::string cmd = "services/coordinator/gaptrain-coordinator " + args + " >/dev/null 2>&1";
    int status = std::system(cmd.c_str());
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  };
  const std::string job = WriteJob(dir);
  EXPECT_EQ(run(""), 2);  // --job missing
  EXPECT_EQ(run("--job " + job + " --task-batches 0 --insecure-no-token"), 2);
  EXPECT_EQ(run("--job /nonexistent.yaml --insecure-no-token"), 2);
  EXPECT_EQ(run("--job " + job), 2);  // no token anywhere
  ASSERT_EQ(std::system(("mkdir -p '" + dir + "/state'").c_str()), 0);
  std::ofstream(dir + "/state/coordinator-state.bin") << "GTCOORD1 torn";
  EXPECT_EQ(run("--job " + job + " --insecure-no-token --train-samples 1000 --listen "
                "127.0.0.1:0 --http-port 0 --state-dir " + dir + "/state"),
            1);
}

}  // namespace
}  // namespace gaptrain
