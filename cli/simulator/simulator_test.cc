#include "cli/simulator/simulator.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "cli/simulator/batch_time.h"
#include "cli/simulator/simulation_spec.h"
#include "services/learn/batch_loader.h"
#include "services/learn/compute_threads.h"
#include "services/learn/epoch_order.h"
#include "services/learn/model.h"
#include "services/testing/testdata_dir.h"

namespace gaptrain {
namespace {

// A job on real MNIST; tests adjust it.
TrainingJob MnistJob(const std::string& data_dir) {
  TrainingJob job;
  std::string yaml = R"(
apiVersion: gaptrain.io/v1alpha1
kind: TrainingJob
metadata: {name: sim-test}
spec:
  model: {builtin: mlp}
  data: {format: mnist-idx, path: )" +
                     data_dir + R"(/mnist}
  training:
    batchSize: 64
    maxUpdates: 40
    optimizer: {learningRate: 0.05, momentum: 0.9, weightDecay: 1.0e-4, decay: {type: none}}
  workers: {replicas: 1}
)";
  Status s = ParseTrainingJob(yaml, "sim-test.yaml", &job);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return job;
}

class SimulatorTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    SetComputeThreads(1);
    Status s = FindSharedDataDir(&data_dir_);
    ASSERT_TRUE(s.ok()) << s.ToString();
    TrainingJob job = MnistJob(data_dir_);
    SimulationSpec spec;
    ASSERT_TRUE(ParseSimulationSpec(job, &spec).ok());
    spec.eval_samples = 1000;
    data_ = new SimulationData;
    s = LoadSimulationData(job, spec, data_);
    ASSERT_TRUE(s.ok()) << s.ToString();
  }
  static void TearDownTestSuite() { delete data_; }

  // Runs `run` of `job` with the job's spec and a long evaluation period
  // (one final evaluation over all pushes).
  RunResult Simulate(const TrainingJob& job, const SimulationRun& run,
                     std::vector<float>* params = nullptr, SimulationSpec* custom = nullptr) {
    SimulationSpec spec;
    EXPECT_TRUE(ParseSimulationSpec(job, &spec).ok());
    if (custom != nullptr) spec = *custom;
    spec.eval_every_epochs = 1000;
    RunResult result;
    Status s = RunSimulation(job, spec, run, *data_, {}, &result, params);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return result;
  }

  static std::string data_dir_;
  static SimulationData* data_;
};

std::string SimulatorTest::data_dir_;
SimulationData* SimulatorTest::data_ = nullptr;

SimulationRun MakeRun(const std::string& rule, uint32_t workers, double lr = 0.05) {
  SimulationRun r;
  r.rule = rule;
  r.workers = workers;
  r.learning_rate = lr;
  r.momentum = 0.9;
  r.seed = 3;
  return r;
}

// With one worker there is no staleness: every async rule is plain SGD
// with momentum, step by step. The reference here is a hand-written loop
// over the same model, the same batches and the same update.
TEST_F(SimulatorTest, OneWorkerEqualsPlainSgdForEveryAsyncRule) {
  TrainingJob job = MnistJob(data_dir_);
  const uint64_t steps = job.training.max_updates;
  const int64_t batch = job.training.batch_size;
  const float lr = 0.05f, momentum = 0.9f, wd = 1e-4f;

  std::unique_ptr<Model> model;
  ModelInput input{1, 28, 28, 10};
  ASSERT_TRUE(Model::CreateBuiltin("mlp", input, /*seed=*/3, &model).ok());
  const size_t p = model->layout().size();
  std::vector<float> theta(model->parameters(), model->parameters() + p);
  std::vector<float> v(p, 0.0f);
  BatchLoader loader(data_->train, batch);
  std::vector<float> images(batch * 784);
  std::vector<int64_t> labels(batch);
  std::vector<uint32_t> order =
      EpochPermutation(SimulationShuffleSeed(job, MakeRun("none", 1)), 0, data_->train.size());
  for (uint64_t step = 0; step < steps; ++step) {
    loader.Fill(order.data() + step * batch, batch, images.data(), labels.data());
    std::memcpy(model->parameters(), theta.data(), p * sizeof(float));
    model->ComputeGradient(images.data(), labels.data(), batch);
    const float* g = model->gradients();
    for (size_t j = 0; j < p; ++j) {
      float d = g[j] + wd * theta[j];
      v[j] = momentum * v[j] + d;
      theta[j] -= lr * v[j];
    }
  }

  for (const char* rule : {"none", "staleness-aware", "gap-aware", "dc-asgd"}) {
    std::vector<float> simulated;
    RunResult r = Simulate(job, MakeRun(rule, 1), &simulated);
    ASSERT_EQ(simulated.size(), p) << rule;
    EXPECT_FALSE(r.diverged);
    EXPECT_EQ(r.points.back().updates, steps);
    double max_diff = 0;
    for (size_t j = 0; j < p; ++j) {
      max_diff = std::max<double>(max_diff, std::fabs(simulated[j] - theta[j]));
    }
    EXPECT_LT(max_diff, 1e-5) << rule;
    EXPECT_DOUBLE_EQ(r.points.back().mean_staleness, 0.0) << rule;
  }
}

TEST_F(SimulatorTest, MeanStalenessIsAboutNMinusOneWithShape100Times) {
  TrainingJob job = MnistJob(data_dir_);
  job.training.max_updates = 400;
  RunResult r = Simulate(job, MakeRun("gap-aware", 16));
  // Workers all start at time 0, so the first 16 pushes are fresher; over
  // 400 pushes the mean is just under 15.
  EXPECT_GT(r.points.back().mean_staleness, 14.0);
  EXPECT_LT(r.points.back().mean_staleness, 15.2);
  EXPECT_GT(r.points.back().mean_gap, 1.0);
}

// The claim GA exists for: plain ASGD with momentum at large N falls
// apart, GA keeps training.
TEST_F(SimulatorTest, AsgdWithMomentumAtLargeNEndsClearlyBelowGapAware) {
  TrainingJob job = MnistJob(data_dir_);
  job.training.batch_size = 128;
  job.training.max_updates = 500;
  RunResult asgd = Simulate(job, MakeRun("none", 32, 0.03));
  RunResult ga = Simulate(job, MakeRun("gap-aware", 32, 0.03));
  ASSERT_FALSE(ga.diverged);
  double asgd_accuracy = asgd.diverged ? 0.0 : asgd.points.back().accuracy;
  // Measured 0.54 (seed 3); ASGD diverged within 350 updates.
  EXPECT_GT(ga.points.back().accuracy, 0.45);
  EXPECT_GT(ga.points.back().accuracy, asgd_accuracy + 0.2)
      << "asgd " << asgd_accuracy << (asgd.diverged ? " (diverged)" : "");
}

TEST_F(SimulatorTest, SyncWithBackupsWaitsForTheFirstNMinusB) {
  TrainingJob job = MnistJob(data_dir_);
  job.training.max_updates = 20;
  SimulationRun run = MakeRun("sync", 4);
  run.backup_workers = 1;
  RunResult r = Simulate(job, run);
  EXPECT_EQ(r.points.back().updates, 20u);
  EXPECT_EQ(r.pushes, 60u);  // 3 gradients per step
  EXPECT_EQ(r.late_gradients, 20u);
  EXPECT_DOUBLE_EQ(r.points.back().mean_staleness, 0.0);

  // With stragglers, backups make a step faster in virtual time: the step
  // no longer waits for the slowest worker.
  SimulationSpec spec;
  ASSERT_TRUE(ParseSimulationSpec(job, &spec).ok());
  spec.straggler_fraction = 0.25;
  spec.straggler_slowdown = 4;
  RunResult with_backup = Simulate(job, run, nullptr, &spec);
  run.backup_workers = 0;
  RunResult without = Simulate(job, run, nullptr, &spec);
  EXPECT_LT(with_backup.points.back().virtual_time * 2, without.points.back().virtual_time);
}

TEST_F(SimulatorTest, PreemptedWorkersLeaveAndReplacementsJoin) {
  TrainingJob job = MnistJob(data_dir_);
  job.training.max_updates = 120;
  SimulationSpec spec;
  ASSERT_TRUE(ParseSimulationSpec(job, &spec).ok());
  spec.preemptions = {{1, 5.0, 3.0}, {2, 6.0, 0.0}};
  RunResult r = Simulate(job, MakeRun("gap-aware-dana", 4), nullptr, &spec);
  EXPECT_EQ(r.preemptions, 2u);
  EXPECT_FALSE(r.diverged);
  EXPECT_EQ(r.points.back().updates, 120u);

  spec.preemptions.clear();
  spec.preemption_rate = 0.02;
  spec.rejoin_after = 2.0;
  RunResult random = Simulate(job, MakeRun("dana-zero", 4), nullptr, &spec);
  EXPECT_GT(random.preemptions, 0u);
  EXPECT_EQ(random.points.back().updates, 120u);
}

// The autoscaled run uses the operator's policy: on MNIST with GA+DANA
// the Gap leaves room, so N doubles from the job's replicas up to
// maxReplicas, every change recorded with the policy's message; the slots
// above N stay idle, shrinking is no preemption, and the run is the same
// for a seed.
TEST_F(SimulatorTest, AnAutoscaledRunChoosesNWithTheSharedPolicy) {
  TrainingJob job = MnistJob(data_dir_);
  job.training.max_updates = 300;
  job.training.staleness.rule = "gap-aware-dana";
  job.workers.replicas = 2;
  job.workers.min_replicas = 1;
  job.workers.max_replicas = 8;
  job.workers.autoscale.enabled = true;
  job.workers.autoscale.max_gap = 1000;
  job.workers.autoscale.interval_seconds = 10;
  SimulationSpec spec;
  ASSERT_TRUE(ParseSimulationSpec(job, &spec).ok());
  RunResult r = Simulate(job, MakeRun("gap-aware-dana", 0), nullptr, &spec);
  EXPECT_FALSE(r.diverged);
  EXPECT_EQ(r.points.back().updates, 300u);
  ASSERT_EQ(r.scale_changes.size(), 2u);
  EXPECT_EQ(r.scale_changes[0].from, 2u);
  EXPECT_EQ(r.scale_changes[0].to, 4u);
  EXPECT_DOUBLE_EQ(r.scale_changes[0].virtual_time, 10);
  EXPECT_EQ(r.scale_changes[1].to, 8u);
  EXPECT_NE(r.scale_changes[0].message.find("leaves room under maxGap 1000.00"), std::string::npos)
      << r.scale_changes[0].message;
  EXPECT_EQ(r.points.back().live_workers, 8u);
  EXPECT_EQ(r.preemptions, 0u);
  // Past about 20 virtual seconds 8 workers push: 300 updates take far
  // less than 300 / 2 = 150.
  EXPECT_LT(r.points.back().virtual_time, 60);
  EXPECT_EQ(MakeRun("gap-aware-dana", 0).Label(), "gap-aware-dana N=auto lr=0.05 m=0.9 seed=3");

  // A Gap bound the pushes exceed: it only shrinks, and that is no preemption.
  job.workers.autoscale.max_gap = 1.0001;
  job.workers.replicas = 4;
  RunResult shrunk = Simulate(job, MakeRun("gap-aware-dana", 0), nullptr, &spec);
  ASSERT_FALSE(shrunk.scale_changes.empty());
  EXPECT_EQ(shrunk.scale_changes[0].from, 4u);
  EXPECT_LT(shrunk.scale_changes[0].to, 4u);
  EXPECT_NE(shrunk.scale_changes[0].message.find("is above maxGap 1.00"), std::string::npos)
      << shrunk.scale_changes[0].message;
  for (const ScaleChange& c : shrunk.scale_changes) EXPECT_LT(c.to, c.from) << c.message;
  EXPECT_EQ(shrunk.points.back().live_workers, shrunk.scale_changes.back().to);
  EXPECT_EQ(shrunk.preemptions, 0u);

  // Deterministic for a seed.
  RunResult again = Simulate(job, MakeRun("gap-aware-dana", 0), nullptr, &spec);
  ASSERT_EQ(again.scale_changes.size(), shrunk.scale_changes.size());
  EXPECT_EQ(again.points.back().accuracy, shrunk.points.back().accuracy);
}

TEST(BatchTimeSamplerTest, GammaMeanAndSpread) {
  BatchTimeSampler sampler(/*shape=*/100, /*mean=*/2.0, /*seed=*/5);
  const int n = 200000;
  double sum = 0, sum_sq = 0;
  for (int i = 0; i < n; ++i) {
    double x = sampler.Draw();
    ASSERT_GT(x, 0);
    sum += x;
    sum_sq += x * x;
  }
  double mean = sum / n;
  double cv = std::sqrt(sum_sq / n - mean * mean) / mean;
  EXPECT_NEAR(mean, 2.0, 0.01);
  EXPECT_NEAR(cv, 0.1, 0.003);  // 1/sqrt(shape)

  BatchTimeSampler heavy(/*shape=*/0.5, /*mean=*/1.0, /*seed=*/5);
  sum = 0;
  for (int i = 0; i < n; ++i) sum += heavy.Draw(3.0);
  EXPECT_NEAR(sum / n, 3.0, 0.05);
}

TEST(SimulationSpecTest, ErrorsNameTheField) {
  TrainingJob job;
  job.workers.replicas = 4;
  auto error = [&](const std::string& yaml) {
    job.simulation_yaml = yaml;
    SimulationSpec spec;
    Status s = ParseSimulationSpec(job, &spec);
    EXPECT_FALSE(s.ok()) << yaml;
    return s.message();
  };
  EXPECT_NE(error("rules: [gap-aware, fast]").find("spec.simulation.rules"), std::string::npos);
  EXPECT_NE(error("workers: [0]").find("spec.simulation.workers"), std::string::npos);
  EXPECT_NE(error("rules: [sync]\nworkers: [2]\nbackupWorkers: [2]")
                .find("spec.simulation.backupWorkers"),
            std::string::npos);
  EXPECT_NE(error("time: {shape: -1}").find("spec.simulation.time.shape"), std::string::npos);
  EXPECT_NE(error("stragglers: {fraction: 2}").find("spec.simulation.stragglers.fraction"),
            std::string::npos);
  EXPECT_NE(error("preemptions: {schedule: [{worker: 1, at: -3}]}")
                .find("spec.simulation.preemptions.schedule[0]"),
            std::string::npos);
  EXPECT_NE(error("seeds: []").find("spec.simulation.seeds"), std::string::npos);
  EXPECT_NE(error("workerz: [3]").find("spec.simulation.workerz: unknown field"),
            std::string::npos);
  EXPECT_NE(error("targetAccuracy: 90").find("spec.simulation.targetAccuracy"), std::string::npos);
  job.workers.max_replicas = 8;
  EXPECT_NE(error("autoscale: true\nrules: [gap-aware, dana-zero]")
                .find("spec.simulation.autoscale: needs Gap-Aware rules (gap-aware, "
                      "gap-aware-dana): it scales on the Gap, got dana-zero"),
            std::string::npos);
  job.workers.max_replicas = 0;
  EXPECT_NE(error("autoscale: true")
                .find("spec.simulation.autoscale: needs "
                      "spec.workers.maxReplicas above minReplicas"),
            std::string::npos);

  job.simulation_yaml = "";
  SimulationSpec defaults;
  ASSERT_TRUE(ParseSimulationSpec(job, &defaults).ok());
  EXPECT_EQ(defaults.workers, std::vector<uint64_t>{4});
  EXPECT_EQ(defaults.rules, std::vector<std::string>{"gap-aware"});
}

}  // namespace
}  // namespace gaptrain
