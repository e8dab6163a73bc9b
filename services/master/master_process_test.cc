// gaptrain-master as a real process: checkpoint, SIGKILL, restart gives
// bit-identical parameters and training continues; a torn checkpoint is
// skipped; SIGTERM writes a final checkpoint; health over HTTP and gRPC;
// TLS.

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include "proto/health.grpc.pb.h"
#include "services/common/http_client.h"
#include "services/common/prometheus_test_server.h"
#include "services/master/checkpoint.h"
#include "services/master/master_client.h"

namespace gaptrain {
namespace {

constexpr char kToken[] = "process-test-token";

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
metadata: {name: process-test}
spec:
  model: {builtin: mlp}
  data: {format: mnist-idx, path: /unused}
  training:
    batchSize: 64
    maxUpdates: 100000
    optimizer: {learningRate: 0.05, momentum: 0.9, weightDecay: 1.0e-4}
    staleness: {rule: gap-aware, gapPrecision: bf16}
  workers: {replicas: 2}
  master:
    checkpoint: {intervalSeconds: 3600, keep: 3, path: )"
                     << dir << R"(/ckpt}
)";
  return path;
}

// A gaptrain-master child process.
class MasterChild {
 public:
  explicit MasterChild(const std::string& dir, const std::vector<std::string>& extra = {}) {
    ports_file_ = dir + "/ports";
    std::remove(ports_file_.c_str());
    std::vector<std::string> args = {"services/master/gaptrain-master",
                                     "--job", WriteJob(dir),
                                     "--listen", "127.0.0.1:0",
                                     "--http-address", "127.0.0.1",
                                     "--http-port", "0",
                                     "--train-samples", "60000",
                                     "--ports-file", ports_file_};
    args.insert(args.end(), extra.begin(), extra.end());
    pid_ = fork();
    if (pid_ == 0) {
      setenv("GAPTRAIN_TOKEN", kToken, 1);
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    // The ports file appears once both servers listen (written atomically).
    for (int i = 0; i < 600 && grpc_port_ == 0; ++i) {
      std::ifstream in(ports_file_);
      if (in >> grpc_port_ >> http_port_) break;
      grpc_port_ = 0;
      int status;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    EXPECT_NE(grpc_port_, 0) << "gaptrain-master did not start";
  }
  ~MasterChild() { Kill(SIGKILL); }

  // Returns the exit status.
  int Kill(int signal) {
    if (pid_ <= 0) return -1;
    kill(pid_, signal);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return status;
  }

  MasterClient Client() {
    MasterClient::Options o;
    o.token = kToken;
    return MasterClient(grpc::CreateChannel("127.0.0.1:" + std::to_string(grpc_port_),
                                            grpc::InsecureChannelCredentials()),
                        o);
  }
  int grpc_port() const { return grpc_port_; }
  int http_port() const { return http_port_; }

 private:
  pid_t pid_ = -1;
  std::string ports_file_;
  int grpc_port_ = 0;
  int http_port_ = 0;
};

// Pulls and pushes `steps` times from worker 1 with a deterministic gradient.
void Train(MasterClient& client, int steps, size_t p) {
  std::vector<float> theta(p), g(p);
  for (int s = 0; s < steps; ++s) {
    MasterClient::PullResult r;
    ASSERT_TRUE(client.Pull(1, -1, theta.data(), p, &r).ok());
    for (size_t j = 0; j < p; ++j) g[j] = 0.01f * theta[j] + 0.001f * static_cast<float>(j % 13);
    proto::PushResponse resp;
    Status st = client.Push(1, r.version, g.data(), p, 1.0f, &resp);
    ASSERT_TRUE(st.ok()) << st.ToString();
  }
}

std::vector<float> PullAll(MasterClient& client, size_t p, uint64_t* version) {
  std::vector<float> theta(p);
  MasterClient::PullResult r;
  EXPECT_TRUE(client.Pull(1, -1, theta.data(), p, &r).ok());
  *version = r.version;
  return theta;
}

TEST(MasterProcessTest, CheckpointKillRestoreIsBitIdenticalAndTrainingContinues) {
  const std::string dir = TempDir("kill");
  size_t p = 0;
  std::vector<float> at_checkpoint;
  uint64_t checkpoint_version = 0;
  {
    MasterChild master(dir);
    MasterClient client = master.Client();
    proto::DescribeResponse d;
    ASSERT_TRUE(client.Describe(&d).ok());
    EXPECT_EQ(d.rule(), "gap-aware");
    for (const auto& t : d.layout().tensors()) {
      size_t n = 1;
      for (int64_t s : t.shape()) n *= s;
      p += n;
    }
    EXPECT_EQ(p, 235146u);  // the mlp
    proto::SetMembersResponse m;
    ASSERT_TRUE(client.SetMembers({1, 2}, &m).ok());
    Train(client, 20, p);
    proto::CheckpointResponse c;
    ASSERT_TRUE(client.Checkpoint(&c).ok());
    EXPECT_EQ(c.version(), 20u);
    at_checkpoint = PullAll(client, p, &checkpoint_version);
    ASSERT_EQ(checkpoint_version, 20u);
    Train(client, 5, p);  // lost with the SIGKILL: never checkpointed
    master.Kill(SIGKILL);
  }
  MasterChild restarted(dir);
  MasterClient client = restarted.Client();
  uint64_t version = 0;
  EXPECT_EQ(PullAll(client, p, &version), at_checkpoint);  // worker 1 is still a member
  EXPECT_EQ(version, 20u);
  Train(client, 3, p);
  proto::DescribeResponse d;
  ASSERT_TRUE(client.Describe(&d).ok());
  EXPECT_EQ(d.version(), 23u);
  EXPECT_EQ(d.live_workers(), 2u);
}

TEST(MasterProcessTest, TornNewestCheckpointIsSkipped) {
  const std::string dir = TempDir("torn");
  size_t p = 235146;
  std::vector<float> older;
  {
    MasterChild master(dir);
    MasterClient client = master.Client();
    proto::SetMembersResponse m;
    ASSERT_TRUE(client.SetMembers({1}, &m).ok());
    Train(client, 4, p);
    proto::CheckpointResponse c;
    ASSERT_TRUE(client.Checkpoint(&c).ok());
    uint64_t v;
    older = PullAll(client, p, &v);
    Train(client, 4, p);
    ASSERT_TRUE(client.Checkpoint(&c).ok());
    EXPECT_EQ(c.version(), 8u);
    master.Kill(SIGKILL);
    // Tear the newest file as a crash mid-write on a non-atomic store would.
    ASSERT_EQ(truncate(c.path().c_str(), 1000), 0);
  }
  MasterChild restarted(dir);
  MasterClient client = restarted.Client();
  uint64_t version = 0;
  EXPECT_EQ(PullAll(client, p, &version), older);
  EXPECT_EQ(version, 4u);
}

TEST(MasterProcessTest, SigtermWritesAFinalCheckpointAndExitsCleanly) {
  const std::string dir = TempDir("term");
  MasterChild master(dir);
  MasterClient client = master.Client();
  proto::SetMembersResponse m;
  ASSERT_TRUE(client.SetMembers({1}, &m).ok());
  Train(client, 7, 235146);
  int status = master.Kill(SIGTERM);
  EXPECT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  CheckpointDirectory checkpoints(dir + "/ckpt", 3);
  std::vector<std::string> files = checkpoints.List();
  ASSERT_FALSE(files.empty());
  uint64_t version = 0;
  ASSERT_TRUE(CheckpointDirectory::ParseFileName(files.back().substr(files.back().rfind('/') + 1),
                                                 &version));
  EXPECT_EQ(version, 7u);
}

TEST(MasterProcessTest, HealthOverHttpAndGrpcAndMetrics) {
  const std::string dir = TempDir("health");
  MasterChild master(dir);
  HttpClientResponse health;
  ASSERT_TRUE(HttpGet("127.0.0.1", master.http_port(), "/healthz", 10, &health).ok());
  EXPECT_EQ(health.status, 200);
  HttpClientResponse metrics;
  ASSERT_TRUE(HttpGet("127.0.0.1", master.http_port(), "/metrics", 10, &metrics).ok());
  EXPECT_NE(metrics.body.find("gaptrain_master_model_version"), std::string::npos);
  EXPECT_NE(metrics.body.find("gaptrain_master_tensor_gap{tensor=\"fc1.weight\"}"),
            std::string::npos);

  auto channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(master.grpc_port()),
                                     grpc::InsecureChannelCredentials());
  auto stub = grpc::health::v1::Health::NewStub(channel);
  grpc::ClientContext context;
  grpc::health::v1::HealthCheckRequest request;
  grpc::health::v1::HealthCheckResponse response;
  ASSERT_TRUE(stub->Check(&context, request, &response).ok());
  EXPECT_EQ(response.status(), grpc::health::v1::HealthCheckResponse::SERVING);
}

// A real Prometheus server scrapes the master; the staleness histogram and
// the Gap come back through Prometheus's query API.
TEST(MasterProcessTest, PrometheusScrapesStalenessAndGap) {
  const std::string dir = TempDir("prometheus");
  MasterChild master(dir);
  MasterClient client = master.Client();
  proto::SetMembersResponse m;
  ASSERT_TRUE(client.SetMembers({1, 2}, &m).ok());
  const size_t p = 235146;
  std::vector<float> theta1(p), theta2(p), g(p, 0.001f);
  // Two rounds of: both pull, 1 pushes (staleness 0), 2 pushes (staleness 1).
  for (int round = 0; round < 2; ++round) {
    MasterClient::PullResult r1, r2;
    ASSERT_TRUE(client.Pull(1, -1, theta1.data(), p, &r1).ok());
    ASSERT_TRUE(client.Pull(2, -1, theta2.data(), p, &r2).ok());
    proto::PushResponse resp;
    ASSERT_TRUE(client.Push(1, r1.version, g.data(), p, 0, &resp).ok());
    EXPECT_EQ(resp.staleness(), 0u);
    ASSERT_TRUE(client.Push(2, r2.version, g.data(), p, 0, &resp).ok());
    EXPECT_EQ(resp.staleness(), 1u);
  }

  std::unique_ptr<PrometheusTestServer> prometheus;
  Status s = PrometheusTestServer::Start({"127.0.0.1:" + std::to_string(master.http_port())},
                                         0.5, &prometheus);
  ASSERT_TRUE(s.ok()) << s.ToString();
  double count = 0, sum = 0, gap_count = 0, version = 0;
  s = prometheus->WaitForSeries("gaptrain_master_staleness_count", 30, &count);
  ASSERT_TRUE(s.ok()) << s.ToString() << "\n" << prometheus->LogTail();
  EXPECT_EQ(count, 4);
  ASSERT_TRUE(prometheus->WaitForSeries("gaptrain_master_staleness_sum", 30, &sum).ok());
  EXPECT_EQ(sum, 2);
  ASSERT_TRUE(prometheus->WaitForSeries("gaptrain_master_gap_count", 30, &gap_count).ok());
  EXPECT_EQ(gap_count, 4);
  ASSERT_TRUE(prometheus->WaitForSeries("gaptrain_master_model_version", 30, &version).ok());
  EXPECT_EQ(version, 4);
  double stale_bucket = 0;
  ASSERT_TRUE(prometheus
                  ->WaitForSeries("gaptrain_master_staleness_bucket{le=\"0\"}", 30, &stale_bucket)
                  .ok());
  EXPECT_EQ(stale_bucket, 2);  // the two fresh pushes
}

TEST(MasterProcessTest, ServesOverTls) {
  const std::string dir = TempDir("tls");
  std::string cmd = "openssl req -x509 -newkey rsa:2048 -nodes -subj /CN=localhost -days 1 "
                    "-addext subjectAltName=DNS:localhost -keyout '" + dir + "/key.pem' -out '" +
                    dir + "/cert.pem' >/dev/null 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << "openssl could not make a test certificate";
  MasterChild master(dir, {"--tls-cert", dir + "/cert.pem", "--tls-key", dir + "/key.pem"});
  std::ifstream in(dir + "/cert.pem");
  std::stringstream cert;
  cert << in.rdbuf();
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = cert.str();
  MasterClient::Options o;
  o.token = kToken;
  MasterClient tls(grpc::CreateChannel("localhost:" + std::to_string(master.grpc_port()),
                                       grpc::SslCredentials(ssl)),
                   o);
  proto::DescribeResponse d;
  Status s = tls.Describe(&d);
  EXPECT_TRUE(s.ok()) << s.ToString();
  o.deadline_seconds = 5;
  MasterClient plain(grpc::CreateChannel("127.0.0.1:" + std::to_string(master.grpc_port()),
                                         grpc::InsecureChannelCredentials()),
                     o);
  EXPECT_FALSE(plain.Describe(&d).ok());
}

TEST(MasterProcessTest, BadFlagsAndJobFailFast) {
  const std::string dir = TempDir("bad");
  auto run = [](const std::string& args) {
    std::string cmd = "services/master/gaptrain-master " + args + " >/dev/null 2>&1";
    int status = std::system(cmd.c_str());
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  };
  EXPECT_EQ(run(""), 2);                              // --job missing
  EXPECT_EQ(run("--job " + WriteJob(dir) + " --http-port 99999 --insecure-no-token"), 2);
  EXPECT_EQ(run("--job /nonexistent.yaml --insecure-no-token"), 2);
  EXPECT_EQ(run("--job " + WriteJob(dir)), 2);        // no token anywhere
}

}  // namespace
}  // namespace gaptrain
