#include "services/common/training_job.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>

namespace gaptrain {
namespace {

constexpr char kFullJob[] = R"(
apiVersion: gaptrain.io/v1alpha1
kind: TrainingJob
metadata:
  name: mnist-ga
  labels: {team: vision}
spec:
  model:
    builtin: lenet5
  data:
    format: mnist-idx
    path: /data/mnist
    shuffleSeed: 7
  training:
    batchSize: 64
    epochs: 10
    targetAccuracy: 0.99
    evalEveryUpdates: 250
    optimizer:
      learningRate: 0.05
      momentum: 0.9
      nesterov: false
      weightDecay: 1.0e-4
      warmupEpochs: 5
      decay: {type: step, atFractions: [0.5, 0.75], factor: 0.1}
    mode: async
    wireType: bf16
    staleness:
      rule: gap-aware
      gapSource: echo
      gapPrecision: bf16
      penalizeWeightDecay: false
      maxStaleness: 64
    sync:
      backupWorkers: 2
  workers:
    replicas: 8
    minReplicas: 2
    maxReplicas: 16
    preemptible: true
    restartPolicy: OnFailure
    template:
      spec:
        containers: [{name: worker, image: gaptrain:dev}]
  master:
    checkpoint: {intervalSeconds: 30, keep: 5, path: /checkpoints}
  coordinator:
    leaseSeconds: 15
  runPolicy:
    backoffLimit: 4
    cleanPodPolicy: All
status:
  phase: Running
)";

std::string WithLine(const std::string& from, const std::string& to) {
  std::string job = kFullJob;
  size_t at = job.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return job.replace(at, from.size(), to);
}

Status Parse(const std::string& text, TrainingJob* job) {
  return ParseTrainingJob(text, "job.yaml", job);
}

// The error for `text`, which must be INVALID_ARGUMENT.
std::string ErrorOf(const std::string& text) {
  TrainingJob job;
  Status s = Parse(text, &job);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << s.ToString();
  return s.message();
}

TEST(TrainingJobTest, ParsesEveryField) {
  TrainingJob job;
  ASSERT_TRUE(Parse(kFullJob, &job).ok()) << Parse(kFullJob, &job).ToString();
  EXPECT_EQ(job.name, "mnist-ga");
  EXPECT_EQ(job.labels.at("team"), "vision");
  EXPECT_EQ(job.model.builtin, "lenet5");
  EXPECT_EQ(job.data.path, "/data/mnist");
  EXPECT_EQ(job.data.shuffle_seed, 7u);
  EXPECT_EQ(job.training.batch_size, 64u);
  EXPECT_DOUBLE_EQ(job.training.epochs, 10);
  EXPECT_DOUBLE_EQ(job.training.target_accuracy, 0.99);
  EXPECT_EQ(job.training.eval_every_updates, 250u);
  EXPECT_DOUBLE_EQ(job.training.optimizer.learning_rate, 0.05);
  EXPECT_DOUBLE_EQ(job.training.optimizer.weight_decay, 1e-4);
  EXPECT_DOUBLE_EQ(job.training.optimizer.warmup_epochs, 5);
  EXPECT_EQ(job.training.optimizer.decay.at_fractions, (std::vector<double>{0.5, 0.75}));
  EXPECT_EQ(job.training.wire_type, "bf16");
  EXPECT_EQ(job.training.staleness.rule, "gap-aware");
  EXPECT_EQ(job.training.staleness.gap_source, "echo");
  EXPECT_EQ(job.training.staleness.gap_precision, "bf16");
  EXPECT_FALSE(job.training.staleness.penalize_weight_decay);
  EXPECT_EQ(job.training.staleness.max_staleness, 64u);
  EXPECT_EQ(job.training.sync.backup_workers, 2u);
  EXPECT_EQ(job.workers.replicas, 8u);
  EXPECT_EQ(job.workers.min_replicas, 2u);
  EXPECT_TRUE(job.workers.preemptible);
  EXPECT_NE(job.workers.template_yaml.find("gaptrain:dev"), std::string::npos);
  EXPECT_EQ(job.master.checkpoint.keep, 5u);
  EXPECT_EQ(job.coordinator.lease_seconds, 15u);
  EXPECT_EQ(job.run_policy.backoff_limit, 4u);
  EXPECT_EQ(job.run_policy.clean_pod_policy, "All");
}

TEST(TrainingJobTest, MinimalJobGetsDefaults) {
  TrainingJob job;
  Status s = Parse(R"(
apiVersion: gaptrain.io/v1alpha1
kind: TrainingJob
metadata: {name: tiny}
spec:
  data: {path: ../shared/data/mnist}
  training: {maxUpdates: 100}
)",
                   &job);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(job.model.builtin, "mlp");
  EXPECT_EQ(job.training.mode, "async");
  EXPECT_EQ(job.training.wire_type, "fp32");
  EXPECT_EQ(job.training.staleness.rule, "gap-aware");
  EXPECT_EQ(job.training.batch_size, 128u);
  EXPECT_EQ(job.workers.replicas, 1u);
  EXPECT_EQ(job.master.checkpoint.interval_seconds, 60u);
  EXPECT_EQ(job.master.update_threads, 0u);  // one per CPU
}

TEST(TrainingJobTest, ErrorsNameTheField) {
  EXPECT_NE(ErrorOf(WithLine("momentum: 0.9", "momentum: 1.5"))
                .find("spec.training.optimizer.momentum: must be in [0, 1), got 1.5"),
            std::string::npos);
  EXPECT_NE(ErrorOf(WithLine("rule: gap-aware", "rule: gap-awar"))
                .find("spec.training.staleness.rule: must be one of"),
            std::string::npos);
  EXPECT_NE(ErrorOf(WithLine("batchSize: 64", "batchSize: lots"))
                .find("spec.training.batchSize: must be a non-negative integer, got 'lots'"),
            std::string::npos);
  EXPECT_NE(ErrorOf(WithLine("batchSize: 64", "batchSize: -3"))
                .find("spec.training.batchSize"),
            std::string::npos);
  EXPECT_NE(ErrorOf(WithLine("learningRate: 0.05", "learningRate: 0"))
                .find("spec.training.optimizer.learningRate: must be > 0"),
            std::string::npos);
  EXPECT_NE(ErrorOf(WithLine("minReplicas: 2", "minReplicas: 9"))
                .find("spec.workers.minReplicas: must be <= replicas (8)"),
            std::string::npos);
  EXPECT_NE(ErrorOf(WithLine("atFractions: [0.5, 0.75]", "atFractions: [0.75, 0.5]"))
                .find("spec.training.optimizer.decay.atFractions"),
            std::string::npos);
  EXPECT_NE(ErrorOf(WithLine("checkpoint: {intervalSeconds: 30, keep: 5, path: /checkpoints}",
                             "updateThreads: 300"))
                .find("spec.master.updateThreads: must be in [0, 256]"),
            std::string::npos);
  EXPECT_NE(ErrorOf(WithLine("preemptible: true", "preemptible: maybe"))
                .find("spec.workers.preemptible: must be true or false"),
            std::string::npos);
  EXPECT_NE(ErrorOf(WithLine("name: mnist-ga", "name: MNIST_ga"))
                .find("metadata.name"),
            std::string::npos);
  EXPECT_NE(ErrorOf(WithLine("format: mnist-idx", "format: png"))
                .find("spec.data.format"),
            std::string::npos);
}

TEST(TrainingJobTest, WireTypeIsFp32OrBf16) {
  TrainingJob job;
  ASSERT_TRUE(Parse(WithLine("wireType: bf16", "wireType: fp32"), &job).ok());
  EXPECT_EQ(job.training.wire_type, "fp32");
  for (const char* bad : {"wireType: fp16", "wireType: BF16", "wireType: 16", "wireType: ''"}) {
    std::string msg = ErrorOf(WithLine("wireType: bf16", bad));
    EXPECT_NE(msg.find("spec.training.wireType: must be one of"), std::string::npos)
        << bad << ": " << msg;
  }
  std::string msg = ErrorOf(WithLine("wireType: bf16", "wireType: [bf16]"));
  EXPECT_NE(msg.find("spec.training.wireType"), std::string::npos) << msg;
}

TEST(TrainingJobTest, UnknownFieldIsRejectedWithItsPath) {
  std::string msg = ErrorOf(WithLine("learningRate: 0.05", "learningrate: 0.05"));
  EXPECT_NE(msg.find("spec.training.optimizer.learningrate: unknown field"), std::string::npos)
      << msg;
  EXPECT_NE(msg.find("learningRate"), std::string::npos) << msg;  // lists the known ones
}

TEST(TrainingJobTest, EpochsAndMaxUpdatesAreExclusive) {
  EXPECT_NE(ErrorOf(WithLine("epochs: 10", "epochs: 10\n    maxUpdates: 5"))
                .find("set exactly one of epochs and maxUpdates"),
            std::string::npos);
  EXPECT_NE(ErrorOf(WithLine("epochs: 10", "targetAccuracy: 0.5\n    batchSize: 1"))
                .find("spec.training"),
            std::string::npos);
}

TEST(TrainingJobTest, WrongKindAndBrokenYaml) {
  EXPECT_NE(ErrorOf(WithLine("kind: TrainingJob", "kind: TFJob")).find("kind: must be TrainingJob"),
            std::string::npos);
  EXPECT_NE(ErrorOf(WithLine("gaptrain.io/v1alpha1", "kubeflow.org/v1")).find("apiVersion"),
            std::string::npos);
  std::string msg = ErrorOf("spec: [unclosed\n");
  EXPECT_NE(msg.find("job.yaml: not valid YAML at line"), std::string::npos) << msg;
  EXPECT_NE(ErrorOf("- just\n- a list\n").find("must be a TrainingJob mapping"), std::string::npos);
  EXPECT_NE(ErrorOf(WithLine("optimizer:", "optimizer: 3\n    unused:")).find("spec.training.optimizer"),
            std::string::npos);
}

TEST(TrainingJobTest, SyncBackupsMustLeaveAWorker) {
  std::string text = WithLine("backupWorkers: 2", "backupWorkers: 8");
  text.replace(text.find("mode: async"), 11, "mode: sync");
  EXPECT_NE(ErrorOf(text).find("spec.training.sync.backupWorkers: must be < workers.replicas (8)"),
            std::string::npos);
}

TEST(TrainingJobTest, LoadReportsMissingFile) {
  TrainingJob job;
  Status s = LoadTrainingJob("/nonexistent/job.yaml", &job);
  EXPECT_EQ(s.code(), Status::Code::kNotFound);
  EXPECT_NE(s.message().find("/nonexistent/job.yaml"), std::string::npos);

  std::string path = std::string(getenv("TEST_TMPDIR") ? getenv("TEST_TMPDIR") : "/tmp") +
                     "/job.yaml";
  std::ofstream(path) << kFullJob;
  EXPECT_TRUE(LoadTrainingJob(path, &job).ok());
  EXPECT_EQ(job.name, "mnist-ga");
}

}  // namespace
}  // namespace gaptrain
