#include "services/api/training_job.h"

#include <gtest/gtest.h>

#include <yaml-cpp/yaml.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "services/testing/testdata_dir.h"

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

TEST(TrainingJobTest, AutoscaleNeedsARangeAndAGapAwareAsyncRule) {
  const std::string on = "restartPolicy: OnFailure\n    autoscale: {enabled: true, maxGap: 1.3, "
                         "minGain: 0.25, intervalSeconds: 30}";
  TrainingJob job;
  ASSERT_TRUE(Parse(WithLine("restartPolicy: OnFailure", on), &job).ok());
  EXPECT_TRUE(job.workers.autoscale.enabled);
  EXPECT_DOUBLE_EQ(job.workers.autoscale.max_gap, 1.3);
  EXPECT_DOUBLE_EQ(job.workers.autoscale.min_gain, 0.25);
  EXPECT_DOUBLE_EQ(job.workers.autoscale.interval_seconds, 30);
  EXPECT_EQ(job.workers.Floor(), 2u);
  EXPECT_EQ(job.workers.Ceiling(), 16u);

  std::string text = WithLine("restartPolicy: OnFailure", on);
  text.replace(text.find("minReplicas: 2"), 14, "minReplicas: 8");
  text.replace(text.find("maxReplicas: 16"), 15, "maxReplicas: 0");
  EXPECT_NE(ErrorOf(text).find("spec.workers.autoscale: needs maxReplicas above minReplicas "
                               "(0: replicas): the range it chooses N in (8, 8)"),
            std::string::npos);
  text = WithLine("restartPolicy: OnFailure", on);
  text.replace(text.find("rule: gap-aware"), 15, "rule: dana-zero");
  EXPECT_NE(ErrorOf(text).find(kRuleAutoscaleGap.Text()), std::string::npos);
  text = WithLine("restartPolicy: OnFailure", on);
  text.replace(text.find("mode: async"), 11, "mode: sync");
  EXPECT_NE(ErrorOf(text).find(kRuleAutoscaleGap.Text()), std::string::npos);
  EXPECT_NE(ErrorOf(WithLine("restartPolicy: OnFailure",
                             "autoscale: {enabled: true, maxGap: 1}"))
                .find("spec.workers.autoscale.maxGap"),
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

// kFullJob with the field at dotted `path` (under the document root) set to
// `value`, parsed as YAML (so "1e300" is a number, "[1]" a list).
// `text` with the field at `path` set to the YAML `value`.
std::string WithFieldIn(const std::string& text, const std::string& path,
                        const std::string& value) {
  YAML::Node root = YAML::Load(text);
  YAML::Node node = root;
  size_t begin = 0;
  while (true) {
    const size_t dot = path.find('.', begin);
    const std::string key = path.substr(begin, dot == std::string::npos ? dot : dot - begin);
    if (dot == std::string::npos) {
      node[key] = YAML::Load(value);
      break;
    }
    node.reset(node[key]);
    begin = dot + 1;
  }
  YAML::Emitter out;
  out << root;
  return out.c_str();
}

std::string WithField(const std::string& path, const std::string& value) {
  return WithFieldIn(kFullJob, path, value);
}

TEST(TrainingJobTest, EveryNumberHasAnUpperLimitWithItsReason) {
  const struct {
    std::string path, value, error;
  } cases[] = {
      {"spec.training.epochs", "1e300",
       "spec.training.epochs: must be <= 1000000 (with up to 2^32 samples an epoch, the job's "
       "updates stay below 2^53, exact in a double), got 1.0e+300"},
      {"spec.workers.replicas", "100000",
       "spec.workers.replicas: must be <= 1024 (the master keeps state for every worker"},
      {"spec.workers.minReplicas", "1025", "spec.workers.minReplicas: must be <= 1024"},
      {"spec.workers.maxReplicas", "1025", "spec.workers.maxReplicas: must be <= 1024"},
      {"spec.training.batchSize", "65537",
       "spec.training.batchSize: must be <= 65536 (a batch's activations must fit"},
      {"spec.training.evalEveryUpdates", "1000000000000001",
       "spec.training.evalEveryUpdates: must be <= 1000000000000000"},
      {"spec.training.optimizer.learningRate", "101",
       "spec.training.optimizer.learningRate: must be <= 100 ("},
      {"spec.training.optimizer.weightDecay", "1.5",
       "spec.training.optimizer.weightDecay: must be <= 1 ("},
      {"spec.training.optimizer.warmupEpochs", "2e6",
       "spec.training.optimizer.warmupEpochs: must be <= 1000000 ("},
      {"spec.training.staleness.maxStaleness", "1000001",
       "spec.training.staleness.maxStaleness: must be <= 1000000 ("},
      {"spec.training.staleness.gapEpsilon", "2",
       "spec.training.staleness.gapEpsilon: must be <= 1 ("},
      {"spec.training.staleness.dcLambda", "1000",
       "spec.training.staleness.dcLambda: must be <= 100 ("},
      {"spec.training.sync.backupWorkers", "1024",
       "spec.training.sync.backupWorkers: must be <= 1023 ("},
      {"spec.data.shuffleSeed", "9007199254740992",
       "spec.data.shuffleSeed: must be <= 9007199254740991 (larger seeds lose digits"},
      {"spec.master.checkpoint.intervalSeconds", "86401",
       "spec.master.checkpoint.intervalSeconds: must be <= 86400 (a day, the most"},
      {"spec.master.checkpoint.keep", "101", "spec.master.checkpoint.keep: must be <= 100 ("},
      {"spec.coordinator.leaseSeconds", "3601", "spec.coordinator.leaseSeconds: must be <= 3600 ("},
      {"spec.runPolicy.backoffLimit", "101", "spec.runPolicy.backoffLimit: must be <= 100 ("},
      {"spec.runPolicy.activeDeadlineSeconds", "31536001",
       "spec.runPolicy.activeDeadlineSeconds: must be <= 31536000 (a year; 0 is no deadline)"},
      {"spec.runPolicy.ttlSecondsAfterFinished", "31536001",
       "spec.runPolicy.ttlSecondsAfterFinished: must be <= 31536000 (a year)"},
      // And below the minimum, the lower bound alone.
      {"spec.workers.replicas", "0", "spec.workers.replicas: must be >= 1, got 0"},
      {"spec.master.checkpoint.keep", "0", "spec.master.checkpoint.keep: must be >= 1, got 0"},
      {"spec.training.epochs", "-2", "spec.training.epochs: must be > 0, got -2"},
      {"spec.master.updateThreads", "257",
       "spec.master.updateThreads: must be in [0, 256], got 257"},
  };
  for (const auto& c : cases) {
    const std::string error = ErrorOf(WithField(c.path, c.value));
    EXPECT_NE(error.find(c.error), std::string::npos)
        << c.path << " = " << c.value << ": " << error;
  }
}

TEST(TrainingJobTest, ValuesAtTheLimitsParse) {
  TrainingJob job;
  Status s = Parse(R"(
apiVersion: gaptrain.io/v1alpha1
kind: TrainingJob
metadata: {name: big}
spec:
  data: {path: /data, shuffleSeed: 9007199254740991}
  training:
    batchSize: 65536
    epochs: 1000000
    evalEveryUpdates: 1000000000000000
    optimizer: {learningRate: 100, weightDecay: 1, warmupEpochs: 1000000}
    staleness: {maxStaleness: 1000000, gapEpsilon: 1, dcLambda: 100}
  workers: {replicas: 1024, minReplicas: 1024, maxReplicas: 1024}
  master: {checkpoint: {intervalSeconds: 86400, keep: 100}, updateThreads: 256}
  coordinator: {leaseSeconds: 3600}
  runPolicy: {backoffLimit: 100, activeDeadlineSeconds: 31536000, ttlSecondsAfterFinished: 31536000}
)",
                   &job);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(job.workers.replicas, 1024u);
  EXPECT_EQ(job.data.shuffle_seed, 9007199254740991u);
  EXPECT_DOUBLE_EQ(job.training.epochs, 1e6);

  std::string text = WithField("spec.training.maxUpdates", "1000000000000000");
  text = text.replace(text.find("epochs: 10"), 10, "");
  ASSERT_TRUE(Parse(text, &job).ok()) << Parse(text, &job).ToString();
  EXPECT_EQ(job.training.max_updates, 1000000000000000u);
  EXPECT_NE(ErrorOf(WithField("spec.training.maxUpdates", "1000000000000001"))
                .find("spec.training.maxUpdates: must be <= 1000000000000000 (update counts stay "
                      "below 2^53"),
            std::string::npos);
}

TEST(TrainingJobTest, ListsMustBeLists) {
  EXPECT_NE(ErrorOf(WithField("spec.training.optimizer.decay.atFractions", "0.5"))
                .find("spec.training.optimizer.decay.atFractions: must be a list of numbers"),
            std::string::npos);
  EXPECT_NE(ErrorOf(WithField("spec.training.optimizer.decay.atFractions", "[0.5, 1.5]"))
                .find("spec.training.optimizer.decay.atFractions[1]: must be in (0, 1), got 1.5"),
            std::string::npos);
}

TEST(TrainingJobTest, SectionsDataAndTrainingAreRequired) {
  EXPECT_NE(ErrorOf(WithField("spec.data", "~")).find("spec.data: is required"),
            std::string::npos);
  EXPECT_NE(ErrorOf(WithField("spec.training", "~")).find("spec.training: is required"),
            std::string::npos);
  EXPECT_NE(ErrorOf(WithField("spec", "~")).find("spec: is required"), std::string::npos);
}

TEST(TrainingJobTest, NameRules) {
  EXPECT_NE(ErrorOf(WithField("metadata.name", "''")).find("metadata.name: is required"),
            std::string::npos);
  EXPECT_NE(ErrorOf(WithField("metadata.name", std::string(64, 'a')))
                .find("metadata.name: must be at most 63 characters"),
            std::string::npos);
  EXPECT_NE(ErrorOf(WithField("metadata.name", "a.b"))
                .find("metadata.name: must consist of lower-case letters, digits and '-', got "
                      "'a.b'"),
            std::string::npos);
}

// The fields only the operator reads: volumes and their retention.
TEST(TrainingJobTest, ClusterVolumeFields) {
  TrainingJob job;
  ASSERT_TRUE(Parse(kFullJob, &job).ok());
  EXPECT_EQ(job.data.claim_name, "");
  EXPECT_EQ(job.master.checkpoint.volume_size, "5Gi");
  EXPECT_EQ(job.coordinator.state_volume_size, "1Gi");
  EXPECT_EQ(job.run_policy.volume_retention_policy, "Delete");

  std::string text = WithField("spec.data.claimName", "mnist-data");
  text = WithFieldIn(text, "spec.master.checkpoint.volumeSize", "20Gi");
  text = WithFieldIn(text, "spec.master.checkpoint.storageClassName", "fast-ssd");
  text = WithFieldIn(text, "spec.coordinator.stateVolumeSize", "512Mi");
  text = WithFieldIn(text, "spec.runPolicy.volumeRetentionPolicy", "Retain");
  ASSERT_TRUE(Parse(text, &job).ok()) << Parse(text, &job).ToString();
  EXPECT_EQ(job.data.claim_name, "mnist-data");
  EXPECT_EQ(job.master.checkpoint.volume_size, "20Gi");
  EXPECT_EQ(job.master.checkpoint.storage_class_name, "fast-ssd");
  EXPECT_EQ(job.coordinator.state_volume_size, "512Mi");
  EXPECT_EQ(job.run_policy.volume_retention_policy, "Retain");

  EXPECT_NE(ErrorOf(WithField("spec.master.checkpoint.volumeSize", "lots"))
                .find("spec.master.checkpoint.volumeSize: must consist of a Kubernetes quantity "
                      "such as 5Gi or 500M, got 'lots'"),
            std::string::npos);
  EXPECT_NE(ErrorOf(WithField("spec.data.claimName", "My_Data"))
                .find("spec.data.claimName: must consist of a Kubernetes object name"),
            std::string::npos);
  EXPECT_NE(ErrorOf(WithField("spec.runPolicy.volumeRetentionPolicy", "Keep"))
                .find("spec.runPolicy.volumeRetentionPolicy: must be"),
            std::string::npos);
}

// kFullJob with `spec.output: OUTPUT` (a YAML flow mapping).
std::string WithOutput(const std::string& output) {
  return WithLine("\nstatus:", "\n  output: " + output + "\nstatus:");
}

TEST(TrainingJobTest, OutputNamesAClaimAndAPathInIt) {
  TrainingJob job;
  ASSERT_TRUE(Parse(kFullJob, &job).ok());
  EXPECT_EQ(job.output.claim_name, "");  // no export
  EXPECT_EQ(job.output.path, "");

  std::string text = WithOutput("{claimName: mnist-models, path: runs/mnist-ga.pt}");
  ASSERT_TRUE(Parse(text, &job).ok()) << Parse(text, &job).ToString();
  EXPECT_EQ(job.output.claim_name, "mnist-models");
  EXPECT_EQ(job.output.path, "runs/mnist-ga.pt");
  ASSERT_TRUE(Parse(WithOutput("{}"), &job).ok());  // as the API server defaults it

  // Half a destination: the rule between the two fields.
  for (const char* half : {"{claimName: mnist-models}", "{path: mnist.pt}"}) {
    EXPECT_NE(ErrorOf(WithOutput(half))
                  .find("job.yaml: spec.output: set both claimName and path, or neither"),
              std::string::npos)
        << half;
  }
  // A path that could leave the claim, or names a mount point.
  for (const char* path : {"/models/mnist.pt", "../mnist.pt", "models/../../x.pt", "./mnist.pt",
                           "models//mnist.pt", "models/", ".hidden.pt", "a b.pt"}) {
    const std::string error =
        ErrorOf(WithOutput(std::string("{claimName: mnist-models, path: '") + path + "'}"));
    EXPECT_NE(error.find("job.yaml: spec.output.path: must consist of a path relative to the "
                         "claim's root"),
              std::string::npos)
        << path << ": " << error;
  }
  EXPECT_NE(ErrorOf(WithOutput("{claimName: m, path: " + std::string(251, 'a') + "}"))
                .find("spec.output.path: must be at most 250 characters"),
            std::string::npos);
  EXPECT_NE(ErrorOf(WithOutput("{claimName: Models, path: m.pt}"))
                .find("spec.output.claimName: must consist of a Kubernetes object name"),
            std::string::npos);
  EXPECT_NE(ErrorOf(WithOutput("{claimName: m, path: m.pt, file: x}"))
                .find("spec.output.file: unknown field (known here: claimName | path)"),
            std::string::npos);
}

// Data the trainers' code streams: a shard count and the samples they hold
// in all, no path, the trainers' model.
TEST(TrainingJobTest, ShardedDataHasItsShardsAndSamples) {
  auto job_with = [](const std::string& data, const std::string& model) {
    return "apiVersion: gaptrain.io/v1alpha1\nkind: TrainingJob\nmetadata: {name: s}\n"
           "spec:\n  data: " + data + "\n  model: " + model +
           "\n  training: {epochs: 1}\n";
  };
  TrainingJob job;
  const std::string ok =
      job_with("{format: shards, shards: 40, trainSamples: 60000}", "{fromTrainer: true}");
  ASSERT_TRUE(Parse(ok, &job).ok()) << Parse(ok, &job).ToString();
  EXPECT_TRUE(job.data.Sharded());
  EXPECT_TRUE(job.data.ReadByTrainers());
  EXPECT_EQ(job.data.shards, 40u);
  EXPECT_EQ(job.data.Positions(60000), 40u);  // tasks are cut over shards

  EXPECT_NE(ErrorOf(job_with("{format: shards, trainSamples: 100}", "{fromTrainer: true}"))
                .find("spec.data.shards: is required with format shards, and only then"),
            std::string::npos);
  EXPECT_NE(ErrorOf(job_with("{format: custom, trainSamples: 100, shards: 2}",
                             "{fromTrainer: true}"))
                .find("spec.data.shards: is required with format shards, and only then"),
            std::string::npos);
  EXPECT_NE(ErrorOf(job_with("{format: shards, shards: 4}", "{fromTrainer: true}"))
                .find("spec.data.trainSamples: is required with format custom or shards"),
            std::string::npos);
  EXPECT_NE(ErrorOf(job_with("{format: shards, shards: 4, trainSamples: 100}", "{}"))
                .find("spec.model.fromTrainer: must be true with spec.data.format custom or "
                      "shards"),
            std::string::npos);
  EXPECT_NE(ErrorOf(job_with("{format: shards, shards: 0, trainSamples: 100}",
                             "{fromTrainer: true}"))
                .find("spec.data.shards: must be >= 1"),
            std::string::npos);
}

// spec.training.target: a metric and one bound; targetAccuracy is the
// accuracy's shorthand and the two do not mix.
TEST(TrainingJobTest, TargetIsAMetricAndOneBound) {
  TrainingJob job;
  ASSERT_TRUE(Parse(kFullJob, &job).ok());
  EXPECT_FALSE(job.training.target.IsSet());
  auto with_target = [](const std::string& target) {
    return WithLine("targetAccuracy: 0.99", "target: " + target);
  };
  std::string text = with_target("{metric: perplexity, atMost: 20}");
  ASSERT_TRUE(Parse(text, &job).ok()) << Parse(text, &job).ToString();
  EXPECT_EQ(job.training.target.Text(), "perplexity <= 20");
  EXPECT_TRUE(job.training.target.ReachedBy(19.5));
  EXPECT_TRUE(job.training.target.ReachedBy(20));
  EXPECT_FALSE(job.training.target.ReachedBy(20.5));
  EXPECT_EQ(job.training.target_accuracy, 0);
  text = with_target("{metric: top5_accuracy, atLeast: 0.95}");
  ASSERT_TRUE(Parse(text, &job).ok());
  EXPECT_EQ(job.training.target.Text(), "top5_accuracy >= 0.95");
  EXPECT_TRUE(job.training.target.ReachedBy(0.95));
  EXPECT_FALSE(job.training.target.ReachedBy(0.9));
  text = with_target("{metric: r2, atLeast: -0.5}");  // any finite bound
  ASSERT_TRUE(Parse(text, &job).ok());
  EXPECT_TRUE(job.training.target.ReachedBy(0));

  for (const char* bad : {"{metric: perplexity}", "{atMost: 20}",
                          "{metric: f1, atLeast: 0.8, atMost: 0.9}"}) {
    EXPECT_NE(ErrorOf(with_target(bad))
                  .find("job.yaml: spec.training.target: set metric and exactly one of atLeast "
                        "and atMost"),
              std::string::npos)
        << bad;
  }
  EXPECT_NE(ErrorOf(WithLine("targetAccuracy: 0.99",
                             "targetAccuracy: 0.99\n    target: {metric: f1, atLeast: 0.8}"))
                .find("spec.training.targetAccuracy: set target or targetAccuracy, not both"),
            std::string::npos);
  EXPECT_NE(ErrorOf(with_target("{metric: Top-5, atLeast: 0.8}"))
                .find("spec.training.target.metric: must consist of lower-case letters, digits "
                      "and '_'"),
            std::string::npos);
  EXPECT_NE(ErrorOf(with_target("{metric: f1, atLeast: .nan}")).find("spec.training.target.atLeast"),
            std::string::npos);
  EXPECT_TRUE(IsEvaluatorMetric("accuracy"));
  EXPECT_TRUE(IsEvaluatorMetric("loss"));
  EXPECT_FALSE(IsEvaluatorMetric("top5_accuracy"));
  EXPECT_TRUE(IsMetricName("top5_accuracy"));
  EXPECT_TRUE(IsMetricName(std::string(63, 'f')));
  EXPECT_FALSE(IsMetricName(std::string(64, 'f')));
  EXPECT_FALSE(IsMetricName("5top"));
  EXPECT_FALSE(IsMetricName("Top5"));
  EXPECT_FALSE(IsMetricName("top-5"));
  EXPECT_FALSE(IsMetricName(""));
}

// A finished job is kept unless the manifest asks otherwise, as a
// Kubernetes Job without ttlSecondsAfterFinished is; 0 deletes it at once.
TEST(TrainingJobTest, FinishedJobsAreKeptWithoutATtl) {
  TrainingJob job;
  ASSERT_TRUE(Parse(kFullJob, &job).ok());
  EXPECT_EQ(job.run_policy.ttl_seconds_after_finished, kKeepFinishedJob);
  ASSERT_TRUE(Parse(WithField("spec.runPolicy.ttlSecondsAfterFinished", "0"), &job).ok());
  EXPECT_EQ(job.run_policy.ttl_seconds_after_finished, 0u);
  ASSERT_TRUE(Parse(WithField("spec.runPolicy.ttlSecondsAfterFinished", "3600"), &job).ok());
  EXPECT_EQ(job.run_policy.ttl_seconds_after_finished, 3600u);
}

TEST(TrainingJobTest, EvaluatorTemplateIsKept) {
  TrainingJob job;
  const std::string text =
      WithField("spec.evaluator", "{template: {spec: {containers: [{name: e, image: x}]}}}");
  ASSERT_TRUE(Parse(text, &job).ok()) << Parse(text, &job).ToString();
  EXPECT_NE(job.evaluator.template_yaml.find("containers"), std::string::npos);
}

TEST(TrainingJobTest, LimitsThatDependOnTheTrainingSet) {
  TrainingJob job;
  ASSERT_TRUE(Parse(kFullJob, &job).ok());
  EXPECT_TRUE(CheckJobAgainstData(job, 60000).ok());
  EXPECT_TRUE(CheckJobAgainstData(job, 10).ok());  // batches larger than the set are short
  EXPECT_EQ(CheckJobAgainstData(job, 0).message(),
            "spec.data.path: the training set must hold 1 to 2^32 - 1 samples, got 0");
  EXPECT_EQ(CheckJobAgainstData(job, 1ull << 32).code(), Status::Code::kInvalidArgument);
  job.training.epochs = 1e-6;
  EXPECT_EQ(CheckJobAgainstData(job, 60000).message(),
            "spec.training.epochs: 1.0e-6 epochs of 60000 samples cover no sample");
  EXPECT_TRUE(CheckJobAgainstData(job, 1000000).ok());
}

// ../shared/k8s/recorded/NAME.json's response body, as JSON text.
std::string RecordedBody(const std::string& name) {
  const std::string path = RecordedK8sExchange(name);
  std::string data;
  EXPECT_FALSE(path.empty()) << FindSharedDataDir(&data).ToString();
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << "cannot read " << path;
  const nlohmann::json recorded = nlohmann::json::parse(in, nullptr, false);
  EXPECT_FALSE(recorded.is_discarded()) << path;
  if (recorded.is_discarded()) return "";
  return recorded["response"]["body"].dump();
}

TEST(TrainingJobTest, ParsesATrainingJobAsTheApiServerReturnsIt) {
  // Defaults applied by the CRD, uid, resourceVersion, managedFields.
  TrainingJob job;
  Status s = Parse(RecordedBody("trainingjob-create"), &job);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(job.name, "mnist");
  EXPECT_EQ(job.namespace_name, "default");
  EXPECT_EQ(job.labels.at("team"), "a");
  EXPECT_EQ(job.data.path, "/data/mnist");
  EXPECT_DOUBLE_EQ(job.training.epochs, 4);
  EXPECT_DOUBLE_EQ(job.training.optimizer.learning_rate, 0.05);
  EXPECT_EQ(job.workers.replicas, 4u);
  EXPECT_TRUE(job.workers.preemptible);
  EXPECT_NE(job.workers.template_yaml.find("gaptrain:dev"), std::string::npos);

  // Being deleted: deletionTimestamp, deletionGracePeriodSeconds,
  // finalizers; and a status written by the operator.
  s = Parse(RecordedBody("delete-foreground"), &job);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(job.workers.replicas, 6u);
}

TEST(TrainingJobTest, IgnoresEveryMetadataFieldTheServerWrites) {
  TrainingJob job;
  Status s = Parse(R"({
  "apiVersion": "gaptrain.io/v1alpha1", "kind": "TrainingJob",
  "metadata": {
    "name": "mnist", "namespace": "team-a", "generateName": "mnist-",
    "selfLink": "/apis/gaptrain.io/v1alpha1/namespaces/team-a/trainingjobs/mnist",
    "uid": "ead6b621-1939-4817-8ffa-71c9621c5271", "resourceVersion": "230", "generation": 4,
    "creationTimestamp": "2026-11-23T06:32:57Z", "deletionTimestamp": "2026-11-23T06:33:05Z",
    "deletionGracePeriodSeconds": 0, "finalizers": ["foregroundDeletion"],
    "annotations": {"note": "x"}, "labels": {"team": "a"},
    "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "owner",
                         "uid": "1", "controller": true, "blockOwnerDeletion": true}],
    "managedFields": [{"manager": "kubectl", "operation": "Update", "fieldsV1": {}}]
  },
  "spec": {"data": {"path": "/data/mnist"}, "training": {"maxUpdates": 100}},
  "status": {"phase": "Running", "conditions": [{"type": "Running", "status": "True"}],
             "workers": {"active": 1, "summary": "1/1"}}
})",
                   &job);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(job.namespace_name, "team-a");
  EXPECT_EQ(job.training.max_updates, 100u);
  EXPECT_NE(ErrorOf(WithField("metadata.clusterName", "x")).find("metadata.clusterName: unknown"),
            std::string::npos);
}

}  // namespace
}  // namespace gaptrain
