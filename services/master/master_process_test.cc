// gaptrain-master as a real process: checkpoint, SIGKILL, restart gives
// bit-identical parameters and training continues; a torn checkpoint is
// skipped; SIGTERM writes a final checkpoint; health over HTTP and gRPC;
// TLS.

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "proto/health.grpc.pb.h"
#include "services/master/checkpoint.h"
#include "services/master/layout_proto.h"
#include "services/master/master_client.h"
#include "services/net/http_client.h"
#include "services/net/metrics_text.h"
#include "services/testing/prometheus_test_server.h"
#include "services/testing/test_files.h"
#include "services/testing/test_processes.h"

namespace gaptrain {
namespace {

constexpr char kToken[] = "process-test-token";
// The master's ports file: "GRPC HTTP", written once both servers listen.
constexpr size_t kGrpcPort = 0;
constexpr size_t kHttpPort = 1;

std::string WriteJob(const std::string& dir, int checkpoint_interval_seconds = 3600,
                     const std::string& model = "{builtin: mlp}") {
  std::string path = dir + "/job.yaml";
  std::ofstream(path) << R"(apiVersion: gaptrain.io/v1alpha1
kind: TrainingJob
metadata: {name: process-test}
spec:
  model: )" << model << R"(
  data: {format: mnist-idx, path: /unused}
  training:
    batchSize: 64
    maxUpdates: 100000
    optimizer: {learningRate: 0.05, momentum: 0.9, weightDecay: 1.0e-4}
    staleness: {rule: gap-aware, gapPrecision: bf16}
  workers: {replicas: 2}
  master:
    checkpoint: {intervalSeconds: )"
                     << checkpoint_interval_seconds << R"(, keep: 3, path: )" << dir
                     << R"(/ckpt}
)";
  return path;
}

// gaptrain-master as a child process; its log is <dir>/master.log (a
// restart in the same directory appends to it).
std::unique_ptr<ChildProcess> StartMaster(const std::string& dir,
                                          const std::vector<std::string>& extra = {},
                                          int checkpoint_interval_seconds = 3600,
                                          const std::string& model = "{builtin: mlp}") {
  std::vector<std::string> args = {"--job", WriteJob(dir, checkpoint_interval_seconds, model),
                                   "--listen", "127.0.0.1:0",
                                   "--http-address", "127.0.0.1",
                                   "--http-port", "0",
                                   "--train-samples", "60000"};
  args.insert(args.end(), extra.begin(), extra.end());
  auto master = std::make_unique<ChildProcess>("services/master/gaptrain-master", args,
                                               dir + "/ports", dir + "/master.log", kToken,
                                               /*port_count=*/2);
  EXPECT_TRUE(master->started()) << ReadRaw(master->log_file());
  return master;
}

MasterClient Client(const ChildProcess& master) {
  MasterClient::Options o;
  o.token = kToken;
  return MasterClient(
      grpc::CreateChannel(master.address(kGrpcPort), grpc::InsecureChannelCredentials()), o);
}

double UnixNow() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

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
  const std::string dir = TestTempDir("kill");
  size_t p = 0;
  std::vector<float> at_checkpoint;
  uint64_t checkpoint_version = 0;
  {
    auto master = StartMaster(dir);
    MasterClient client = Client(*master);
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
    master->Kill(SIGKILL);
  }
  auto restarted = StartMaster(dir);
  MasterClient client = Client(*restarted);
  uint64_t version = 0;
  EXPECT_EQ(PullAll(client, p, &version), at_checkpoint);  // worker 1 is still a member
  EXPECT_EQ(version, 20u);
  EXPECT_NE(ReadRaw(restarted->log_file()).find("at version 20 with 2 workers [1, 2]"),
            std::string::npos)
      << ReadRaw(restarted->log_file());
  // The checkpoint it resumed from is its last one, not "never".
  HttpClientResponse metrics;
  ASSERT_TRUE(HttpGet("127.0.0.1", restarted->port(kHttpPort), "/metrics", 10, &metrics).ok());
  const MetricsSample sample = ParseMetricsText(metrics.body);
  const double last = MetricValue(sample, "gaptrain_master_last_checkpoint_timestamp_seconds");
  EXPECT_GT(last, UnixNow() - 600);
  EXPECT_LE(last, MetricValue(sample, "gaptrain_master_start_time_seconds"));
  Train(client, 3, p);
  proto::DescribeResponse d;
  ASSERT_TRUE(client.Describe(&d).ok());
  EXPECT_EQ(d.version(), 23u);
  EXPECT_EQ(d.live_workers(), 2u);
}

// spec.master.shards: 2 on the mlp, shard `shard`'s master in `dir`
// (checkpoints in DIR/ckpt/shard-I).
std::unique_ptr<ChildProcess> StartShard(const std::string& dir, int shard,
                                         const std::string& log_name) {
  const std::string job = dir + "/sharded.yaml";
  std::string yaml = ReadRaw(WriteJob(dir));
  yaml.replace(yaml.find("  master:\n"), 10, "  master:\n    shards: 2\n");
  std::ofstream(job) << yaml;
  auto master = std::make_unique<ChildProcess>(
      "services/master/gaptrain-master",
      std::vector<std::string>{"--job", job, "--listen", "127.0.0.1:0", "--http-address",
                               "127.0.0.1", "--http-port", "0", "--train-samples", "60000",
                               "--shard", std::to_string(shard)},
      dir + "/" + log_name + ".ports", dir + "/" + log_name + ".log", kToken,
      /*port_count=*/2);
  return master;
}

TEST(MasterProcessTest, TwoShardsHoldTheWholeModelsHalvesAndCheckpointApart) {
  const std::string dir = TestTempDir("shards");
  const size_t p = 235146;  // the mlp
  // The same job with one master: θ as a whole, under the same seed.
  std::vector<float> whole;
  MasterClient::PullResult r;
  {
    auto single = StartMaster(TestTempDir("shards-single"));
    MasterClient client = Client(*single);
    whole.resize(p);
    ASSERT_TRUE(client.PullModel(-1, whole.data(), p, &r).ok());
  }
  auto first = StartShard(dir, 0, "shard-0");
  auto second = StartShard(dir, 1, "shard-1");
  ASSERT_TRUE(first->started()) << ReadRaw(first->log_file());
  ASSERT_TRUE(second->started()) << ReadRaw(second->log_file());
  MasterClient a = Client(*first);
  MasterClient b = Client(*second);
  proto::DescribeResponse da, db;
  ASSERT_TRUE(a.Describe(&da).ok());
  ASSERT_TRUE(b.Describe(&db).ok());
  // Each names the whole model and its own range; the ranges tile it.
  EXPECT_EQ(da.layout().SerializeAsString(), db.layout().SerializeAsString());
  EXPECT_EQ(da.shard().index(), 0u);
  EXPECT_EQ(db.shard().index(), 1u);
  EXPECT_EQ(da.shard().count(), 2u);
  EXPECT_EQ(da.shard().begin(), 0u);
  EXPECT_EQ(da.shard().end(), db.shard().begin());
  EXPECT_EQ(db.shard().end(), p);
  const size_t cut = da.shard().end();
  EXPECT_GT(cut, p / 2 - p / 16);
  EXPECT_LT(cut, p / 2 + p / 16);
  // Their values are the single master's, cut at the boundary.
  std::vector<float> part_a(cut), part_b(p - cut);
  ASSERT_TRUE(a.PullModel(-1, part_a.data(), part_a.size(), &r).ok());
  ASSERT_TRUE(b.PullModel(-1, part_b.data(), part_b.size(), &r).ok());
  EXPECT_EQ(part_a, std::vector<float>(whole.begin(), whole.begin() + cut));
  EXPECT_EQ(part_b, std::vector<float>(whole.begin() + cut, whole.end()));

  // Shard 1 takes gradients of its part, not of the whole model.
  proto::SetMembersResponse m;
  ASSERT_TRUE(b.SetMembers({1}, &m).ok());
  std::vector<float> g(p, 0.01f);
  ASSERT_TRUE(b.Pull(1, -1, g.data(), p - cut, &r).ok());  // gap-aware keeps its copy
  std::fill(g.begin(), g.end(), 0.01f);
  proto::PushResponse pushed;
  EXPECT_EQ(b.Push(1, 0, g.data(), p, 1.0f, &pushed).code(), Status::Code::kInvalidArgument);
  Status s = b.Push(1, 0, g.data(), p - cut, 1.0f, &pushed);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(pushed.version(), 1u);
  // The module's buffers are shard 0's business.
  proto::PullBuffersResponse buffers;
  EXPECT_EQ(b.PullBuffers(&buffers).code(), Status::Code::kFailedPrecondition);

  // Its checkpoint is its own, and says which part it holds.
  proto::CheckpointResponse c;
  ASSERT_TRUE(b.Checkpoint(&c).ok());
  EXPECT_EQ(c.path(), dir + "/ckpt/shard-1/" + CheckpointDirectory::FileName(1));
  std::unique_ptr<ParameterStore> store;
  CheckpointMeta meta;
  ASSERT_TRUE(ReadCheckpoint(c.path(), &store, &meta).ok());
  EXPECT_EQ(meta.shard, (ParameterShard{1, 2, cut, p}));
  EXPECT_EQ(store->size(), p - cut);
  EXPECT_EQ(meta.model_layout.size(), p);
  std::vector<float> after(p - cut);
  ASSERT_TRUE(b.PullModel(-1, after.data(), after.size(), &r).ok());

  // Restarted, shard 1 resumes from its own checkpoint; shard 0 never moved.
  second->Kill(SIGKILL);
  auto again = StartShard(dir, 1, "shard-1");
  ASSERT_TRUE(again->started()) << ReadRaw(again->log_file());
  MasterClient b2 = Client(*again);
  std::vector<float> restored(p - cut);
  ASSERT_TRUE(b2.PullModel(-1, restored.data(), restored.size(), &r).ok());
  EXPECT_EQ(r.version, 1u);
  EXPECT_EQ(restored, after);
  ASSERT_TRUE(a.Describe(&da).ok());
  EXPECT_EQ(da.version(), 0u);
}

TEST(MasterProcessTest, AShardBeyondTheJobsShardsIsRefused) {
  const std::string dir = TestTempDir("shard-beyond");
  auto master = StartShard(dir, 2, "beyond");
  EXPECT_FALSE(master->started());
  int status = 0;
  ASSERT_TRUE(master->WaitExit(std::chrono::seconds(30), &status));
  EXPECT_NE(ReadRaw(master->log_file()).find("--shard 2: the job has spec.master.shards 2"),
            std::string::npos)
      << ReadRaw(master->log_file());
}

TEST(MasterProcessTest, CheckpointsEveryIntervalSeconds) {
  const std::string dir = TestTempDir("interval");
  auto master = StartMaster(dir, {}, /*checkpoint_interval_seconds=*/1);
  MasterClient client = Client(*master);
  proto::SetMembersResponse m;
  ASSERT_TRUE(client.SetMembers({1}, &m).ok());
  const size_t p = 235146;
  Train(client, 3, p);
  uint64_t version = 0;
  const std::vector<float> theta = PullAll(client, p, &version);
  ASSERT_EQ(version, 3u);

  // No request and no signal: only the interval writes a checkpoint of
  // version 3. The file appears at its rename; the log line follows it.
  const std::string expected = dir + "/ckpt/" + CheckpointDirectory::FileName(3);
  std::unique_ptr<ParameterStore> loaded;
  ASSERT_TRUE(Eventually(
      [&] {
        return ReadRaw(master->log_file()).find("written (version 3") != std::string::npos;
      },
      std::chrono::seconds(30)))
      << ReadRaw(master->log_file());
  Status read = ReadCheckpoint(expected, &loaded, nullptr);
  ASSERT_TRUE(read.ok()) << read.ToString();
  ASSERT_EQ(loaded->size(), p);
  EXPECT_EQ(std::vector<float>(loaded->params(), loaded->params() + p), theta);
}

TEST(MasterProcessTest, TornNewestCheckpointIsSkipped) {
  const std::string dir = TestTempDir("torn");
  size_t p = 235146;
  std::vector<float> older;
  {
    auto master = StartMaster(dir);
    MasterClient client = Client(*master);
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
    master->Kill(SIGKILL);
    // Tear the newest file as a crash mid-write on a non-atomic store would.
    ASSERT_EQ(truncate(c.path().c_str(), 1000), 0);
  }
  auto restarted = StartMaster(dir);
  MasterClient client = Client(*restarted);
  uint64_t version = 0;
  EXPECT_EQ(PullAll(client, p, &version), older);
  EXPECT_EQ(version, 4u);
}

TEST(MasterProcessTest, SigtermWritesAFinalCheckpointAndExitsCleanly) {
  const std::string dir = TestTempDir("term");
  auto master = StartMaster(dir);
  MasterClient client = Client(*master);
  proto::SetMembersResponse m;
  ASSERT_TRUE(client.SetMembers({1}, &m).ok());
  Train(client, 7, 235146);
  int status = master->Kill(SIGTERM);
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
  const std::string dir = TestTempDir("health");
  auto master = StartMaster(dir);
  HttpClientResponse health;
  ASSERT_TRUE(HttpGet("127.0.0.1", master->port(kHttpPort), "/healthz", 10, &health).ok());
  EXPECT_EQ(health.status, 200);
  HttpClientResponse metrics;
  ASSERT_TRUE(HttpGet("127.0.0.1", master->port(kHttpPort), "/metrics", 10, &metrics).ok());
  EXPECT_NE(metrics.body.find("gaptrain_master_model_version"), std::string::npos);
  EXPECT_NE(metrics.body.find("gaptrain_master_tensor_gap{tensor=\"fc1.weight\"}"),
            std::string::npos);
  // A fresh master: no checkpoint yet, the job's interval, its start time.
  const MetricsSample sample = ParseMetricsText(metrics.body);
  EXPECT_EQ(MetricValue(sample, "gaptrain_master_last_checkpoint_timestamp_seconds", -1), 0);
  EXPECT_EQ(MetricValue(sample, "gaptrain_master_checkpoint_interval_seconds"), 3600);
  const double started = MetricValue(sample, "gaptrain_master_start_time_seconds");
  EXPECT_GT(started, UnixNow() - 600);
  EXPECT_LE(started, UnixNow());

  auto channel =
      grpc::CreateChannel(master->address(kGrpcPort), grpc::InsecureChannelCredentials());
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
  const std::string dir = TestTempDir("prometheus");
  auto master = StartMaster(dir);
  MasterClient client = Client(*master);
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
  Status s = PrometheusTestServer::Start({master->address(kHttpPort)}, 0.5, &prometheus);
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
  const std::string dir = TestTempDir("tls");
  std::string cmd = "openssl req -x509 -newkey rsa:2048 -nodes -subj /CN=localhost -days 1 "
                    "-addext subjectAltName=DNS:localhost -keyout '" + dir + "/key.pem' -out '" +
                    dir + "/cert.pem' >/dev/null 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << "openssl could not make a test certificate";
  auto master = StartMaster(dir, {"--tls-cert", dir + "/cert.pem", "--tls-key", dir + "/key.pem"});
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = ReadRaw(dir + "/cert.pem");
  MasterClient::Options o;
  o.token = kToken;
  MasterClient tls(grpc::CreateChannel("localhost:" + std::to_string(master->port(kGrpcPort)),
                                       grpc::SslCredentials(ssl)),
                   o);
  proto::DescribeResponse d;
  Status s = tls.Describe(&d);
  EXPECT_TRUE(s.ok()) << s.ToString();
  o.deadline_seconds = 5;
  MasterClient plain(
      grpc::CreateChannel(master->address(kGrpcPort), grpc::InsecureChannelCredentials()), o);
  EXPECT_FALSE(plain.Describe(&d).ok());
}

TEST(MasterProcessTest, BadFlagsAndJobFailFast) {
  const std::string dir = TestTempDir("bad");
  // Exits with 2 and says `what` on stderr.
  auto fails_saying = [&](const std::string& args, const std::string& what) {
    const std::string err = dir + "/stderr";
    std::string cmd = "env -u GAPTRAIN_TOKEN services/master/gaptrain-master " + args +
                      " >/dev/null 2>" + err;
    int status = std::system(cmd.c_str());
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 2) << args;
    const std::string said = ReadRaw(err);
    EXPECT_NE(said.find(what), std::string::npos) << args << " said: " << said;
  };
  fails_saying("", "--job: is required");
  fails_saying("--job " + WriteJob(dir) + " --http-port 99999 --insecure-no-token",
               "--http-port");
  fails_saying("--job " + WriteJob(dir) + " --listen nowhere --insecure-no-token", "--listen");
  fails_saying("--job " + WriteJob(dir) + " --tls-cert a.pem --insecure-no-token",
               "--tls-cert and --tls-key");
  fails_saying("--job /nonexistent.yaml --insecure-no-token", "/nonexistent.yaml");
  fails_saying("--job " + WriteJob(dir), "token");  // no token anywhere
  fails_saying("--job " + WriteJob(dir) + " --insecure-no-token --bogus", "--bogus");
}

// spec.model.fromTrainer: the master waits (Describe says so, every other
// verb is UNAVAILABLE) until a trainer declares the model, adopts the
// first declaration and then serves it on the same port; a declaration
// that differs is refused naming the tensor; its checkpoint keeps the
// declared model, which a restart serves at once.
TEST(MasterProcessTest, AMasterOfADeclaredModelWaitsAdoptsAndRestoresIt) {
  const std::string dir = TestTempDir("declared");
  ParameterLayout layout;
  ASSERT_TRUE(layout.Add("fc.weight", {4, 3}).ok());
  ASSERT_TRUE(layout.Add("fc.bias", {4}).ok());
  BufferLayout buffers;
  ASSERT_TRUE(buffers.Add("bn.running_mean", {4}, BufferDType::kFloat32).ok());
  proto::ModelLayout wire;
  LayoutToProto(layout, &wire);
  BufferLayoutToProto(buffers, &wire);
  std::vector<float> values(16);
  for (size_t i = 0; i < values.size(); ++i) values[i] = 0.25f * static_cast<float>(i) - 1;
  const std::string buffer_values(16, '\0');
  {
    auto master = StartMaster(dir, {}, 3600, "{fromTrainer: true}");
    MasterClient client = Client(*master);
    proto::DescribeResponse d;
    ASSERT_TRUE(client.Describe(&d).ok());
    EXPECT_TRUE(d.awaiting_model());
    EXPECT_EQ(d.layout().tensors_size(), 0);
    EXPECT_EQ(d.rule(), "gap-aware");
    std::vector<float> theta(16);
    MasterClient::PullResult r;
    EXPECT_EQ(client.PullModel(-1, theta.data(), 16, &r).code(), Status::Code::kUnavailable);
    proto::SetMembersResponse members;
    EXPECT_EQ(client.SetMembers({1}, &members).code(), Status::Code::kUnavailable);

    bool adopted = false;
    ASSERT_TRUE(client.DeclareModel(1, wire, values, buffer_values, &adopted).ok());
    EXPECT_TRUE(adopted);
    // The same port serves the model once the engine is up.
    ASSERT_TRUE(Eventually([&] {
      return client.Describe(&d).ok() && !d.awaiting_model();
    }));
    EXPECT_EQ(d.layout().tensors_size(), 2);
    EXPECT_EQ(d.layout().buffers(0).name(), "bn.running_mean");
    ASSERT_TRUE(client.PullModel(-1, theta.data(), 16, &r).ok());
    EXPECT_EQ(theta, values);
    // A second trainer with the same model: not adopted, fine; with
    // another: refused, naming the tensor.
    ASSERT_TRUE(client.DeclareModel(2, wire, values, buffer_values, &adopted).ok());
    EXPECT_FALSE(adopted);
    proto::ModelLayout other = wire;
    other.mutable_tensors(1)->set_shape(0, 5);
    const Status refused =
        client.DeclareModel(3, other, std::vector<float>(17), buffer_values, &adopted);
    EXPECT_EQ(refused.code(), Status::Code::kFailedPrecondition);
    EXPECT_NE(refused.message().find("tensor 1 is fc.bias [5] in the declaration, fc.bias [4] "
                                     "on the master"),
              std::string::npos)
        << refused.ToString();
    master->Signal(SIGTERM);
    int status = 0;
    ASSERT_TRUE(master->WaitExit(std::chrono::seconds(20), &status));
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << ReadRaw(master->log_file());
  }
  // The final checkpoint holds the declared model: a restart serves it.
  auto master = StartMaster(dir, {}, 3600, "{fromTrainer: true}");
  MasterClient client = Client(*master);
  proto::DescribeResponse d;
  ASSERT_TRUE(client.Describe(&d).ok());
  EXPECT_FALSE(d.awaiting_model());
  EXPECT_EQ(d.layout().tensors(0).name(), "fc.weight");
  std::vector<float> theta(16);
  MasterClient::PullResult r;
  ASSERT_TRUE(client.PullModel(-1, theta.data(), 16, &r).ok());
  EXPECT_EQ(theta, values);
}

}  // namespace
}  // namespace gaptrain
