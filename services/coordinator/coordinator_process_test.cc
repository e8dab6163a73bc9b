// gaptrain-coordinator as a real process, with a real gaptrain-master: the
// membership feed reaches the master (and each of two master shards, one
// of which, killed, fails the job by name); SIGTERM persists the state and a
// restart resumes mid-epoch without handing out a task twice; /status,
// /metrics, /healthz and gRPC health; bad flags and a corrupt state file
// stop the start.

#include <signal.h>
#include <sys/wait.h>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "proto/health.grpc.pb.h"
#include "services/coordinator/coordinator_client.h"
#include "services/master/master_client.h"
#include "services/net/http_client.h"
#include "services/testing/test_files.h"
#include "services/testing/test_processes.h"

namespace gaptrain {
namespace {

constexpr char kToken[] = "coordinator-process-token";
// Both services' ports files: "GRPC HTTP", written once they serve.
constexpr size_t kGrpcPort = 0;
constexpr size_t kHttpPort = 1;

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

// Starts `binary` with `args`; its log is <dir>/<name>.log (a restart in
// the same directory appends to it).
std::unique_ptr<ChildProcess> Start(const std::string& binary, const std::string& dir,
                                    const std::string& name, std::vector<std::string> args) {
  auto child = std::make_unique<ChildProcess>(binary, std::move(args), dir + "/" + name + "-ports",
                                              dir + "/" + name + ".log", kToken,
                                              /*port_count=*/2);
  EXPECT_TRUE(child->started()) << ReadRaw(child->log_file());
  return child;
}

std::unique_ptr<ChildProcess> StartMaster(const std::string& dir) {
  return Start("services/master/gaptrain-master", dir, "master",
               {"--job", WriteJob(dir), "--listen", "127.0.0.1:0", "--http-address", "127.0.0.1",
                "--http-port", "0", "--train-samples", "1000"});
}

std::unique_ptr<ChildProcess> StartCoordinator(const std::string& dir,
                                               const std::vector<std::string>& extra = {}) {
  std::vector<std::string> args = {"--job", WriteJob(dir), "--listen", "127.0.0.1:0",
                                   "--http-address", "127.0.0.1", "--http-port", "0",
                                   "--train-samples", "1000", "--task-batches", "2",
                                   "--state-dir", dir + "/state"};
  args.insert(args.end(), extra.begin(), extra.end());
  return Start("services/coordinator/gaptrain-coordinator", dir, "coordinator", args);
}

CoordinatorClient Client(const ChildProcess& coordinator) {
  CoordinatorClient::Options o;
  o.token = kToken;
  return CoordinatorClient(
      grpc::CreateChannel(coordinator.address(kGrpcPort), grpc::InsecureChannelCredentials()), o);
}

TEST(CoordinatorProcessTest, TheMasterLearnsTheLiveWorkers) {
  const std::string dir = TestTempDir("feed");
  auto master = StartMaster(dir);
  auto coordinator = StartCoordinator(dir, {"--master", master->address(kGrpcPort)});
  CoordinatorClient client = Client(*coordinator);
  proto::RegisterResponse a, b;
  ASSERT_TRUE(client.Register("pod-a", proto::WORKER_ROLE_TRAINER, 0, &a).ok());
  ASSERT_TRUE(client.Register("pod-b", proto::WORKER_ROLE_TRAINER, 0, &b).ok());
  EXPECT_EQ(a.master_address(), master->address(kGrpcPort));

  MasterClient::Options o;
  o.token = kToken;
  MasterClient master_client(
      grpc::CreateChannel(master->address(kGrpcPort), grpc::InsecureChannelCredentials()), o);
  auto live_at_master = [&] {
    proto::DescribeResponse d;
    return master_client.Describe(&d).ok() ? static_cast<int>(d.live_workers()) : -1;
  };
  EXPECT_TRUE(Eventually([&] { return live_at_master() == 2; })) << live_at_master();

  proto::LeaveResponse leave;
  ASSERT_TRUE(client.Leave(a.worker_id(), proto::LEAVE_REASON_PREEMPTED, "", &leave).ok());
  EXPECT_TRUE(Eventually([&] { return live_at_master() == 1; })) << live_at_master();

  HttpClientResponse metrics;
  ASSERT_TRUE(HttpGet("127.0.0.1", coordinator->port(kHttpPort), "/metrics", 10, &metrics).ok());
  EXPECT_NE(metrics.body.find("gaptrain_coordinator_master_member_updates_total{result=\"ok\"}"),
            std::string::npos);
}

// θ in two shards: each master gets the member set; one that dies fails
// the job after the master timeout, named.
TEST(CoordinatorProcessTest, EveryMasterShardLearnsTheLiveWorkers) {
  const std::string dir = TestTempDir("shards");
  std::vector<std::unique_ptr<ChildProcess>> masters;
  masters.push_back(StartMaster(TestTempDir("shard-0")));
  masters.push_back(StartMaster(TestTempDir("shard-1")));
  const std::vector<std::string> addresses = {masters[0]->address(kGrpcPort),
                                              masters[1]->address(kGrpcPort)};
  auto coordinator = StartCoordinator(
      dir, {"--master", addresses[0] + "," + addresses[1], "--master-timeout-seconds", "1"});
  CoordinatorClient client = Client(*coordinator);
  proto::RegisterResponse a, b;
  ASSERT_TRUE(client.Register("pod-a", proto::WORKER_ROLE_TRAINER, 0, &a).ok());
  ASSERT_TRUE(client.Register("pod-b", proto::WORKER_ROLE_TRAINER, 0, &b).ok());
  EXPECT_EQ(a.master_address(), addresses[0]);
  EXPECT_EQ(std::vector<std::string>(a.master_addresses().begin(), a.master_addresses().end()),
            addresses);

  for (const std::string& address : addresses) {
    MasterClient::Options o;
    o.token = kToken;
    MasterClient master_client(
        grpc::CreateChannel(address, grpc::InsecureChannelCredentials()), o);
    auto live_at_master = [&] {
      proto::DescribeResponse d;
      return master_client.Describe(&d).ok() ? static_cast<int>(d.live_workers()) : -1;
    };
    EXPECT_TRUE(Eventually([&] { return live_at_master() == 2; }))
        << address << ": " << live_at_master();
  }

  // A push to shard 0 reaches the coordinator's status through the
  // membership feed's replies: each shard as it answered, and the whole.
  {
    MasterClient::Options o;
    o.token = kToken;
    MasterClient shard0(grpc::CreateChannel(addresses[0], grpc::InsecureChannelCredentials()), o);
    proto::DescribeResponse d;
    ASSERT_TRUE(shard0.Describe(&d).ok());
    size_t p = 0;
    for (const auto& t : d.layout().tensors()) {
      size_t n = 1;
      for (int64_t dim : t.shape()) n *= static_cast<size_t>(dim);
      p += n;
    }
    std::vector<float> theta(p), g(p, 1e-3f);
    MasterClient::PullResult r;
    ASSERT_TRUE(shard0.Pull(a.worker_id(), -1, theta.data(), p, &r).ok());
    proto::PushResponse pushed;
    ASSERT_TRUE(shard0.Push(a.worker_id(), r.version, g.data(), p, 1.0f, &pushed).ok());
  }
  proto::CoordinatorStatusResponse shown;
  EXPECT_TRUE(Eventually([&] {
    return client.GetStatus(&shown).ok() && shown.masters_size() == 2 &&
           shown.masters(0).totals().updates() == 1;
  })) << shown.ShortDebugString();
  EXPECT_EQ(shown.masters(0).address(), addresses[0]);
  EXPECT_EQ(shown.masters(1).address(), addresses[1]);
  EXPECT_TRUE(shown.masters(1).reachable());
  EXPECT_EQ(shown.masters(1).totals().updates(), 0u);
  EXPECT_GT(shown.masters(0).totals().parameters(), 0u);
  EXPECT_NE(shown.masters(0).run().id(), 0u);
  ASSERT_TRUE(shown.has_mean_staleness());
  EXPECT_EQ(shown.mean_staleness(), 0.0);

  masters[1]->Kill(SIGKILL);
  proto::CoordinatorStatusResponse st;
  EXPECT_TRUE(Eventually([&] {
    return client.GetStatus(&st).ok() && st.phase() == proto::JOB_PHASE_FAILED;
  })) << st.ShortDebugString();
  EXPECT_EQ(st.reason(), "MasterUnreachable");
  EXPECT_NE(st.message().find("master shard 1 (" + addresses[1] + "): "), std::string::npos)
      << st.message();
  ASSERT_EQ(st.masters_size(), 2);
  EXPECT_TRUE(st.masters(0).reachable());
  EXPECT_FALSE(st.masters(1).reachable());
}

TEST(CoordinatorProcessTest, SigtermPersistsAndARestartResumesMidEpoch) {
  const std::string dir = TestTempDir("restart");
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
  const std::string dir = TestTempDir("http");
  auto coordinator = StartCoordinator(dir);
  CoordinatorClient client = Client(*coordinator);
  proto::RegisterResponse r;
  ASSERT_TRUE(client.Register("pod-a", proto::WORKER_ROLE_TRAINER, 0, &r).ok());

  HttpClientResponse status;
  ASSERT_TRUE(HttpGet("127.0.0.1", coordinator->port(kHttpPort), "/status", 10, &status).ok());
  EXPECT_EQ(status.status, 200);
  nlohmann::json j = nlohmann::json::parse(status.body);
  EXPECT_EQ(j["jobName"], "coordinator-process-test");
  EXPECT_EQ(j["phase"], "Pending");
  EXPECT_EQ(j["workers"]["live"], 1);
  EXPECT_EQ(j["workers"]["minTrainers"], 2);
  EXPECT_EQ(j["tasks"]["total"], 10);

  HttpClientResponse metrics;
  ASSERT_TRUE(HttpGet("127.0.0.1", coordinator->port(kHttpPort), "/metrics", 10, &metrics).ok());
  EXPECT_NE(metrics.body.find("gaptrain_coordinator_live_workers 1"), std::string::npos);
  EXPECT_NE(metrics.body.find("gaptrain_coordinator_phase{phase=\"Pending\"} 1"),
            std::string::npos);
  HttpClientResponse health;
  ASSERT_TRUE(HttpGet("127.0.0.1", coordinator->port(kHttpPort), "/healthz", 10, &health).ok());
  EXPECT_EQ(health.status, 200);

  auto stub = grpc::health::v1::Health::NewStub(
      grpc::CreateChannel(coordinator->address(kGrpcPort), grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  grpc::health::v1::HealthCheckRequest request;
  grpc::health::v1::HealthCheckResponse response;
  ASSERT_TRUE(stub->Check(&context, request, &response).ok());
  EXPECT_EQ(response.status(), grpc::health::v1::HealthCheckResponse::SERVING);
}

TEST(CoordinatorProcessTest, BadFlagsOrACorruptStateFileStopTheStart) {
  const std::string dir = TestTempDir("bad");
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
