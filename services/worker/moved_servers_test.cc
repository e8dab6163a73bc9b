// A master and a coordinator that come back at a NEW address behind the
// same name, as a pod replaced behind a Kubernetes headless Service does
// (issue 28: on a real cluster the first update came 23 s after the new
// master served, because gRPC looks a name up again at most every 30 s by
// default). Real gaptrain-master, gaptrain-coordinator and gaptrain-worker
// processes reach each other by name through a hosts file the test
// rewrites (PrivateHosts: a private mount namespace, so root), and each
// "pod" has its own loopback address: 127.0.0.2, .3, then .4, .5 for the
// replacements. As on a cluster, a name does not resolve between its old
// server's death and its new server serving (no ready endpoint).
//
// Prints the seconds from the new server serving to the first update it
// applied (the master's own gaptrain_master_first_update_seconds) and to
// the trainer's reconnect to the coordinator; asserts both under 10 s.
// The target is 2 s (measured 0.6-0.9 s and 0.5 s); the bound leaves room
// for a loaded machine and still fails the old behaviour, 29.6 s and
// 34.8 s, when gRPC looked names up again at most every 30 s.

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "services/master/master_client.h"
#include "services/net/http_client.h"
#include "services/testing/missing_requirement.h"
#include "services/testing/private_hosts.h"
#include "services/testing/test_files.h"
#include "services/testing/test_processes.h"
#include "services/testing/testdata_dir.h"

namespace gaptrain {
namespace {

using Clock = std::chrono::steady_clock;

constexpr char kToken[] = "moved-servers-token";
constexpr char kMaster[] = "services/master/gaptrain-master";
constexpr char kCoordinator[] = "services/coordinator/gaptrain-coordinator";
constexpr char kWorker[] = "services/worker/gaptrain-worker";
constexpr char kMasterName[] = "master.gaptrain.test";
constexpr char kCoordinatorName[] = "coordinator.gaptrain.test";

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// A metric's value from http://127.0.0.1:port/metrics (the first series
// starting with `series`); NaN when absent or unreadable.
double Metric(int port, const std::string& series) {
  HttpClientResponse r;
  if (!HttpGet("127.0.0.1", port, "/metrics", 10, &r).ok()) return std::nan("");
  const size_t at = r.body.find("\n" + series + " ");
  if (at == std::string::npos) return std::nan("");
  return std::strtod(r.body.c_str() + at + series.size() + 2, nullptr);
}

std::string Tail(const std::string& path) {
  const std::string text = ReadRaw(path);
  return text.size() > 3000 ? text.substr(text.size() - 3000) : text;
}

// One job whose servers are reached by name. The processes inherit the
// test's mount namespace, so they see its hosts file.
class MovedServersTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Once per process, from the main thread (the processes it starts
    // inherit its namespace).
    static std::unique_ptr<PrivateHosts> hosts;
    if (hosts == nullptr) {
      Status s = PrivateHosts::Enter(TestTempDir("private-hosts"), &hosts);
      if (!s.ok()) GAPTRAIN_SKIP_OR_FAIL_IN_CI("cannot make a private /etc/hosts: " + s.message());
    }
    hosts_ = hosts.get();
    std::string data;
    Status s = FindSharedDataDir(&data);
    ASSERT_TRUE(s.ok()) << s.ToString();
    dir_ = TestTempDir(::testing::UnitTest::GetInstance()->current_test_info()->name());
    job_ = dir_ + "/job.yaml";
    // Long enough that the job never ends while the test runs.
    std::ofstream(job_) << "apiVersion: gaptrain.io/v1alpha1\n"
                        << "kind: TrainingJob\n"
                        << "metadata: {name: moved}\n"
                        << "spec:\n"
                        << "  model: {builtin: mlp}\n"
                        << "  data: {format: mnist-idx, path: " << data
                        << "/mnist, shuffleSeed: 7}\n"
                        << "  training:\n"
                        << "    batchSize: 64\n"
                        << "    epochs: 50\n"
                        << "    evalEveryUpdates: 100000\n"
                        << "    optimizer: {learningRate: 0.05, momentum: 0.9}\n"
                        << "    staleness: {rule: gap-aware}\n"
                        << "  workers: {replicas: 1}\n"
                        << "  master:\n"
                        << "    checkpoint: {intervalSeconds: 3600, keep: 2, path: " << dir_
                        << "/ckpt}\n"
                        << "  coordinator: {leaseSeconds: 6}\n";
  }

  void TearDown() override {
    if (HasFailure()) {
      for (const char* name : {"master", "coordinator", "trainer"}) {
        std::printf("---- %s.log (tail)\n%s\n", name, Tail(dir_ + "/" + name + ".log").c_str());
      }
    }
  }

  // The master as the pod at `ip`, listening on `port` (0: any); the name
  // points at it once it serves.
  void StartMaster(const std::string& ip, int port) {
    master_ = std::make_unique<ChildProcess>(
        kMaster,
        std::vector<std::string>{"--job", job_, "--listen", ip + ":" + std::to_string(port),
                                 "--http-address", "127.0.0.1", "--http-port", "0",
                                 "--train-samples", "60000"},
        dir_ + "/master.ports", dir_ + "/master.log", kToken, 2);
    ASSERT_TRUE(master_->started()) << Tail(dir_ + "/master.log");
    master_ip_ = ip;
    ASSERT_TRUE(hosts_->Set(kMasterName, ip).ok());
  }

  void StartCoordinator(const std::string& ip, int port) {
    coordinator_ = std::make_unique<ChildProcess>(
        kCoordinator,
        std::vector<std::string>{"--job", job_, "--listen", ip + ":" + std::to_string(port),
                                 "--http-address", "127.0.0.1", "--http-port", "0",
                                 "--train-samples", "60000", "--task-batches", "20",
                                 "--state-dir", dir_ + "/state", "--master",
                                 std::string(kMasterName) + ":" + std::to_string(master_->port(0))},
        dir_ + "/coordinator.ports", dir_ + "/coordinator.log", kToken, 2);
    ASSERT_TRUE(coordinator_->started()) << Tail(dir_ + "/coordinator.log");
    ASSERT_TRUE(hosts_->Set(kCoordinatorName, ip).ok());
  }

  void StartTrainer() {
    trainer_ = std::make_unique<ChildProcess>(
        kWorker,
        std::vector<std::string>{
            "--job", job_, "--coordinator",
            std::string(kCoordinatorName) + ":" + std::to_string(coordinator_->port(0)),
            "--threads", "1", "--http-address", "127.0.0.1", "--http-port", "0", "--host-name",
            "trainer"},
        dir_ + "/trainer.ports", dir_ + "/trainer.log", kToken, 1);
    ASSERT_TRUE(trainer_->started()) << Tail(dir_ + "/trainer.log");
  }

  // The running master's version, asked by address (the test's own
  // threads do not see the private hosts file).
  uint64_t MasterVersion() {
    MasterClient::Options o;
    o.token = kToken;
    o.deadline_seconds = 5;
    MasterClient client(grpc::CreateChannel(master_ip_ + ":" + std::to_string(master_->port(0)),
                                            grpc::InsecureChannelCredentials()),
                        o);
    proto::DescribeResponse d;
    return client.Describe(&d).ok() ? d.version() : 0;
  }

  // A job training by name: master, coordinator and trainer.
  void StartJob() {
    ASSERT_NO_FATAL_FAILURE(StartMaster("127.0.0.2", 0));
    ASSERT_NO_FATAL_FAILURE(StartCoordinator("127.0.0.3", 0));
    ASSERT_NO_FATAL_FAILURE(StartTrainer());
    ASSERT_TRUE(Eventually([&] { return MasterVersion() >= 50; }))
        << "the trainer did not train by name";
  }

  PrivateHosts* hosts_ = nullptr;
  std::string dir_;
  std::string job_;
  std::string master_ip_;
  std::unique_ptr<ChildProcess> master_, coordinator_, trainer_;
};

TEST_F(MovedServersTest, MasterBackAtANewAddressGetsItsFirstUpdateWithinSeconds) {
  ASSERT_NO_FATAL_FAILURE(StartJob());
  const int port = master_->port(0);
  master_->Kill(SIGKILL);
  // The old pod's address leaves the Service; the name resolves to nothing
  // until the new pod is ready.
  ASSERT_TRUE(hosts_->Set(kMasterName, "").ok());
  ASSERT_NO_FATAL_FAILURE(StartMaster("127.0.0.4", port));
  // The master times its first update from the moment it served, and the
  // coordinator's member set must reach it before it takes a push.
  double seconds = std::nan("");
  const auto start = Clock::now();
  EXPECT_TRUE(Eventually(
      [&] {
        seconds = Metric(master_->port(1), "gaptrain_master_first_update_seconds");
        return std::isfinite(seconds);
      },
      std::chrono::seconds(90)))
      << "no update reached the new master in " << SecondsSince(start) << " s";
  std::printf("FIGURE master moved: first update %.2f s after the new master served\n", seconds);
  EXPECT_LT(seconds, 10.0);
}

TEST_F(MovedServersTest, CoordinatorBackAtANewAddressIsReachedWithinSeconds) {
  ASSERT_NO_FATAL_FAILURE(StartJob());
  const int port = coordinator_->port(0);
  const int trainer_http = trainer_->port(0);
  const std::string reconnects = "gaptrain_worker_reconnects_total{service=\"coordinator\"}";
  double before = Metric(trainer_http, reconnects);
  if (!std::isfinite(before)) before = 0;  // exported from the first reconnect on
  coordinator_->Kill(SIGKILL);
  ASSERT_TRUE(hosts_->Set(kCoordinatorName, "").ok());
  // The trainer notices with its next heartbeat or verb.
  ASSERT_NO_FATAL_FAILURE(StartCoordinator("127.0.0.5", port));
  const auto serving = Clock::now();  // and the name points at it
  EXPECT_TRUE(Eventually([&] { return Metric(trainer_http, reconnects) > before; },
                         std::chrono::seconds(90)))
      << "the trainer did not reach the new coordinator in " << SecondsSince(serving) << " s";
  const double seconds = SecondsSince(serving);
  std::printf("FIGURE coordinator moved: the trainer reached it %.2f s after it served\n",
              seconds);
  EXPECT_LT(seconds, 10.0);
  // And training goes on through it.
  const uint64_t version = MasterVersion();
  EXPECT_TRUE(Eventually([&] { return MasterVersion() > version + 20; }));
}

}  // namespace
}  // namespace gaptrain
