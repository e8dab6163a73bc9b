#include "services/master/master_service.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <cmath>
#include <cstring>
#include <thread>

#include "services/master/master_client.h"
#include "services/numeric/bfloat16.h"
#include "services/testing/test_files.h"
#include "services/testing/test_processes.h"

namespace gaptrain {
namespace {

constexpr char kToken[] = "s3cret-job-token";

ParameterLayout Layout(size_t size) {
  ParameterLayout layout;
  EXPECT_TRUE(layout.Add("fc.weight", {static_cast<int64_t>(size - size / 4)}).ok());
  EXPECT_TRUE(layout.Add("fc.bias", {static_cast<int64_t>(size / 4)}).ok());
  return layout;
}

// A master on 127.0.0.1:<ephemeral> with one client.
class MasterServer {
 public:
  MasterServer(size_t size, RuleConfig rule, double lr = 1.0,
               const proto::MasterIncarnation& run = proto::MasterIncarnation(),
               PushLedger* ledger = nullptr, std::shared_ptr<ModelBuffers> buffers = nullptr,
               uint64_t max_updates = 0) {
    UpdateEngine::Options options;
    options.rule = rule;
    options.max_updates = max_updates;
    options.schedule.learning_rate = lr;
    std::unique_ptr<UpdateEngine> engine;
    Status s = UpdateEngine::Create(Layout(size), options, &engine);
    EXPECT_TRUE(s.ok()) << s.ToString();
    metrics_ = std::make_shared<MasterMetrics>(std::make_shared<prometheus::Registry>(),
                                               engine->store().layout());
    MasterService::Options service_options;
    service_options.job_name = "test-job";
    service_options.token = kToken;
    service_options.incarnation = run;
    service_options.ledger = ledger;
    service_options.buffers = std::move(buffers);
    service_ = std::make_unique<MasterService>(std::move(engine), service_options, metrics_);
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.SetMaxReceiveMessageSize(MasterService::kMaxMessageBytes);
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    EXPECT_NE(port_, 0);
  }
  ~MasterServer() { server_->Shutdown(); }

  std::shared_ptr<grpc::Channel> Channel() {
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(64 << 20);
    return grpc::CreateCustomChannel("127.0.0.1:" + std::to_string(port_),
                                     grpc::InsecureChannelCredentials(), args);
  }
  MasterClient Client(proto::WireType wire = proto::FLOAT32, uint32_t chunk = 4096,
                      const std::string& token = kToken) {
    MasterClient::Options o;
    o.token = token;
    o.wire_type = wire;
    o.chunk_values = chunk;
    return MasterClient(Channel(), o);
  }
  uint64_t Version() {
    uint64_t v = 0;
    service_->WithEngine([&](UpdateEngine* e) { v = e->version(); });
    return v;
  }
  std::vector<float> Params() {
    std::vector<float> p;
    service_->WithEngine([&](UpdateEngine* e) {
      p.assign(e->store().params(), e->store().params() + e->store().size());
    });
    return p;
  }

  MasterService* service() { return service_.get(); }

  // The value of the sample of metric `family` whose labels include every
  // one of `labels`: a counter's or gauge's value, a histogram's count.
  // -1 when there is no such sample.
  double Metric(const std::string& family, const std::map<std::string, std::string>& labels = {}) {
    for (const prometheus::MetricFamily& f : metrics_->registry()->Collect()) {
      if (f.name != family) continue;
      for (const prometheus::ClientMetric& m : f.metric) {
        size_t matched = 0;
        for (const prometheus::ClientMetric::Label& l : m.label) {
          auto it = labels.find(l.name);
          matched += it != labels.end() && it->second == l.value;
        }
        if (matched != labels.size()) continue;
        switch (f.type) {
          case prometheus::MetricType::Counter: return m.counter.value;
          case prometheus::MetricType::Gauge: return m.gauge.value;
          case prometheus::MetricType::Histogram:
            return static_cast<double>(m.histogram.sample_count);
          default: return -1;
        }
      }
    }
    return -1;
  }
  double Rejected(const std::string& reason) {
    return Metric("gaptrain_master_pushes_rejected_total", {{"reason", reason}});
  }

 private:
  std::shared_ptr<MasterMetrics> metrics_;
  std::unique_ptr<MasterService> service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

RuleConfig PlainSgd() { return RuleConfig(); }  // ASGD, no momentum, no decay

TEST(MasterServiceTest, DescribeReportsLayoutRuleAndVersion) {
  RuleConfig rule;
  rule.kind = RuleKind::kGapAware;
  rule.gap_source = GapSource::kEcho;
  rule.gap_precision = GapPrecision::kBfloat16;
  MasterServer master(1000, rule);
  MasterClient client = master.Client();
  proto::DescribeResponse d;
  ASSERT_TRUE(client.Describe(&d).ok());
  EXPECT_EQ(d.job_name(), "test-job");
  EXPECT_EQ(d.rule(), "gap-aware");
  EXPECT_EQ(d.layout().tensors_size(), 2);
  EXPECT_EQ(d.layout().tensors(0).name(), "fc.weight");
  EXPECT_EQ(d.version(), 0u);
  EXPECT_TRUE(d.needs_echo());
  EXPECT_EQ(d.echo_type(), proto::BFLOAT16);
}

TEST(MasterServiceTest, EveryRpcNeedsTheJobToken) {
  MasterServer master(100, PlainSgd());
  proto::DescribeResponse d;
  for (const std::string token : {"", "wrong-token"}) {
    MasterClient client = master.Client(proto::FLOAT32, 4096, token);
    EXPECT_EQ(client.Describe(&d).code(), Status::Code::kUnauthenticated) << token;
    proto::SetMembersResponse m;
    EXPECT_EQ(client.SetMembers({1}, &m).code(), Status::Code::kUnauthenticated);
    std::vector<float> buf(100), g(100, 1.0f);
    MasterClient::PullResult r;
    EXPECT_EQ(client.Pull(1, -1, buf.data(), 100, &r).code(), Status::Code::kUnauthenticated);
    proto::PushResponse p;
    EXPECT_EQ(client.Push(1, 0, g.data(), 100, 0, &p).code(), Status::Code::kUnauthenticated);
    proto::CheckpointResponse c;
    EXPECT_EQ(client.Checkpoint(&c).code(), Status::Code::kUnauthenticated);
    EXPECT_EQ(client.PushBuffers(1, "").code(), Status::Code::kUnauthenticated);
    proto::PullBuffersResponse b;
    EXPECT_EQ(client.PullBuffers(&b).code(), Status::Code::kUnauthenticated);
  }
  EXPECT_EQ(master.Version(), 0u);
  EXPECT_TRUE(master.Client().Describe(&d).ok());
}

TEST(MasterServiceTest, PullPushAndNotModified) {
  MasterServer master(10000, PlainSgd(), /*lr=*/0.5);
  MasterClient client = master.Client(proto::FLOAT32, 3000);  // 4 chunks
  proto::SetMembersResponse m;
  ASSERT_TRUE(client.SetMembers({7}, &m).ok());
  ASSERT_EQ(m.joined_size(), 1);

  std::vector<float> theta(10000, -1.0f);
  MasterClient::PullResult r;
  ASSERT_TRUE(client.Pull(7, -1, theta.data(), theta.size(), &r).ok());
  EXPECT_TRUE(r.modified);
  EXPECT_EQ(r.version, 0u);
  EXPECT_EQ(theta[9999], 0.0f);

  std::vector<float> g(10000);
  for (size_t i = 0; i < g.size(); ++i) g[i] = static_cast<float>(i % 7);
  proto::PushResponse p;
  ASSERT_TRUE(client.Push(7, 0, g.data(), g.size(), 2.5f, &p).ok());
  EXPECT_EQ(p.outcome(), proto::PushResponse::APPLIED);
  EXPECT_EQ(p.version(), 1u);

  ASSERT_TRUE(client.Pull(7, 0, theta.data(), theta.size(), &r).ok());
  EXPECT_TRUE(r.modified);
  for (size_t i = 0; i < g.size(); ++i) ASSERT_EQ(theta[i], -0.5f * g[i]) << i;

  std::fill(theta.begin(), theta.end(), 42.0f);
  ASSERT_TRUE(client.Pull(7, 1, theta.data(), theta.size(), &r).ok());
  EXPECT_FALSE(r.modified);
  EXPECT_EQ(r.version, 1u);
  EXPECT_EQ(theta[0], 42.0f);  // untouched
}

// PushPull: the push is applied, and the same call brings the parameters
// after it, in as many chunks as a pull; counted as a push and a pull.
TEST(MasterServiceTest, PushPullAppliesThePushAndReturnsTheNextParameters) {
  for (proto::WireType wire : {proto::FLOAT32, proto::BFLOAT16}) {
    SCOPED_TRACE(proto::WireType_Name(wire));
    MasterServer master(10000, PlainSgd(), /*lr=*/0.5);
    MasterClient client = master.Client(wire, 3000);  // 4 chunks each way
    proto::SetMembersResponse m;
    ASSERT_TRUE(client.SetMembers({7, 8}, &m).ok());
    std::vector<float> theta(10000, -1.0f);
    MasterClient::PullResult r;
    ASSERT_TRUE(client.Pull(7, -1, theta.data(), theta.size(), &r).ok());

    std::vector<float> g(10000);
    for (size_t i = 0; i < g.size(); ++i) g[i] = static_cast<float>(i % 7);
    MasterClient::PushPullResult pp;
    ASSERT_TRUE(
        client.PushPull(7, 0, g.data(), g.size(), 1.5f, nullptr, proto::FLOAT32, theta.data(), &pp)
            .ok());
    ASSERT_TRUE(pp.pull_status.ok()) << pp.pull_status.ToString();
    EXPECT_EQ(pp.push.outcome(), proto::PushResponse::APPLIED);
    EXPECT_EQ(pp.push.version(), 1u);
    EXPECT_EQ(pp.push.staleness(), 0u);
    EXPECT_TRUE(pp.pull.modified);
    EXPECT_EQ(pp.pull.version, 1u);
    EXPECT_EQ(theta, master.Params()) << "the parameters after the push";
    for (size_t i = 0; i < g.size(); ++i) ASSERT_EQ(theta[i], -0.5f * g[i]) << i;

    // Worker 8 pushes in between: worker 7's next PushPull is 1 stale and
    // brings both updates.
    proto::PushResponse p;
    ASSERT_TRUE(client.Push(8, 1, g.data(), g.size(), 0, &p).ok());
    ASSERT_TRUE(
        client.PushPull(7, 1, g.data(), g.size(), 1.5f, nullptr, proto::FLOAT32, theta.data(), &pp)
            .ok());
    EXPECT_EQ(pp.push.version(), 3u);
    EXPECT_EQ(pp.push.staleness(), 1u);
    EXPECT_EQ(pp.pull.version, 3u);
    EXPECT_EQ(theta, master.Params());
    EXPECT_EQ(master.Metric("gaptrain_master_pushes_total", {{"outcome", "applied"}}), 3);
    EXPECT_EQ(master.Metric("gaptrain_master_pull_duration_seconds"), 3) << "one pull, two push-pulls";
  }
}

// The worker's copy may be both the echo it sends and the buffer the new
// parameters arrive in: the echo is wholly sent before any value lands.
TEST(MasterServiceTest, PushPullMayReceiveIntoTheEchoedCopy) {
  RuleConfig rule;
  rule.kind = RuleKind::kGapAware;
  rule.gap_source = GapSource::kEcho;
  MasterServer master(50000, rule, 0.1);
  MasterClient client = master.Client(proto::FLOAT32, 4096);
  proto::SetMembersResponse m;
  ASSERT_TRUE(client.SetMembers({1}, &m).ok());
  std::vector<float> theta(50000), g(50000, 0.5f);
  MasterClient::PullResult r;
  ASSERT_TRUE(client.Pull(1, -1, theta.data(), theta.size(), &r).ok());
  for (int step = 0; step < 4; ++step) {
    MasterClient::PushPullResult pp;
    ASSERT_TRUE(client
                    .PushPull(1, r.version, g.data(), g.size(), 0, theta.data(), proto::FLOAT32,
                              theta.data(), &pp)
                    .ok());
    // An echo clobbered by the incoming values would be far from the
    // worker's copy: a Gap well above 1.
    EXPECT_NEAR(pp.push.gap_mean(), 1.0, 1e-6) << "step " << step;
    ASSERT_TRUE(pp.pull.modified);
    EXPECT_EQ(theta, master.Params());
    r = pp.pull;
  }
}

// A refused push ends the call with Push's status, and nothing is written
// into the parameters buffer; in sync mode an accumulated push whose step
// is not taken within MasterService::kStepWaitLimit brings no values to a
// worker that holds the step's parameters (the next step's do not exist
// yet).
TEST(MasterServiceTest, PushPullRefusalsAndAnAccumulatedSyncPush) {
  MasterServer master(1000, PlainSgd());
  MasterClient client = master.Client(proto::FLOAT32, 300);
  proto::SetMembersResponse m;
  ASSERT_TRUE(client.SetMembers({1}, &m).ok());
  std::vector<float> theta(1000, 42.0f), g(1000, 1.0f);
  MasterClient::PushPullResult pp;
  EXPECT_EQ(client.PushPull(9, 0, g.data(), 1000, 0, nullptr, proto::FLOAT32, theta.data(), &pp)
                .code(),
            Status::Code::kNotFound);
  EXPECT_EQ(client.PushPull(1, 5, g.data(), 1000, 0, nullptr, proto::FLOAT32, theta.data(), &pp)
                .code(),
            Status::Code::kOutOfRange);
  EXPECT_EQ(client.PushPull(1, 0, g.data(), 999, 0, nullptr, proto::FLOAT32, theta.data(), &pp)
                .code(),
            Status::Code::kInvalidArgument);
  MasterClient stranger = master.Client(proto::FLOAT32, 300, "wrong-token");
  EXPECT_EQ(stranger.PushPull(1, 0, g.data(), 1000, 0, nullptr, proto::FLOAT32, theta.data(), &pp)
                .code(),
            Status::Code::kUnauthenticated);
  EXPECT_EQ(theta, std::vector<float>(1000, 42.0f));
  EXPECT_EQ(master.Version(), 0u);

  RuleConfig sync;
  sync.kind = RuleKind::kSync;
  MasterServer stepped(1000, sync);
  MasterClient worker = stepped.Client(proto::FLOAT32, 300);
  ASSERT_TRUE(worker.SetMembers({1, 2}, &m).ok());
  MasterClient::PullResult r;
  ASSERT_TRUE(worker.Pull(1, -1, theta.data(), 1000, &r).ok());
  std::fill(theta.begin(), theta.end(), 42.0f);
  ASSERT_TRUE(
      worker.PushPull(1, 0, g.data(), 1000, 0, nullptr, proto::FLOAT32, theta.data(), &pp).ok());
  ASSERT_TRUE(pp.pull_status.ok()) << pp.pull_status.ToString();
  EXPECT_EQ(pp.push.outcome(), proto::PushResponse::ACCUMULATED);
  EXPECT_FALSE(pp.pull.modified);
  EXPECT_EQ(pp.pull.version, 0u);
  EXPECT_EQ(theta, std::vector<float>(1000, 42.0f));
}

// In sync mode an accumulated PushPull is held until its step is taken,
// by another member's push or by a member leaving, and then brings the
// step's parameters: the worker polls for nothing.
TEST(MasterServiceTest, AnAccumulatedSyncPushPullAnswersWithTheStepsParameters) {
  RuleConfig sync;
  sync.kind = RuleKind::kSync;
  MasterServer master(1000, sync, /*lr=*/1.0);
  MasterClient client = master.Client(proto::FLOAT32, 300);
  proto::SetMembersResponse m;
  ASSERT_TRUE(client.SetMembers({1, 2}, &m).ok());
  std::vector<float> g(1000, 2.0f);
  const auto accumulated = [&master](double n) {
    return Eventually([&] {
      return master.Metric("gaptrain_master_pushes_total", {{"outcome", "accumulated"}}) == n;
    });
  };

  // Step 1 is taken by worker 2's push.
  std::vector<float> theta(1000, 42.0f);
  MasterClient::PushPullResult held;
  Status held_status;
  std::thread waiting([&] {
    held_status = master.Client(proto::FLOAT32, 300)
                      .PushPull(1, 0, g.data(), 1000, 0, nullptr, proto::FLOAT32, theta.data(),
                                &held);
  });
  ASSERT_TRUE(accumulated(1));
  proto::PushResponse p;
  ASSERT_TRUE(client.Push(2, 0, g.data(), 1000, 0, &p).ok());
  EXPECT_EQ(p.outcome(), proto::PushResponse::APPLIED);
  waiting.join();
  ASSERT_TRUE(held_status.ok()) << held_status.ToString();
  ASSERT_TRUE(held.pull_status.ok()) << held.pull_status.ToString();
  EXPECT_EQ(held.push.outcome(), proto::PushResponse::ACCUMULATED);
  EXPECT_EQ(held.push.version(), 0u);
  EXPECT_TRUE(held.pull.modified);
  EXPECT_EQ(held.pull.version, 1u);
  EXPECT_EQ(theta, std::vector<float>(1000, -2.0f));  // the mean gradient, lr 1

  // Step 2 is taken when worker 2 leaves: worker 1's gradient alone.
  std::thread leaving([&] {
    held_status = master.Client(proto::FLOAT32, 300)
                      .PushPull(1, 1, g.data(), 1000, 0, nullptr, proto::FLOAT32, theta.data(),
                                &held);
  });
  ASSERT_TRUE(accumulated(2));
  ASSERT_TRUE(client.SetMembers({1}, &m).ok());
  leaving.join();
  ASSERT_TRUE(held_status.ok()) << held_status.ToString();
  EXPECT_EQ(held.push.outcome(), proto::PushResponse::ACCUMULATED);
  EXPECT_TRUE(held.pull.modified);
  EXPECT_EQ(held.pull.version, 2u);
  EXPECT_EQ(theta, std::vector<float>(1000, -4.0f));
}

// Every push adds the same -1 to every parameter, so the final model is
// known whatever the order, and any pulled model must be uniform: a pull
// that saw half an update would hold two different values.
TEST(MasterServiceTest, ConcurrentPushesAndPullsSeeWholeUpdates) {
  constexpr size_t kSize = 200000;
  constexpr int kThreads = 8;
  constexpr int kPushesPerThread = 40;
  MasterServer master(kSize, PlainSgd(), /*lr=*/1.0);
  std::vector<uint32_t> ids;
  for (int t = 0; t < kThreads; ++t) ids.push_back(t + 1);
  proto::SetMembersResponse m;
  ASSERT_TRUE(master.Client().SetMembers(ids, &m).ok());

  std::atomic<int> torn{0}, errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      MasterClient client = master.Client(proto::FLOAT32, /*chunk=*/5000);
      std::vector<float> theta(kSize), ones(kSize, 1.0f);
      for (int i = 0; i < kPushesPerThread; ++i) {
        MasterClient::PullResult r;
        if (!client.Pull(t + 1, -1, theta.data(), kSize, &r).ok()) ++errors;
        for (size_t j = 1; j < kSize; ++j) {
          if (theta[j] != theta[0]) {
            ++torn;
            break;
          }
        }
        proto::PushResponse p;
        if (!client.Push(t + 1, r.version, ones.data(), kSize, 0, &p).ok()) ++errors;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(torn.load(), 0);
  EXPECT_EQ(master.Version(), uint64_t{kThreads * kPushesPerThread});
  std::vector<float> final_params = master.Params();
  for (size_t j = 0; j < kSize; j += 997) {
    ASSERT_EQ(final_params[j], -static_cast<float>(kThreads * kPushesPerThread));
  }
}

TEST(MasterServiceTest, ChunkedTransferOf50MillionParameters) {
  constexpr size_t kSize = 50'000'000;
  MasterServer master(kSize, PlainSgd(), /*lr=*/0.25);
  proto::SetMembersResponse m;
  ASSERT_TRUE(master.Client().SetMembers({1}, &m).ok());
  MasterClient client = master.Client(proto::FLOAT32, /*chunk=*/1 << 20);
  std::vector<float> g(kSize);
  for (size_t i = 0; i < kSize; ++i) g[i] = static_cast<float>(i % 1024);
  proto::PushResponse p;
  ASSERT_TRUE(client.Push(1, 0, g.data(), kSize, 0, &p).ok());
  std::vector<float> theta(kSize);
  MasterClient::PullResult r;
  ASSERT_TRUE(client.Pull(1, -1, theta.data(), kSize, &r).ok());
  EXPECT_EQ(r.version, 1u);
  for (size_t i = 0; i < kSize; i += 4999) ASSERT_EQ(theta[i], -0.25f * g[i]) << i;
  EXPECT_EQ(theta[kSize - 1], -0.25f * g[kSize - 1]);

  // bf16 on the wire halves the traffic; values come back rounded.
  MasterClient half = master.Client(proto::BFLOAT16, 1 << 20);
  ASSERT_TRUE(half.Pull(1, -1, theta.data(), kSize, &r).ok());
  for (size_t i = 0; i < kSize; i += 4999) {
    ASSERT_EQ(theta[i], Bf16ToFloat(FloatToBf16(-0.25f * g[i]))) << i;
  }
}

TEST(MasterServiceTest, SyncWithBackupAndAMemberLeavingMidStep) {
  RuleConfig rule;
  rule.kind = RuleKind::kSync;
  rule.backup_workers = 1;
  MasterServer master(1000, rule, /*lr=*/1.0);
  MasterClient client = master.Client();
  proto::SetMembersResponse m;
  ASSERT_TRUE(client.SetMembers({1, 2, 3}, &m).ok());  // a step needs 2 gradients

  std::vector<float> g1(1000, 2.0f), g3(1000, 4.0f);
  proto::PushResponse p;
  ASSERT_TRUE(client.Push(1, 0, g1.data(), 1000, 0, &p).ok());
  EXPECT_EQ(p.outcome(), proto::PushResponse::ACCUMULATED);
  EXPECT_EQ(client.Push(1, 0, g1.data(), 1000, 0, &p).code(), Status::Code::kAlreadyExists);

  // Worker 2 is preempted: with 2 live workers and 1 backup, one gradient
  // is enough, and the pending step completes without waiting.
  ASSERT_TRUE(client.SetMembers({1, 3}, &m).ok());
  ASSERT_EQ(m.left_size(), 1);
  EXPECT_EQ(m.left(0), 2u);
  EXPECT_EQ(m.version(), 1u);
  EXPECT_EQ(master.Params()[0], -2.0f);

  // Worker 3's gradient for step 0 arrives late: discarded, not an error.
  ASSERT_TRUE(client.Push(3, 0, g3.data(), 1000, 0, &p).ok());
  EXPECT_EQ(p.outcome(), proto::PushResponse::DISCARDED_LATE);
  EXPECT_EQ(master.Version(), 1u);

  EXPECT_EQ(master.Metric("gaptrain_master_pushes_total", {{"outcome", "accumulated"}}), 1);
  EXPECT_EQ(master.Metric("gaptrain_master_pushes_total", {{"outcome", "discarded_late"}}), 1);
  EXPECT_EQ(master.Metric("gaptrain_master_pushes_total", {{"outcome", "applied"}}), 0);
  EXPECT_EQ(master.Rejected("duplicate"), 1);
  // A late gradient has no staleness to show: only worker 1's series.
  EXPECT_EQ(master.Metric("gaptrain_master_worker_staleness", {{"worker", "3"}}), -1);
  EXPECT_EQ(master.Metric("gaptrain_master_worker_staleness", {{"worker", "1"}}), 0);
}

TEST(MasterServiceTest, BadPushesAreRejectedAndNeverApplied) {
  MasterServer master(1000, PlainSgd());
  MasterClient client = master.Client(proto::FLOAT32, 300);
  proto::SetMembersResponse m;
  ASSERT_TRUE(client.SetMembers({1}, &m).ok());
  const std::vector<float> before = master.Params();
  std::vector<float> g(1000, 1.0f);
  proto::PushResponse p;

  EXPECT_EQ(client.Push(1, 0, g.data(), 999, 0, &p).code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(client.Push(9, 0, g.data(), 1000, 0, &p).code(), Status::Code::kNotFound);
  EXPECT_EQ(client.Push(1, 5, g.data(), 1000, 0, &p).code(), Status::Code::kOutOfRange);
  g[555] = std::nanf("");
  Status nan = client.Push(1, 0, g.data(), 1000, 0, &p);
  EXPECT_EQ(nan.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(nan.message().find("fc.weight"), std::string::npos) << nan.message();
  g[555] = 1.0f;

  // Hand-made malformed streams.
  auto push_chunks = [&](const std::vector<proto::GradientChunk>& chunks, bool cancel_early) {
    auto stub = proto::Master::NewStub(master.Channel());
    grpc::ClientContext context;
    context.AddMetadata("authorization", std::string("Bearer ") + kToken);
    proto::PushResponse response;
    auto writer = stub->Push(&context, &response);
    for (const auto& c : chunks) writer->Write(c);
    if (cancel_early) {
      context.TryCancel();
    } else {
      writer->WritesDone();
    }
    return writer->Finish();
  };
  proto::GradientChunk c;
  c.set_worker_id(1);
  c.set_total_values(1000);
  c.set_values(std::string(400 * 4, '\0'));
  proto::GradientChunk gap = c;
  gap.set_offset(500);  // skips values 400..499
  EXPECT_EQ(push_chunks({c, gap}, false).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  proto::GradientChunk other_worker = c;
  other_worker.set_offset(400);
  other_worker.set_worker_id(2);
  EXPECT_EQ(push_chunks({c, other_worker}, false).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  proto::GradientChunk odd = c;
  odd.set_values(std::string(10, '\0'));  // 2.5 floats
  EXPECT_EQ(push_chunks({odd}, false).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  proto::GradientChunk too_long = c;
  too_long.set_values(std::string(1200 * 4, '\0'));
  EXPECT_EQ(push_chunks({too_long}, false).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  // The stream ends after 400 of 1000 values: never applied.
  EXPECT_EQ(push_chunks({c}, false).error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_FALSE(push_chunks({c}, true).ok());
  // Bigger than the server's message limit.
  proto::GradientChunk huge = c;
  huge.set_values(std::string(MasterService::kMaxMessageBytes + (1 << 20), '\0'));
  EXPECT_EQ(push_chunks({huge}, false).error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);

  EXPECT_EQ(master.Version(), 0u);
  EXPECT_EQ(master.Params(), before);

  // Each refusal is counted under its reason. The two cut-off streams (the
  // cancelled call and the oversized message) may be counted after the
  // client has its status, so "incomplete" has the early end and maybe more.
  EXPECT_EQ(master.Rejected("wrong_size"), 1);
  EXPECT_EQ(master.Rejected("unknown_worker"), 1);
  EXPECT_EQ(master.Rejected("future_version"), 1);
  EXPECT_EQ(master.Rejected("non_finite"), 1);
  EXPECT_EQ(master.Rejected("malformed"), 4);
  EXPECT_GE(master.Rejected("incomplete"), 1);
  EXPECT_EQ(master.Metric("gaptrain_master_pushes_total", {{"outcome", "applied"}}), 0);

  ASSERT_TRUE(client.Push(1, 0, g.data(), 1000, 0, &p).ok());  // still serving
  EXPECT_EQ(master.Version(), 1u);
  EXPECT_EQ(master.Metric("gaptrain_master_pushes_total", {{"outcome", "applied"}}), 1);
}

TEST(MasterServiceTest, BadPullsAreRejectedAndCounted) {
  MasterServer master(1000, PlainSgd());
  MasterClient client = master.Client();
  proto::SetMembersResponse m;
  ASSERT_TRUE(client.SetMembers({1}, &m).ok());
  std::vector<float> theta(1000);
  MasterClient::PullResult r;
  EXPECT_EQ(client.Pull(9, -1, theta.data(), 1000, &r).code(), Status::Code::kNotFound);

  auto stub = proto::Master::NewStub(master.Channel());
  grpc::ClientContext context;
  context.AddMetadata("authorization", std::string("Bearer ") + kToken);
  proto::PullRequest request;
  request.set_worker_id(1);
  request.set_wire_type(static_cast<proto::WireType>(77));
  auto reader = stub->Pull(&context, request);
  proto::ParameterChunk chunk;
  while (reader->Read(&chunk)) {
  }
  grpc::Status s = reader->Finish();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("wire_type"), std::string::npos) << s.error_message();

  EXPECT_EQ(master.Metric("gaptrain_master_pulls_rejected_total", {{"reason", "unknown_worker"}}),
            1);
  EXPECT_EQ(master.Metric("gaptrain_master_pulls_rejected_total", {{"reason", "malformed"}}), 1);
  EXPECT_EQ(master.Metric("gaptrain_master_pulls_total", {{"result", "sent"}}), 0);
}

// What /metrics shows after a few pushes and pulls, and when a worker leaves.
TEST(MasterServiceTest, MetricsFollowTrafficAndMembership) {
  MasterServer master(1000, PlainSgd(), /*lr=*/0.5);
  MasterClient client = master.Client(proto::FLOAT32, 300);
  proto::SetMembersResponse m;
  ASSERT_TRUE(client.SetMembers({1, 2, 3}, &m).ok());
  std::vector<float> g(1000, 1.0f), theta(1000);
  MasterClient::PullResult r;
  proto::PushResponse p;
  ASSERT_TRUE(client.Pull(1, -1, theta.data(), 1000, &r).ok());  // sent
  ASSERT_TRUE(client.Pull(1, 0, theta.data(), 1000, &r).ok());   // not modified
  ASSERT_TRUE(client.Push(1, 0, g.data(), 1000, 0, &p).ok());    // staleness 0
  ASSERT_TRUE(client.Push(2, 0, g.data(), 1000, 0, &p).ok());    // staleness 1
  ASSERT_TRUE(client.Push(2, 0, g.data(), 1000, 0, &p).ok());    // staleness 2

  EXPECT_EQ(master.Metric("gaptrain_master_pushes_total", {{"outcome", "applied"}}), 3);
  EXPECT_EQ(master.Metric("gaptrain_master_model_version"), 3);
  EXPECT_EQ(master.Metric("gaptrain_master_learning_rate"), 0.5);
  EXPECT_EQ(master.Metric("gaptrain_master_live_workers"), 3);
  EXPECT_EQ(master.Metric("gaptrain_master_received_bytes_total"), 3 * 1000 * 4);
  EXPECT_EQ(master.Metric("gaptrain_master_sent_bytes_total"), 1000 * 4);
  EXPECT_EQ(master.Metric("gaptrain_master_pulls_total", {{"result", "sent"}}), 1);
  EXPECT_EQ(master.Metric("gaptrain_master_pulls_total", {{"result", "not_modified"}}), 1);
  EXPECT_EQ(master.Metric("gaptrain_master_push_duration_seconds"), 3);
  EXPECT_EQ(master.Metric("gaptrain_master_pull_duration_seconds"), 2);
  EXPECT_EQ(master.Metric("gaptrain_master_staleness"), 3);
  EXPECT_EQ(master.Metric("gaptrain_master_penalty_factor"), 3);
  EXPECT_EQ(master.Metric("gaptrain_master_worker_staleness", {{"worker", "1"}}), 0);
  EXPECT_EQ(master.Metric("gaptrain_master_worker_staleness", {{"worker", "2"}}), 2);
  EXPECT_EQ(master.Metric("gaptrain_master_worker_staleness", {{"worker", "3"}}), -1);

  ASSERT_TRUE(client.SetMembers({1, 3}, &m).ok());
  EXPECT_EQ(master.Metric("gaptrain_master_worker_staleness", {{"worker", "2"}}), -1);
  EXPECT_EQ(master.Metric("gaptrain_master_worker_staleness", {{"worker", "1"}}), 0);
  EXPECT_EQ(master.Metric("gaptrain_master_live_workers"), 2);
  // A push from the departed worker is refused and brings no series back.
  EXPECT_EQ(client.Push(2, 3, g.data(), 1000, 0, &p).code(), Status::Code::kNotFound);
  EXPECT_EQ(master.Metric("gaptrain_master_worker_staleness", {{"worker", "2"}}), -1);
}

TEST(MasterServiceTest, GapAwareWithEchoedCopy) {
  RuleConfig rule;
  rule.kind = RuleKind::kGapAware;
  rule.momentum = 0.9f;
  rule.gap_source = GapSource::kEcho;
  rule.gap_precision = GapPrecision::kBfloat16;
  MasterServer master(1000, rule, 0.1);
  MasterClient client = master.Client();
  proto::SetMembersResponse m;
  ASSERT_TRUE(client.SetMembers({1, 2}, &m).ok());
  std::vector<float> theta(1000), g(1000, 0.5f);
  std::vector<bf16_t> echo(1000);
  MasterClient::PullResult r;
  proto::PushResponse p;
  ASSERT_TRUE(client.Pull(1, -1, theta.data(), 1000, &r).ok());
  EXPECT_EQ(client.Push(1, r.version, g.data(), 1000, 0, &p).code(),
            Status::Code::kInvalidArgument);  // echo missing
  for (int step = 0; step < 5; ++step) {
    ASSERT_TRUE(client.Pull(1, -1, theta.data(), 1000, &r).ok());
    FloatsToBf16(theta.data(), 1000, echo.data());
    ASSERT_TRUE(client.Push(2, r.version, g.data(), 1000, 0, &p, nullptr).code() ==
                    Status::Code::kInvalidArgument);
    ASSERT_TRUE(client.Push(1, r.version, g.data(), 1000, 0, &p, echo.data(), proto::BFLOAT16)
                    .ok());
  }
  EXPECT_EQ(master.Version(), 5u);

  // The echo is the copy the Gap is measured from: the parameters pulled
  // (rounded to bf16) give G near 1; a copy far from them a large G and a
  // strong penalty.
  ASSERT_TRUE(client.Pull(1, -1, theta.data(), 1000, &r).ok());
  FloatsToBf16(theta.data(), 1000, echo.data());
  ASSERT_TRUE(
      client.Push(1, r.version, g.data(), 1000, 0, &p, echo.data(), proto::BFLOAT16).ok());
  EXPECT_LT(p.gap_mean(), 1.1);
  EXPECT_GT(p.penalty_mean(), 0.9);
  ASSERT_TRUE(client.Pull(1, -1, theta.data(), 1000, &r).ok());
  for (float& x : theta) x += 10.0f;
  FloatsToBf16(theta.data(), 1000, echo.data());
  ASSERT_TRUE(
      client.Push(1, r.version, g.data(), 1000, 0, &p, echo.data(), proto::BFLOAT16).ok());
  EXPECT_GT(p.gap_mean(), 2.0);
  EXPECT_LT(p.penalty_mean(), 0.5);
  const double last_gap = p.gap_mean();

  // SetMembers reports the run's totals for the coordinator: 7 applied
  // pushes (the refused ones are not), their Gaps and staleness summed.
  ASSERT_TRUE(client.SetMembers({1, 2}, &m).ok());
  const proto::MasterTotals& t = m.totals();
  EXPECT_EQ(t.parameters(), 1000u);
  EXPECT_EQ(t.updates(), 7u);
  EXPECT_EQ(t.gap_count(), 7u);
  EXPECT_GT(t.gap_sum(), last_gap + 6 * 0.9);
  EXPECT_EQ(t.staleness_count(), 7u);
  EXPECT_EQ(t.staleness_sum(), 0.0) << "worker 1 always pushed on the newest version";
}

// The evaluator's observer pull: θ itself, while a member computes on
// DANA's look-ahead θ − ηγS; no membership needed, nothing recorded.
TEST(MasterServiceTest, ObserverPullReturnsThetaNotTheLookAhead) {
  RuleConfig rule;
  rule.kind = RuleKind::kDanaZero;
  rule.momentum = 0.9f;
  MasterServer master(1000, rule, /*lr=*/0.1);
  MasterClient client = master.Client();
  proto::SetMembersResponse m;
  ASSERT_TRUE(client.SetMembers({1}, &m).ok());
  std::vector<float> member(1000), observed(1000), g(1000);
  for (size_t j = 0; j < g.size(); ++j) g[j] = 0.5f + 0.001f * static_cast<float>(j % 17);
  MasterClient::PullResult r;
  proto::PushResponse p;
  ASSERT_TRUE(client.Pull(1, -1, member.data(), 1000, &r).ok());
  ASSERT_TRUE(client.Push(1, r.version, g.data(), 1000, 0, &p).ok());
  ASSERT_EQ(master.Version(), 1u);

  // Worker 99 never joined: a member pull is refused, an observer pull is not.
  EXPECT_EQ(client.Pull(99, -1, member.data(), 1000, &r).code(), Status::Code::kNotFound);
  ASSERT_TRUE(client.PullModel(-1, observed.data(), 1000, &r).ok());
  EXPECT_TRUE(r.modified);
  EXPECT_EQ(r.version, 1u);
  EXPECT_EQ(observed, master.Params());

  // One push from v = 0: S = v1 = g, so the member's point is θ − ηγg.
  ASSERT_TRUE(client.Pull(1, -1, member.data(), 1000, &r).ok());
  for (size_t j = 0; j < 1000; ++j) {
    EXPECT_NEAR(member[j], observed[j] - 0.1f * 0.9f * g[j], 1e-6) << j;
  }
  EXPECT_NE(member, observed);

  // Not modified when the observer holds the version; sent again once it moves.
  std::vector<float> untouched(1000, 7.0f);
  ASSERT_TRUE(client.PullModel(1, untouched.data(), 1000, &r).ok());
  EXPECT_FALSE(r.modified);
  EXPECT_EQ(untouched[0], 7.0f);
  ASSERT_TRUE(client.Push(1, 1, g.data(), 1000, 0, &p).ok());
  ASSERT_TRUE(client.PullModel(1, observed.data(), 1000, &r).ok());
  EXPECT_TRUE(r.modified);
  EXPECT_EQ(r.version, 2u);
  EXPECT_EQ(observed, master.Params());
  EXPECT_EQ(master.Version(), 2u);  // observing changed nothing
}

// Pulls of one reply generation share one reply buffer; every change that
// can alter a reply (a push, a member leaving DANA's sum) gives later pulls
// a fresh one, while pulls already streaming keep theirs.
TEST(MasterServiceTest, SharedRepliesFollowEveryChange) {
  RuleConfig rule;
  rule.kind = RuleKind::kDanaZero;
  rule.momentum = 0.9f;
  MasterServer master(10000, rule, /*lr=*/0.1);
  MasterClient a = master.Client(proto::FLOAT32, 3000);
  MasterClient b = master.Client(proto::BFLOAT16, 4096);
  proto::SetMembersResponse m;
  ASSERT_TRUE(a.SetMembers({1, 2, 3}, &m).ok());
  std::vector<float> ga(10000, 0.5f), gb(10000);
  for (size_t j = 0; j < gb.size(); ++j) gb[j] = 0.001f * static_cast<float>(j % 101);

  // The look-ahead θ − ηγS as the engine writes it now, bypassing the
  // shared replies (DANA-Zero records nothing on a pull).
  auto expect_point = [&](const std::vector<float>& got) {
    std::vector<float> want(got.size());
    uint64_t version = 0;
    master.service()->WithEngine(
        [&](UpdateEngine* e) { ASSERT_TRUE(e->Pull(2, want.data(), want.size(), &version).ok()); });
    EXPECT_EQ(got, want);
  };
  std::vector<float> p1(10000), p2(10000), p3(10000);
  MasterClient::PullResult r1, r2, r3;
  ASSERT_TRUE(a.Pull(1, -1, p1.data(), 10000, &r1).ok());
  ASSERT_TRUE(a.Pull(2, -1, p2.data(), 10000, &r2).ok());  // shares 1's reply
  ASSERT_TRUE(b.Pull(3, -1, p3.data(), 10000, &r3).ok());  // the same, in bf16
  EXPECT_EQ(p1, p2);
  expect_point(p1);
  for (size_t j = 0; j < p3.size(); ++j) ASSERT_EQ(p3[j], Bf16ToFloat(FloatToBf16(p1[j]))) << j;

  proto::PushResponse p;
  ASSERT_TRUE(a.Push(1, r1.version, ga.data(), 10000, 0, &p).ok());
  ASSERT_TRUE(b.Push(2, r2.version, gb.data(), 10000, 0, &p).ok());
  const std::vector<float> old_point = p1;
  ASSERT_TRUE(a.Pull(1, -1, p1.data(), 10000, &r1).ok());
  EXPECT_EQ(r1.version, 2u);
  EXPECT_NE(p1, old_point);
  expect_point(p1);

  // Worker 1 leaves: its momentum leaves S and the point moves, although
  // the version does not.
  ASSERT_TRUE(a.SetMembers({2, 3}, &m).ok());
  ASSERT_TRUE(a.Pull(2, -1, p2.data(), 10000, &r2).ok());
  EXPECT_EQ(r2.version, 2u);
  expect_point(p2);
  EXPECT_NE(p1, p2);

  // Observers get θ itself, also shared, also fresh after a push.
  std::vector<float> observed(10000);
  ASSERT_TRUE(b.PullModel(-1, observed.data(), 10000, &r3).ok());
  ASSERT_TRUE(a.PullModel(-1, observed.data(), 10000, &r3).ok());
  EXPECT_EQ(observed, master.Params());
  ASSERT_TRUE(a.Push(2, 2, ga.data(), 10000, 0, &p).ok());
  ASSERT_TRUE(a.PullModel(-1, observed.data(), 10000, &r3).ok());
  EXPECT_EQ(r3.version, 3u);
  EXPECT_EQ(observed, master.Params());
}

// A NaN or Inf in any chunk, or in the echoed copy, is found while the
// chunk is decoded; the engine then rejects the push with the value's
// place, counts it, and leaves the parameters alone.
TEST(MasterServiceTest, NonFiniteValuesInAnyChunkAreRejected) {
  RuleConfig rule;
  rule.kind = RuleKind::kGapAware;
  rule.gap_source = GapSource::kEcho;
  MasterServer master(1000, rule);
  MasterClient client = master.Client(proto::FLOAT32, 300);  // chunks of 300, 300, 300, 100
  proto::SetMembersResponse m;
  ASSERT_TRUE(client.SetMembers({1}, &m).ok());
  std::vector<float> theta(1000);
  MasterClient::PullResult r;
  ASSERT_TRUE(client.Pull(1, -1, theta.data(), 1000, &r).ok());
  const std::vector<float> before = master.Params();
  proto::PushResponse p;
  for (size_t bad : {size_t{0}, size_t{299}, size_t{300}, size_t{999}}) {
    for (bool in_echo : {false, true}) {
      std::vector<float> g(1000, 1.0f), echo = theta;
      (in_echo ? echo : g)[bad] = bad % 2 == 0 ? std::nanf("") : INFINITY;
      Status s = client.Push(1, r.version, g.data(), 1000, 0, &p, echo.data(), proto::FLOAT32);
      EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << bad << " " << in_echo;
      EXPECT_NE(s.message().find("value " + std::to_string(bad)), std::string::npos)
          << s.message();
    }
  }
  EXPECT_EQ(master.Params(), before);
  EXPECT_EQ(master.Version(), 0u);
  uint64_t rejected = 0;
  master.service()->WithEngine(
      [&](UpdateEngine* e) { rejected = e->rejected(RejectReason::kNonFinite); });
  EXPECT_EQ(rejected, 8u);
  std::vector<float> g(1000, 1.0f);
  ASSERT_TRUE(client.Push(1, r.version, g.data(), 1000, 0, &p, theta.data(), proto::FLOAT32).ok());
}

// A bf16 push is applied as the rounded values it carries, read straight
// from the received chunks; a NaN in a later chunk still rejects it whole.
TEST(MasterServiceTest, Bf16PushAppliesTheRoundedGradient) {
  constexpr size_t kSize = 10007;
  MasterServer master(kSize, PlainSgd(), /*lr=*/0.25);
  proto::SetMembersResponse m;
  ASSERT_TRUE(master.Client().SetMembers({1}, &m).ok());
  MasterClient client = master.Client(proto::BFLOAT16, /*chunk=*/3001);
  std::vector<float> g(kSize);
  for (size_t i = 0; i < kSize; ++i) g[i] = 0.001f * static_cast<float>(i) + 1.0f / 3.0f;
  proto::PushResponse p;
  std::vector<float> bad = g;
  bad[9000] = std::nanf("");
  Status rejected = client.Push(1, 0, bad.data(), kSize, 0, &p);
  EXPECT_EQ(rejected.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(rejected.message().find("value 9000"), std::string::npos) << rejected.message();
  EXPECT_EQ(master.Version(), 0u);

  ASSERT_TRUE(client.Push(1, 0, g.data(), kSize, 0, &p).ok());
  const std::vector<float> theta = master.Params();
  for (size_t i = 0; i < kSize; ++i) {
    ASSERT_EQ(theta[i], -0.25f * Bf16ToFloat(FloatToBf16(g[i]))) << i;
  }
}

TEST(MasterServiceTest, EveryAnswerNamesTheRunAndTheLedgerCountsEveryPush) {
  const std::string ledger_path = TestDir("ledger") + "/" + PushLedger::kFileName;
  std::remove(ledger_path.c_str());
  std::unique_ptr<PushLedger> ledger;
  ASSERT_TRUE(PushLedger::Open(ledger_path, &ledger).ok());
  ledger->BeginRun(42, 0);
  proto::MasterIncarnation run;
  run.set_id(42);
  run.set_restored_from_id(41);
  run.set_restored_from_version(0);
  MasterServer master(100, PlainSgd(), 0.1, run, ledger.get());
  master.service()->MarkServing();
  MasterClient client = master.Client();

  proto::DescribeResponse d;
  ASSERT_TRUE(client.Describe(&d).ok());
  EXPECT_EQ(d.incarnation().id(), 42u);
  EXPECT_EQ(d.incarnation().restored_from_id(), 41u);
  proto::SetMembersResponse m;
  ASSERT_TRUE(client.SetMembers({1}, &m).ok());
  EXPECT_EQ(m.incarnation().id(), 42u);
  EXPECT_EQ(m.durable_version(), 0u);
  std::vector<float> theta(100);
  MasterClient::PullResult r;
  ASSERT_TRUE(client.Pull(1, -1, theta.data(), theta.size(), &r).ok());
  EXPECT_EQ(r.incarnation, 42u);

  std::vector<float> g(100, 0.5f);
  proto::PushResponse p;
  ASSERT_TRUE(client.Push(1, 0, g.data(), g.size(), 0, &p).ok());
  EXPECT_EQ(p.incarnation(), 42u);
  ASSERT_TRUE(client.Push(1, 1, g.data(), g.size(), 0, &p).ok());
  g[3] = std::nanf("");
  EXPECT_FALSE(client.Push(1, 2, g.data(), g.size(), 0, &p).ok());
  EXPECT_EQ(client.Push(9, 2, g.data(), g.size(), 0, &p).code(), Status::Code::kNotFound);
  EXPECT_GE(master.Metric("gaptrain_master_first_update_seconds"), 0.0);

  // A checkpoint at 2 is on disk: SetMembers says so.
  master.service()->SetDurableVersion(2);
  master.service()->SetDurableVersion(1);  // never goes back
  ASSERT_TRUE(client.SetMembers({1}, &m).ok());
  EXPECT_EQ(m.durable_version(), 2u);

  const PushLedger::Totals t = ledger->totals();
  EXPECT_EQ(t.pushes, 4u);
  EXPECT_EQ(t.rejected, 2u);
  EXPECT_EQ(t.updates, 2u);
  EXPECT_EQ(t.version, master.Version());
}

// A BatchNorm's buffers: Describe names them, members' sends are folded
// in (the first taken whole, then averaged over the live trainers), anyone
// reads them with the version, and a bad send changes nothing.
TEST(MasterServiceTest, BuffersAreFoldedFromMembersAndReadByAnyone) {
  BufferLayout layout;
  ASSERT_TRUE(layout.Add("bn.running_mean", {2}, BufferDType::kFloat32).ok());
  ASSERT_TRUE(layout.Add("bn.num_batches_tracked", {}, BufferDType::kInt64).ok());
  auto pack = [](float a, float b, int64_t count) {
    std::string bytes(16, '\0');
    std::memcpy(&bytes[0], &a, 4);
    std::memcpy(&bytes[4], &b, 4);
    std::memcpy(&bytes[8], &count, 8);
    return bytes;
  };
  MasterServer master(10, PlainSgd(), 1.0, proto::MasterIncarnation(), nullptr,
                      std::make_shared<ModelBuffers>(layout, pack(0, 1, 0)));
  MasterClient client = master.Client();
  proto::DescribeResponse d;
  ASSERT_TRUE(client.Describe(&d).ok());
  ASSERT_EQ(d.layout().buffers_size(), 2);
  EXPECT_EQ(d.layout().buffers(1).name(), "bn.num_batches_tracked");
  EXPECT_EQ(d.layout().buffers(1).dtype(), proto::TENSOR_DTYPE_INT64);

  proto::PullBuffersResponse read;
  ASSERT_TRUE(client.PullBuffers(&read).ok());
  EXPECT_EQ(read.values(), pack(0, 1, 0));
  EXPECT_EQ(read.merges(), 0u);

  // Only members send.
  EXPECT_EQ(client.PushBuffers(1, pack(2, 2, 1)).code(), Status::Code::kNotFound);
  proto::SetMembersResponse m;
  ASSERT_TRUE(client.SetMembers({1, 2}, &m).ok());
  proto::PushBuffersResponse sent;
  ASSERT_TRUE(client.PushBuffers(1, pack(2, 4, 5), &sent).ok());
  EXPECT_EQ(sent.merges(), 1u);
  ASSERT_TRUE(client.PushBuffers(2, pack(4, 0, 3)).ok());
  ASSERT_TRUE(client.PullBuffers(&read).ok());
  EXPECT_EQ(read.values(), pack(3, 2, 5));
  EXPECT_EQ(read.merges(), 2u);
  EXPECT_EQ(master.Metric("gaptrain_master_buffer_merges_total"), 2);

  const Status wrong = client.PushBuffers(1, pack(1, 1, 1) + "x");
  EXPECT_EQ(wrong.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(wrong.message().find("17 bytes, the model's buffers hold 16"), std::string::npos)
      << wrong.ToString();
  ASSERT_TRUE(client.PullBuffers(&read).ok());
  EXPECT_EQ(read.values(), pack(3, 2, 5));
}

// Once θ is at maxUpdates and a trainer computed past it (its push was
// discarded) the buffers freeze: the final evaluation and the final
// checkpoint hold one model, whatever a trainer still sends before it
// hears the job ended. A send right after the last update still counts.
TEST(MasterServiceTest, BuffersFreezeWithThetaAtMaxUpdates) {
  BufferLayout layout;
  ASSERT_TRUE(layout.Add("bn.running_mean", {2}, BufferDType::kFloat32).ok());
  auto pack = [](float a, float b) {
    std::string bytes(8, '\0');
    std::memcpy(&bytes[0], &a, 4);
    std::memcpy(&bytes[4], &b, 4);
    return bytes;
  };
  MasterServer master(10, PlainSgd(), 1.0, proto::MasterIncarnation(), nullptr,
                      std::make_shared<ModelBuffers>(layout, pack(0, 0)), /*max_updates=*/1);
  MasterClient client = master.Client();
  proto::SetMembersResponse m;
  ASSERT_TRUE(client.SetMembers({1}, &m).ok());
  ASSERT_TRUE(client.PushBuffers(1, pack(1, 2)).ok());
  std::vector<float> theta(10), g(10, 0.1f);
  MasterClient::PullResult r;
  ASSERT_TRUE(client.Pull(1, -1, theta.data(), 10, &r).ok());
  proto::PushResponse p;
  ASSERT_TRUE(client.Push(1, r.version, g.data(), 10, 0, &p).ok());
  ASSERT_EQ(master.Version(), 1u);
  ASSERT_TRUE(client.PushBuffers(1, pack(1, 2)).ok()) << "the last update's statistics";
  ASSERT_TRUE(client.Pull(1, -1, theta.data(), 10, &r).ok());
  ASSERT_TRUE(client.Push(1, r.version, g.data(), 10, 0, &p).ok());
  ASSERT_EQ(p.outcome(), proto::PushResponse::DISCARDED_FINISHED);
  const Status late = client.PushBuffers(1, pack(9, 9));
  EXPECT_EQ(late.code(), Status::Code::kFailedPrecondition);
  EXPECT_NE(late.message().find("maxUpdates"), std::string::npos) << late.ToString();
  proto::PullBuffersResponse read;
  ASSERT_TRUE(client.PullBuffers(&read).ok());
  EXPECT_EQ(read.values(), pack(1, 2));
}

TEST(MasterServiceTest, CheckpointWithoutDirectoryIsAClearError) {
  MasterServer master(100, PlainSgd());
  proto::CheckpointResponse c;
  Status s = master.Client().Checkpoint(&c);
  EXPECT_EQ(s.code(), Status::Code::kFailedPrecondition);
  master.service()->set_checkpoint_fn([](std::string* path, uint64_t* version) {
    *path = "/ckpt/x";
    *version = 3;
    return Status::OK();
  });
  ASSERT_TRUE(master.Client().Checkpoint(&c).ok());
  EXPECT_EQ(c.path(), "/ckpt/x");
}

}  // namespace
}  // namespace gaptrain
