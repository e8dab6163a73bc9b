// The Trainer, its MasterSession and the EvaluationLoop in-process against scripted fake
// servers (fake_servers.h): what they push for each rule, and bad server
// responses (a wrong model size, malformed, truncated or empty streams,
// outages, refusals, a task outside the dataset, an unreachable master):
// the worker retries or returns a clear Status, and never crashes.

#include "services/worker/trainer.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <sstream>
#include <random>
#include <string>
#include <vector>

#include "services/coordinator/coordinator_client.h"
#include "services/engine/shard_plan.h"
#include "services/learn/batch_loader.h"
#include "services/learn/compute_threads.h"
#include "services/learn/device.h"
#include "services/learn/epoch_order.h"
#include "services/numeric/bfloat16.h"
#include "services/testing/fake_servers.h"
#include "services/worker/evaluation_loop.h"
#include "services/worker/master_session.h"
#include "services/worker/worker_channel.h"

namespace gaptrain {
namespace {

constexpr uint32_t kSamples = 64;
constexpr uint32_t kBatch = 8;
constexpr int64_t kSide = 8;

Dataset SmallDataset(uint32_t seed) {
  Dataset d;
  d.channels = 1;
  d.height = kSide;
  d.width = kSide;
  std::mt19937 gen(seed);
  d.images.resize(kSamples * d.image_size());
  for (uint8_t& v : d.images) v = static_cast<uint8_t>(gen() & 0xff);
  for (uint32_t i = 0; i < kSamples; ++i) d.labels.push_back(static_cast<uint8_t>(gen() % 10));
  ComputeChannelStats(d.images.data(), kSamples, 1, kSide * kSide, &d.mean, &d.stddev);
  return d;
}

RetryPolicy FastRetry(int max_attempts) {
  RetryPolicy p;
  p.backoff.initial = std::chrono::milliseconds(1);
  p.backoff.max = std::chrono::milliseconds(4);
  p.max_attempts = max_attempts;
  return p;
}

// A trainer (or evaluator) wired to a FakeMaster and a FakeCoordinator.
class Harness {
 public:
  Harness() : data_(SmallDataset(3)) {
    SetComputeThreads(1);
    job_.name = "fake-job";
    job_.model.builtin = "mlp";
    job_.training.optimizer.momentum = 0.9;
    job_.training.optimizer.weight_decay = 1e-3;
    job_.training.eval_every_updates = 5;
    std::unique_ptr<Model> model;
    EXPECT_TRUE(Model::CreateBuiltin("mlp", ModelInput{1, kSide, kSide, 10}, 1, &model).ok());
    layout_ = model->layout();
    master_ = std::make_unique<FakeMaster>(layout_);
    coordinator_ = std::make_unique<FakeCoordinator>(master_->address(), kSamples, kBatch);
  }

  // What both loops share: fast retries, the device SetDevice chose.
  LoopOptions Loop(int max_attempts) const {
    LoopOptions o;
    o.retry = FastRetry(max_attempts);
    o.device = device_;
    o.mirror_on_cpu_for_testing = mirror_;
    return o;
  }

  // Runs a trainer to the end; max_attempts bounds the retries.
  Status RunTrainer(int max_attempts = 4) {
    CoordinatorSession session(&client(), SessionOptions(proto::WORKER_ROLE_TRAINER, max_attempts),
                               &stop_, &metrics_);
    Trainer::Options o(Loop(max_attempts));
    o.grace_seconds = 5;
    trainer_ = std::make_unique<Trainer>(job_, data_, &session, Connector(), &stop_, &metrics_, o);
    return trainer_->Run();
  }

  Status RunEvaluator(EvaluationLoop::Result* result) {
    CoordinatorSession session(&client(), SessionOptions(proto::WORKER_ROLE_EVALUATOR, 4), &stop_,
                               &metrics_);
    EvaluationLoop::Options o(Loop(4));
    o.poll = std::chrono::milliseconds(5);
    o.batch_size = 16;
    EvaluationLoop evaluator(job_, data_, &session, Connector(), &stop_, &metrics_, o);
    Status s = evaluator.Run();
    *result = evaluator.result();
    evaluator_device_ = evaluator.device();
    return s;
  }

  // A MasterSession of a registered worker, connected for a fresh mlp,
  // handed to `use` (a loop of the test's own, as ps-lite's callers write).
  void WithSession(const std::function<void(MasterSession&, Model&)>& use) {
    WithSessionOf({master_->address()}, use);
  }
  // The same with the masters at `addresses` (shards of θ).
  void WithSessionOf(const std::vector<std::string>& addresses,
                     const std::function<void(MasterSession&, Model&)>& use) {
    CoordinatorSession session(&client(), SessionOptions(proto::WORKER_ROLE_TRAINER, 4), &stop_,
                               &metrics_);
    ASSERT_TRUE(session.Register().ok());
    std::unique_ptr<Model> model;
    ASSERT_TRUE(Model::CreateBuiltin("mlp", ModelInput{1, kSide, kSide, 10}, 1, &model).ok());
    MasterSession master(job_, Connector(), &session, &stop_, &metrics_);
    RetryLoop loop(FastRetry(4), 1, &stop_);
    const Status connected = master.Connect(addresses, model.get(), &loop);
    ASSERT_TRUE(connected.ok()) << connected.ToString();
    use(master, *model);
  }
  // Options::device and Options::mirror_on_cpu_for_testing of both loops.
  void SetDevice(const std::string& device, bool mirror_on_cpu) {
    device_ = device;
    mirror_ = mirror_on_cpu;
  }
  const std::string& evaluator_device() const { return evaluator_device_; }

  // Both loops connect as gaptrain-worker does (MasterConnector, from the
  // job) instead of with the plain fp32 test client.
  void UseJobConnector(MasterRole role) {
    job_connector_ = true;
    role_ = role;
  }

  MasterLink::Connector Connector() {
    if (job_connector_) {
      MasterLink::Connector connect;
      Status s =
          MasterConnector(job_, role_, "", 5, grpc::InsecureChannelCredentials(), &connect);
      EXPECT_TRUE(s.ok()) << s.ToString();
      return connect;
    }
    return [](const std::string& address) {
      MasterClient::Options o;
      o.token = "";
      o.deadline_seconds = 5;
      return std::make_unique<MasterClient>(
          grpc::CreateChannel(address, grpc::InsecureChannelCredentials()), o);
    };
  }

  FakeMaster& master() { return *master_; }
  // spec.master.shards: `count` fake masters, each holding its range of
  // the mlp (PlanShards), numbering its runs from 10 + its index; the
  // registration names them instead of master().
  void UseShards(uint32_t count) {
    std::vector<ParameterShard> plan;
    ASSERT_TRUE(PlanShards(layout_, count, &plan).ok());
    std::vector<std::string> addresses;
    for (const ParameterShard& r : plan) {
      shards_.push_back(std::make_unique<FakeMaster>(ShardLayout(layout_, r)));
      shards_.back()->SetDescribedLayout(layout_);
      shards_.back()->SetShard(r.index, r.count, r.begin, r.end);
      shards_.back()->SetPushPull(true);
      shards_.back()->SetRun(10 + r.index);
      addresses.push_back(shards_.back()->address());
    }
    coordinator_->SetMasterAddresses(addresses);
  }
  FakeMaster& shard(size_t index) { return *shards_.at(index); }
  FakeCoordinator& coordinator() { return *coordinator_; }
  Trainer& trainer() { return *trainer_; }
  StopFlag& stop() { return stop_; }
  WorkerMetrics& metrics() { return metrics_; }
  TrainingJob& job() { return job_; }
  const Dataset& data() const { return data_; }
  const ParameterLayout& layout() const { return layout_; }

 private:
  CoordinatorSession::Options SessionOptions(proto::WorkerRole role, int max_attempts) {
    CoordinatorSession::Options o;
    o.host = "test-host";
    o.role = role;
    o.retry = FastRetry(max_attempts);
    o.heartbeat_seconds = 0.02;
    return o;
  }
  CoordinatorClient& client() {
    if (client_ == nullptr) {
      CoordinatorClient::Options o;
      o.deadline_seconds = 5;
      client_ = std::make_unique<CoordinatorClient>(
          grpc::CreateChannel(coordinator_->address(), grpc::InsecureChannelCredentials()), o);
    }
    return *client_;
  }

  Dataset data_;
  TrainingJob job_;
  ParameterLayout layout_;
  std::unique_ptr<FakeMaster> master_;
  std::vector<std::unique_ptr<FakeMaster>> shards_;
  std::unique_ptr<FakeCoordinator> coordinator_;
  std::unique_ptr<CoordinatorClient> client_;
  StopFlag stop_;
  WorkerMetrics metrics_{std::make_shared<prometheus::Registry>()};
  std::unique_ptr<Trainer> trainer_;
  std::string device_ = "cpu";
  bool mirror_ = false;
  bool job_connector_ = false;
  MasterRole role_ = MasterRole::kTrainer;
  std::string evaluator_device_;
};

constexpr int kBatches = kSamples / kBatch;

TEST(TrainerTest, TrainsATaskCompletesItAndLeaves) {
  Harness h;
  Status s = h.RunTrainer();
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(h.master().pushes_applied(), kBatches);
  EXPECT_EQ(h.trainer().batches_pushed(), static_cast<uint64_t>(kBatches));
  EXPECT_EQ(h.trainer().samples_pushed(), kSamples);
  EXPECT_EQ(h.trainer().tasks_completed(), 1u);
  EXPECT_EQ(h.coordinator().completions(), 1);
  EXPECT_EQ(h.coordinator().leave_reason(), proto::LEAVE_REASON_FINISHED);
  EXPECT_EQ(h.metrics().samples_total(), kSamples);
  EXPECT_EQ(h.metrics().reconnects(Peer::kMaster), 0);
  EXPECT_TRUE(h.master().first_echo().empty());  // snapshot mode: no echo
}

TEST(TrainerTest, ReportsWhereATasksPushesLanded) {
  Harness h;
  h.master().SetRun(10);
  ASSERT_TRUE(h.RunTrainer().ok());
  const proto::CompleteTaskRequest c = h.coordinator().last_completion();
  ASSERT_EQ(c.reached_size(), 1);
  EXPECT_EQ(c.reached(0).incarnation(), 10u);
  EXPECT_EQ(c.reached(0).version(), static_cast<uint64_t>(kBatches));
  EXPECT_EQ(c.samples_retrained(), 0u);
}

TEST(TrainerTest, RetrainsTheBatchesWhoseUpdatesAMasterRestartLost) {
  Harness h;
  h.master().SetRun(10);
  // After 6 pushes (versions 1..6) run 20 resumes from run 10's checkpoint
  // at version 3: the 4th, 5th and 6th batches' updates are gone.
  h.master().RestartAfter(6, 20, 3);
  Status s = h.RunTrainer();
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(h.master().pushes_applied(), kBatches + 3);
  EXPECT_EQ(h.trainer().samples_retrained(), 3u * kBatch);
  EXPECT_EQ(h.trainer().samples_pushed(), kSamples + 3 * kBatch);
  const proto::CompleteTaskRequest c = h.coordinator().last_completion();
  EXPECT_EQ(c.samples_retrained(), 3u * kBatch);
  // Only run 20 is named: run 10's surviving pushes are in the checkpoint
  // run 20 resumed from.
  ASSERT_EQ(c.reached_size(), 1);
  EXPECT_EQ(c.reached(0).incarnation(), 20u);
  EXPECT_EQ(c.reached(0).version(), 3u + (kBatches - 3));
}

// Two master shards; shard 1 restarts after 6 pushes from its checkpoint
// at version 3: the batches behind it are trained again on both shards,
// and the completion names each shard's run.
TEST(TrainerTest, RetrainsTheBatchesOneMasterShardsRestartLost) {
  Harness h;
  ASSERT_NO_FATAL_FAILURE(h.UseShards(2));
  h.shard(1).RestartAfter(6, 20, 3);
  Status s = h.RunTrainer();
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(h.master().pushes_received(), 0) << "the registration names the shards";
  EXPECT_EQ(h.shard(0).pushes_applied(), kBatches + 3);
  EXPECT_EQ(h.shard(1).pushes_applied(), kBatches + 3);
  EXPECT_EQ(h.trainer().samples_retrained(), 3u * kBatch);
  const proto::CompleteTaskRequest c = h.coordinator().last_completion();
  ASSERT_EQ(c.reached_size(), 2);
  EXPECT_EQ(c.reached(0).shard(), 0u);
  EXPECT_EQ(c.reached(0).incarnation(), 10u);
  EXPECT_EQ(c.reached(0).version(), static_cast<uint64_t>(kBatches + 3));
  EXPECT_EQ(c.reached(1).shard(), 1u);
  EXPECT_EQ(c.reached(1).incarnation(), 20u);
  EXPECT_EQ(c.reached(1).version(), 3u + (kBatches - 3));
}

TEST(TrainerTest, EchoesTheCopyTheGradientWasComputedOn) {
  for (proto::WireType type : {proto::FLOAT32, proto::BFLOAT16}) {
    Harness h;
    h.master().SetRule("gap-aware", /*needs_echo=*/true, type);
    ASSERT_TRUE(h.RunTrainer().ok());
    const std::vector<float>& theta = h.master().theta();
    std::string expected;
    if (type == proto::FLOAT32) {
      expected.assign(reinterpret_cast<const char*>(theta.data()), theta.size() * sizeof(float));
    } else {
      std::vector<bf16_t> bf(theta.size());
      FloatsToBf16(theta.data(), theta.size(), bf.data());
      expected.assign(reinterpret_cast<const char*>(bf.data()), bf.size() * sizeof(bf16_t));
    }
    EXPECT_TRUE(h.master().first_echo() == expected) << proto::WireType_Name(type);
  }
}

// True when every value is exactly a bfloat16 (its low 16 bits are zero).
bool AllBf16(const std::vector<float>& values) {
  for (float v : values) {
    if (Bf16ToFloat(FloatToBf16(v)) != v) return false;
  }
  return true;
}

// spec.training.wireType reaches the wire through the connector
// gaptrain-worker uses: every pull and push of a bf16 job is bf16 and
// moves half the bytes of the same fp32 job.
TEST(TrainerTest, PullsAndPushesInTheJobsWireType) {
  uint64_t pulled[2], pushed[2];
  const char* names[2] = {"fp32", "bf16"};
  for (int i = 0; i < 2; ++i) {
    SCOPED_TRACE(names[i]);
    const proto::WireType type = i == 0 ? proto::FLOAT32 : proto::BFLOAT16;
    Harness h;
    h.job().training.wire_type = names[i];
    h.UseJobConnector(MasterRole::kTrainer);
    const uint64_t p = h.layout().size(), size = i == 0 ? 4 : 2;
    Status s = h.RunTrainer();
    ASSERT_TRUE(s.ok()) << s.ToString();
    ASSERT_EQ(h.master().pushes_applied(), kBatches);
    EXPECT_EQ(h.master().push_wire_types(), std::vector<proto::WireType>(kBatches, type));
    const std::vector<proto::WireType> pulls = h.master().pull_wire_types();
    ASSERT_GE(pulls.size(), static_cast<size_t>(kBatches));
    EXPECT_EQ(pulls, std::vector<proto::WireType>(pulls.size(), type));
    // Each push carries the whole gradient, each batch's pull a changed θ.
    pushed[i] = h.master().pushed_value_bytes();
    pulled[i] = h.master().pulled_value_bytes();
    EXPECT_EQ(pushed[i], kBatches * p * size);
    EXPECT_GE(pulled[i], kBatches * p * size);
    EXPECT_EQ(pulled[i] % (p * size), 0u);
    // The master decodes bf16 values; an fp32 gradient is not all bf16.
    EXPECT_EQ(AllBf16(h.master().first_gradient()), i == 1);
  }
  EXPECT_EQ(pushed[1] * 2, pushed[0]);
  EXPECT_EQ(pulled[1] * 2, pulled[0]);
}

// Over a bf16 wire the worker's copy is bf16 values: its echo goes as bf16
// even when the master asked for fp32 (exact, half the bytes, and the
// master then knows the copy was rounded in transit).
TEST(TrainerTest, ABf16WireEchoesTheCopyAsBf16) {
  Harness h;
  h.master().SetRule("gap-aware", /*needs_echo=*/true, proto::FLOAT32);
  h.job().training.wire_type = "bf16";
  h.UseJobConnector(MasterRole::kTrainer);
  ASSERT_TRUE(h.RunTrainer().ok());
  const std::string echo = h.master().first_echo();
  const std::vector<float>& theta = h.master().theta();
  ASSERT_EQ(echo.size(), theta.size() * sizeof(bf16_t));
  std::vector<bf16_t> expected(theta.size());
  FloatsToBf16(theta.data(), theta.size(), expected.data());
  EXPECT_EQ(std::memcmp(echo.data(), expected.data(), echo.size()), 0);
}

TEST(TrainerTest, DanaSlimPushesUWithTheWorkersMomentumAndWeightDecay) {
  Harness h;
  h.master().SetRule("dana-slim");
  ASSERT_TRUE(h.RunTrainer().ok());

  // The first batch by hand: g on θ, g' = g + λθ, v = g', u = g' + γv.
  std::unique_ptr<Model> model;
  ASSERT_TRUE(Model::CreateBuiltin("mlp", ModelInput{1, kSide, kSide, 10}, 1, &model).ok());
  const std::vector<float>& theta = h.master().theta();
  std::memcpy(model->parameters(), theta.data(), theta.size() * sizeof(float));
  BatchLoader loader(h.data(), kBatch);
  const std::vector<uint32_t> order = EpochPermutation(1, 0, kSamples);
  std::vector<float> images(loader.images_buffer_size());
  std::vector<int64_t> labels(loader.labels_buffer_size());
  ASSERT_EQ(loader.Fill(order.data(), kBatch, images.data(), labels.data()), kBatch);
  model->ComputeGradient(images.data(), labels.data(), kBatch);
  const std::vector<float> pushed = h.master().first_gradient();
  ASSERT_EQ(pushed.size(), theta.size());
  const float gamma = 0.9f, lambda = 1e-3f;
  double worst = 0;
  for (size_t j = 0; j < theta.size(); ++j) {
    const float g = model->gradients()[j] + lambda * theta[j];
    worst = std::max(worst, std::fabs(static_cast<double>(pushed[j] - (g + gamma * g))));
  }
  EXPECT_LT(worst, 1e-5);
}

// The GPU's mirrored mode (model.h), on the CPU: the pulls that write the
// host parameters reach the device copy (θ differs from the seeded
// weights), and the gradients and echoes pushed are bit for bit the direct
// mode's.
TEST(TrainerTest, AMirroredModelPushesWhatTheDirectOneDoes) {
  Harness direct, mirrored;
  mirrored.SetDevice("cpu", /*mirror_on_cpu=*/true);
  for (Harness* h : {&direct, &mirrored}) {
    h->master().SetRule("gap-aware", /*needs_echo=*/true, proto::FLOAT32);
    Status s = h->RunTrainer();
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(h->master().pushes_applied(), kBatches);
    EXPECT_EQ(h->trainer().device(), "cpu");
    EXPECT_EQ(h->metrics().device(), "cpu");
  }
  const std::vector<float> g = mirrored.master().first_gradient();
  ASSERT_EQ(g.size(), direct.layout().size());
  EXPECT_EQ(g, direct.master().first_gradient());
  EXPECT_TRUE(mirrored.master().first_echo() == direct.master().first_echo());

  // And it is the gradient on θ, not on the seeded weights.
  std::unique_ptr<Model> model;
  ASSERT_TRUE(Model::CreateBuiltin("mlp", ModelInput{1, kSide, kSide, 10}, 1, &model).ok());
  BatchLoader loader(direct.data(), kBatch);
  const std::vector<uint32_t> order = EpochPermutation(1, 0, kSamples);
  std::vector<float> images(loader.images_buffer_size());
  std::vector<int64_t> labels(loader.labels_buffer_size());
  ASSERT_EQ(loader.Fill(order.data(), kBatch, images.data(), labels.data()), kBatch);
  model->ComputeGradient(images.data(), labels.data(), kBatch);
  const std::vector<float> on_seed(model->gradients(), model->gradients() + g.size());
  EXPECT_NE(g, on_seed);
  const std::vector<float>& theta = direct.master().theta();
  std::copy(theta.begin(), theta.end(), model->parameters());
  model->ComputeGradient(images.data(), labels.data(), kBatch);
  EXPECT_EQ(g, std::vector<float>(model->gradients(), model->gradients() + g.size()));
}

// --device cuda where LibTorch has no CUDA: the trainer computes on the
// CPU and says so in its metrics; with a GPU it computes there.
TEST(TrainerTest, CudaComputesOnTheGpuOrFallsBackToTheCpu) {
  Harness h;
  h.SetDevice("cuda", false);
  Status s = h.RunTrainer();
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(h.master().pushes_applied(), kBatches);
  const std::string expected = CudaAvailable() ? "cuda:0" : "cpu";
  EXPECT_EQ(h.trainer().device(), expected);
  EXPECT_EQ(h.metrics().device(), expected);
}

TEST(TrainerTest, AMasterWithAnotherModelSizeIsAClearError) {
  Harness h;
  h.master().SetPull(FakeMaster::PullMode::kWrongTotal);
  Status s = h.RunTrainer();
  EXPECT_EQ(s.code(), Status::Code::kFailedPrecondition) << s.ToString();
  EXPECT_NE(s.message().find("values"), std::string::npos) << s.message();
  EXPECT_EQ(h.master().pushes_received(), 0);
  EXPECT_EQ(h.coordinator().leave_reason(), proto::LEAVE_REASON_FAILED);
  EXPECT_NE(h.coordinator().leave_message().find("values"), std::string::npos);
}

TEST(TrainerTest, ADescribedLayoutThatDiffersIsRefusedBeforeTraining) {
  Harness h;
  ParameterLayout other;
  ASSERT_TRUE(other.Add("fc1.weight", {10, 10}).ok());
  h.master().SetDescribedLayout(other);
  Status s = h.RunTrainer();
  EXPECT_EQ(s.code(), Status::Code::kFailedPrecondition) << s.ToString();
  EXPECT_NE(s.message().find("holds another model"), std::string::npos) << s.message();
  EXPECT_EQ(h.master().pulls(), 0);
}

TEST(TrainerTest, MalformedTruncatedOrEmptyStreamsAreRetriedThenReported) {
  for (FakeMaster::PullMode mode :
       {FakeMaster::PullMode::kMalformedChunk, FakeMaster::PullMode::kTruncated,
        FakeMaster::PullMode::kNoChunk}) {
    Harness h;
    h.master().SetPull(mode);
    Status s = h.RunTrainer(/*max_attempts=*/4);
    EXPECT_EQ(s.code(), Status::Code::kDataLoss) << s.ToString();
    EXPECT_EQ(h.master().pulls(), 4) << s.ToString();
    EXPECT_EQ(h.master().pushes_received(), 0);
    EXPECT_EQ(h.coordinator().leave_reason(), proto::LEAVE_REASON_FAILED);
  }
}

// A master with PushPull: each push brings the next step's parameters,
// and the trainer pulls on its own only to start the task.
TEST(TrainerTest, APushPullBringsTheNextStepsParameters) {
  Harness h;
  h.master().SetPushPull(true);
  Status s = h.RunTrainer();
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(h.master().pushes_applied(), kBatches);
  EXPECT_EQ(h.master().push_pulls(), kBatches);
  EXPECT_EQ(h.master().pulls() - h.master().push_pulls(), 1) << "one Pull: the task's first";
  EXPECT_EQ(h.coordinator().leave_reason(), proto::LEAVE_REASON_FINISHED);
}

// The pull half of a PushPull fails after the push was applied: the push
// counts once, and the trainer pulls on its own for the next step.
TEST(TrainerTest, AFailedPullAfterAnAppliedPushIsPulledAgain) {
  for (FakeMaster::PullMode mode :
       {FakeMaster::PullMode::kMalformedChunk, FakeMaster::PullMode::kTruncated,
        FakeMaster::PullMode::kWrongTotal}) {
    Harness h;
    h.master().SetPushPull(true);
    // Pull 1 starts the task; pull 2 is the first PushPull's.
    h.master().SetPull(mode, /*times=*/1, /*after=*/1);
    Status s = h.RunTrainer();
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(h.master().pushes_applied(), kBatches) << "never pushed twice";
    EXPECT_EQ(h.master().push_pulls(), kBatches);
    EXPECT_EQ(h.master().pulls() - h.master().push_pulls(), 2) << "the task's first, and one more";
  }
}

// A master older than PushPull answers UNIMPLEMENTED, applying nothing:
// the trainer pushes the same gradient with Push and keeps to Push/Pull.
TEST(TrainerTest, AMasterWithoutPushPullGetsPushAndPull) {
  Harness h;  // the fake master has no PushPull unless asked
  Status s = h.RunTrainer();
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(h.master().push_pulls(), 0);
  EXPECT_EQ(h.master().pushes_applied(), kBatches);
  EXPECT_EQ(h.master().pushes_received(), kBatches);
  EXPECT_GE(h.master().pulls(), kBatches);
}

// The session on its own: a loop of three steps pulls once (each PushPull
// brings the next step's θ), and every refusal maps to what the loop does.
TEST(MasterSessionTest, ALoopOfItsOwnPullsOnceAndLearnsWhatRefusalsMean) {
  Harness h;
  h.master().SetPushPull(true);
  h.master().SetRun(7);
  h.WithSession([&](MasterSession& master, Model& model) {
    const Dataset& d = h.data();
    std::vector<float> images(kBatch * d.image_size());
    std::vector<int64_t> labels(kBatch);
    for (size_t i = 0; i < images.size(); ++i) images[i] = d.images[i] / 255.0f;
    for (uint32_t i = 0; i < kBatch; ++i) labels[i] = d.labels[i];
    for (int step = 0; step < 3; ++step) {
      ASSERT_TRUE(master.Pull().ok());
      const float loss = model.ComputeGradient(images.data(), labels.data(), kBatch);
      proto::PushResponse reply;
      const uint32_t first = static_cast<uint32_t>(step) * kBatch;
      ASSERT_TRUE(master.Push(loss, SampleRange{first, first + kBatch}, &reply).ok());
      EXPECT_EQ(reply.version(), static_cast<uint64_t>(step + 1));
    }
    proto::CompleteTaskRequest report;
    master.AddReached(&report);
    ASSERT_EQ(report.reached_size(), 1);
    EXPECT_EQ(report.reached(0).version(), 3u) << "the newest the task's pushes reached";
    EXPECT_EQ(h.master().push_pulls(), 3);
    EXPECT_EQ(h.master().pulls() - h.master().push_pulls(), 1) << "the first step's Pull only";
    EXPECT_FALSE(master.run_changed());

    // After a failure: again once the batch's retry loop has waited, again
    // at once after a refusal, until the batch's refusals run out.
    using Next = MasterSession::Next;
    RetryLoop loop(FastRetry(4), 1, nullptr);
    master.BeginBatch();
    EXPECT_EQ(master.AfterPushFailure(Status::Unavailable("down"), &loop), Next::kAgain);
    EXPECT_EQ(loop.failures(), 1) << "a transient failure waits";
    EXPECT_EQ(master.AfterPushFailure(Status::FailedPrecondition("stale"), &loop), Next::kAgain);
    EXPECT_EQ(master.AfterPushFailure(Status::OutOfRange("future"), &loop), Next::kAgain);
    EXPECT_EQ(loop.failures(), 1) << "a refusal as stale or from the future does not wait";
    EXPECT_EQ(master.AfterPushFailure(Status::NotFound("member"), &loop), Next::kAgain);
    EXPECT_EQ(loop.failures(), 2) << "not a member yet: the membership feed catches up";
    EXPECT_EQ(master.AfterPushFailure(Status::FailedPrecondition("stale"), &loop), Next::kSkip)
        << "the fourth refusal of one batch (max_recomputes 3)";
    master.BeginBatch();
    EXPECT_EQ(master.AfterPushFailure(Status::FailedPrecondition("stale"), &loop), Next::kAgain)
        << "a new batch's refusals count from zero";
    EXPECT_EQ(master.AfterPushFailure(Status::InvalidArgument("bug"), &loop), Next::kSkip);
    EXPECT_EQ(master.AfterPushFailure(Status::AlreadyExists("in step"), &loop), Next::kSkip);
    EXPECT_EQ(master.AfterPushFailure(Status::Unauthenticated("token"), &loop), Next::kFail);
    EXPECT_EQ(master.AfterPullFailure(Status::NotFound("member"), &loop), Next::kAgain);
    EXPECT_EQ(master.AfterPullFailure(Status::Unavailable("down"), &loop), Next::kGiveUp)
        << "the loop's fourth consecutive failure: it will not wait again";
    EXPECT_EQ(master.AfterPullFailure(Status::FailedPrecondition("size"), &loop), Next::kFail);
  });
}

// spec.master.shards: 2. Every pull and push goes to both shards, each
// with its slice; a push one shard refuses as stale is recomputed and sent
// to that shard only (the other applied it already), and the task's
// positions name both shards.
TEST(MasterSessionTest, TwoShardsTakeTheirSlicesAndARefusalIsResentToItsShardOnly) {
  Harness h;
  ASSERT_NO_FATAL_FAILURE(h.UseShards(2));
  std::vector<ParameterShard> plan;
  ASSERT_TRUE(PlanShards(h.layout(), 2, &plan).ok());
  h.shard(1).SetPush(FakeMaster::PushMode::kStale, 1);
  h.WithSessionOf({h.shard(0).address(), h.shard(1).address()}, [&](MasterSession& master,
                                                                     Model& model) {
    const Dataset& d = h.data();
    std::vector<float> images(kBatch * d.image_size());
    std::vector<int64_t> labels(kBatch);
    for (size_t i = 0; i < images.size(); ++i) images[i] = d.images[i] / 255.0f;
    for (uint32_t i = 0; i < kBatch; ++i) labels[i] = d.labels[i];
    const SampleRange batch{0, kBatch};
    ASSERT_TRUE(master.Pull().ok());
    proto::PushResponse reply;
    Status s = master.Push(model.ComputeGradient(images.data(), labels.data(), kBatch), batch,
                           &reply);
    ASSERT_EQ(s.code(), Status::Code::kFailedPrecondition) << s.ToString();
    RetryLoop loop(FastRetry(1), 1, nullptr);
    EXPECT_EQ(master.AfterPushFailure(s, &loop), MasterSession::Next::kAgain);
    ASSERT_TRUE(master.Pull().ok());
    s = master.Push(model.ComputeGradient(images.data(), labels.data(), kBatch), batch, &reply);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(h.shard(0).pushes_received(), 1) << "shard 0 had the batch already";
    EXPECT_EQ(h.shard(1).pushes_received(), 2);
    EXPECT_EQ(h.shard(0).pushes_applied(), 1);
    EXPECT_EQ(h.shard(1).pushes_applied(), 1);
    // Each got a gradient of its own slice's size.
    EXPECT_EQ(h.shard(0).first_gradient().size(), plan[0].size());
    proto::CompleteTaskRequest report;
    master.AddReached(&report);
    ASSERT_EQ(report.reached_size(), 2);
    EXPECT_EQ(report.reached(0).shard(), 0u);
    EXPECT_EQ(report.reached(0).incarnation(), 10u);
    EXPECT_EQ(report.reached(1).shard(), 1u);
    EXPECT_EQ(report.reached(1).incarnation(), 11u);
  });
}

TEST(MasterSessionTest, MastersThatAreNotTheRegistrationsShardsAreRefused) {
  Harness h;
  std::vector<ParameterShard> plan;
  ASSERT_TRUE(PlanShards(h.layout(), 2, &plan).ok());
  FakeMaster second(ShardLayout(h.layout(), plan[1]));
  second.SetDescribedLayout(h.layout());
  second.SetShard(1, 2, plan[1].begin, plan[1].end);
  // Shard 1 named alone: the registration's shard 0, and its range does
  // not begin at 0. Connect talks to no coordinator.
  std::unique_ptr<Model> model;
  ASSERT_TRUE(Model::CreateBuiltin("mlp", ModelInput{1, kSide, kSide, 10}, 1, &model).ok());
  StopFlag stop;
  MasterSession master(h.job(), h.Connector(), nullptr, &stop, nullptr);
  RetryLoop loop(FastRetry(2), 1, &stop);
  const Status s = master.Connect({second.address()}, model.get(), &loop);
  EXPECT_EQ(s.code(), Status::Code::kFailedPrecondition);
  EXPECT_NE(s.message().find("holds shard 1 of 2"), std::string::npos) << s.ToString();
}

TEST(TrainerTest, OutagesAreRetriedAndCountedAsReconnects) {
  Harness h;
  h.master().SetPull(FakeMaster::PullMode::kUnavailable, 3);
  h.master().SetPush(FakeMaster::PushMode::kUnavailable, 2);
  Status s = h.RunTrainer(/*max_attempts=*/0);  // never give up
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(h.master().pushes_applied(), kBatches);
  EXPECT_EQ(h.master().pushes_received(), kBatches + 2);
  // Back after the pull outage, and after each failed push (the pull
  // that follows it succeeds).
  EXPECT_EQ(h.metrics().reconnects(Peer::kMaster), 3);
  EXPECT_EQ(h.coordinator().leave_reason(), proto::LEAVE_REASON_FINISHED);
}

TEST(TrainerTest, InvalidPushesAreSkippedNotFatal) {
  Harness h;
  h.master().SetPush(FakeMaster::PushMode::kInvalidArgument);
  Status s = h.RunTrainer();
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(h.master().pushes_applied(), 0);
  EXPECT_EQ(h.trainer().batches_skipped(), static_cast<uint64_t>(kBatches));
  EXPECT_EQ(h.coordinator().completions(), 1);
  EXPECT_EQ(h.coordinator().leave_reason(), proto::LEAVE_REASON_FINISHED);
}

TEST(TrainerTest, AStalePushIsPulledAgainAndRecomputed) {
  Harness h;
  h.master().SetPush(FakeMaster::PushMode::kStale, 2);
  ASSERT_TRUE(h.RunTrainer().ok());
  EXPECT_EQ(h.master().pushes_applied(), kBatches);
  EXPECT_EQ(h.master().pushes_received(), kBatches + 2);
  EXPECT_EQ(h.trainer().batches_skipped(), 0u);

  Harness always;  // stale forever: skipped after max_recomputes, never stuck
  always.master().SetPush(FakeMaster::PushMode::kStale);
  ASSERT_TRUE(always.RunTrainer().ok());
  EXPECT_EQ(always.trainer().batches_skipped(), static_cast<uint64_t>(kBatches));
  EXPECT_EQ(always.master().pushes_received(), kBatches * 4);  // 1 + 3 recomputes each
}

TEST(TrainerTest, ARefusedTokenIsFatal) {
  Harness h;
  h.master().SetPush(FakeMaster::PushMode::kUnauthenticated);
  Status s = h.RunTrainer();
  EXPECT_EQ(s.code(), Status::Code::kUnauthenticated) << s.ToString();
  EXPECT_EQ(h.coordinator().leave_reason(), proto::LEAVE_REASON_FAILED);
}

TEST(TrainerTest, ATaskOutsideTheDatasetIsRefused) {
  Harness h;
  proto::DataTask task;
  task.set_task_id(1);
  task.set_begin(0);
  task.set_end(kSamples + 10);
  h.coordinator().SetTask(task);
  Status s = h.RunTrainer();
  EXPECT_EQ(s.code(), Status::Code::kFailedPrecondition) << s.ToString();
  EXPECT_NE(s.message().find("task 1"), std::string::npos) << s.message();
  EXPECT_EQ(h.master().pushes_received(), 0);
}

TEST(TrainerTest, AnUnreachableMasterGivesUpAfterTheAttempts) {
  Harness h;
  FakeCoordinator nowhere("127.0.0.1:1", kSamples, kBatch);  // nothing listens on port 1
  CoordinatorClient::Options co;
  co.deadline_seconds = 5;
  CoordinatorClient client(
      grpc::CreateChannel(nowhere.address(), grpc::InsecureChannelCredentials()), co);
  CoordinatorSession::Options so;
  so.host = "test-host";
  so.retry = FastRetry(3);
  StopFlag stop;
  CoordinatorSession session(&client, so, &stop, nullptr);
  Trainer::Options o;
  o.retry = FastRetry(3);
  Trainer trainer(h.job(), h.data(), &session, h.Connector(), &stop, nullptr, o);
  Status s = trainer.Run();
  EXPECT_EQ(s.code(), Status::Code::kUnavailable) << s.ToString();
  EXPECT_EQ(nowhere.leave_reason(), proto::LEAVE_REASON_FAILED);
}

TEST(TrainerTest, PreemptedBeforeTheFirstBatchLeavesAsPreempted) {
  Harness h;
  h.stop().Stop(StopReason::kPreempted);
  ASSERT_TRUE(h.RunTrainer().ok());
  EXPECT_EQ(h.master().pushes_received(), 0);
  EXPECT_EQ(h.coordinator().leave_reason(), proto::LEAVE_REASON_PREEMPTED);
}

TEST(EvaluationLoopTest, EvaluatesThetaWithObserverPullsAndReports) {
  Harness h;
  h.master().SetVersion(10);  // past evalEveryUpdates (5)
  h.coordinator().SetPhaseAfterEvaluation(proto::JOB_PHASE_SUCCEEDED);
  EvaluationLoop::Result result;
  Status s = h.RunEvaluator(&result);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(result.evaluations, 1u);
  EXPECT_EQ(result.version, 10u);
  const auto reports = h.coordinator().evaluations();
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_EQ(reports[0].version(), 10u);
  EXPECT_GE(reports[0].accuracy(), 0.0);
  EXPECT_LE(reports[0].accuracy(), 1.0);
  EXPECT_GT(reports[0].loss(), 0.0);
  EXPECT_GE(h.master().observer_pulls(), 1);
  EXPECT_EQ(h.master().pulls(), h.master().observer_pulls());  // never a member pull
  EXPECT_EQ(h.coordinator().leave_reason(), proto::LEAVE_REASON_FINISHED);
}

// A model that predicts no better than chance after updates (θ all 0:
// uniform outputs, loss ln 10) gets a warning that says what to change; a
// model whose loss is far from ln 10 (θ scaled up: confident, and wrong on
// this random data) gets none.
TEST(EvaluationLoopTest, AModelAtChanceLevelIsWarnedAbout) {
  auto log = std::make_shared<std::ostringstream>();
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(*log);
  spdlog::default_logger()->sinks().push_back(sink);
  for (float scale : {0.0f, 100.0f}) {
    log->str("");
    Harness h;
    h.master().SetVersion(10);
    h.master().ScaleTheta(scale);
    h.coordinator().SetPhaseAfterEvaluation(proto::JOB_PHASE_SUCCEEDED);
    EvaluationLoop::Result result;
    Status s = h.RunEvaluator(&result);
    ASSERT_TRUE(s.ok()) << s.ToString();
    const bool dead = scale == 0.0f;
    EXPECT_EQ(log->str().find("predicts no better than chance") != std::string::npos, dead)
        << "scale " << scale << ", loss " << result.loss << ", accuracy " << result.accuracy
        << ", log:\n" << log->str();
    if (dead) EXPECT_NEAR(result.loss, std::log(10.0), 1e-4);
  }
  spdlog::default_logger()->sinks().pop_back();
}

// The evaluator's observer pulls come in the job's wire type too.
// The evaluator scores the fp32 model whatever the trainers' wire type.
TEST(EvaluationLoopTest, EvaluatorPullsFp32WhateverTheWireType) {
  Harness h;
  h.job().training.wire_type = "bf16";
  h.UseJobConnector(MasterRole::kEvaluator);
  h.master().SetVersion(10);
  h.coordinator().SetPhaseAfterEvaluation(proto::JOB_PHASE_SUCCEEDED);
  EvaluationLoop::Result result;
  Status s = h.RunEvaluator(&result);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(result.evaluations, 1u);
  const std::vector<proto::WireType> pulls = h.master().pull_wire_types();
  ASSERT_GE(h.master().observer_pulls(), 1);
  EXPECT_EQ(pulls, std::vector<proto::WireType>(pulls.size(), proto::FLOAT32));
  EXPECT_EQ(h.master().pulled_value_bytes(), h.layout().size() * 4);  // θ once
}

TEST(MasterConnectorTest, AnUnknownWireTypeNamesTheField) {
  TrainingJob job;
  job.training.wire_type = "fp16";
  MasterLink::Connector connect;
  Status s = MasterConnector(job, MasterRole::kTrainer, "", 5, grpc::InsecureChannelCredentials(),
                             &connect);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(s.message().find("spec.training.wireType"), std::string::npos) << s.ToString();
  EXPECT_FALSE(connect);
}

// The evaluator in the mirrored mode reports what the direct one does.
TEST(EvaluationLoopTest, AMirroredModelEvaluatesLikeTheDirectOne) {
  Harness direct, mirrored;
  mirrored.SetDevice("cpu", /*mirror_on_cpu=*/true);
  EvaluationLoop::Result results[2];
  Harness* harnesses[2] = {&direct, &mirrored};
  for (int i = 0; i < 2; ++i) {
    Harness& h = *harnesses[i];
    h.master().SetVersion(10);
    h.coordinator().SetPhaseAfterEvaluation(proto::JOB_PHASE_SUCCEEDED);
    Status s = h.RunEvaluator(&results[i]);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(results[i].evaluations, 1u);
    EXPECT_EQ(h.evaluator_device(), "cpu");
    EXPECT_EQ(h.metrics().device(), "cpu");
  }
  EXPECT_EQ(results[1].accuracy, results[0].accuracy);
  // (The direct one evaluated the pulled θ; a pull that did not reach the
  // mirrored model's device copy would have left it the seeded weights.)
  EXPECT_EQ(results[1].loss, results[0].loss);
}

TEST(EvaluationLoopTest, ABrokenStreamIsReportedNotFatalToTheProcess) {
  Harness h;
  h.master().SetVersion(10);
  h.master().SetPull(FakeMaster::PullMode::kWrongTotal);
  EvaluationLoop::Result result;
  Status s = h.RunEvaluator(&result);
  EXPECT_EQ(s.code(), Status::Code::kFailedPrecondition) << s.ToString();
  EXPECT_TRUE(h.coordinator().evaluations().empty());
  EXPECT_EQ(h.coordinator().leave_reason(), proto::LEAVE_REASON_FAILED);
}

}  // namespace
}  // namespace gaptrain
