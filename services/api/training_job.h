// TrainingJob: the job manifest (apiVersion gaptrain.io/v1alpha1). One
// schema for `gaptrain run -f`, `gaptrain simulate -f` and
// `kubectl apply -f`; docs/trainingjob.md documents every field.
//
// Each struct below is followed by its field table (job_fields.h): the
// parser reads every section through these tables, and the cluster's
// CustomResourceDefinition is generated from them (operator/crd), so the
// two accept the same fields, defaults, choices and ranges. Rules between
// fields are the JobRules below: the parser checks them, and the CRD states
// them as CEL rules with the same messages.
//
// Parsing is strict: an unknown field, a value of the wrong type or out of
// range is an error whose message starts with the field's path
// ("spec.training.optimizer.momentum: must be in [0, 1), got 1.5").
// A TrainingJob as the API server returns it (JSON, with the metadata the
// server writes and a `status`) parses too: those are ignored.

#ifndef GAPTRAIN_SERVICES_API_TRAINING_JOB_H_
#define GAPTRAIN_SERVICES_API_TRAINING_JOB_H_

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "services/api/job_fields.h"
#include "services/base/status.h"

namespace gaptrain {

// Why the upper limits are what they are. epochs · samples / batchSize
// updates must stay exact in a double (the learning-rate schedule and
// progress compute in doubles) and in 64 bits: with at most 2^32 - 1
// samples an epoch, 10^6 epochs stay below 2^53 updates.
constexpr char kEpochsLimit[] =
    "with up to 2^32 samples an epoch, the job's updates stay below 2^53, exact in a double";
constexpr char kUpdatesLimit[] = "update counts stay below 2^53, exact in a double and in JSON";
constexpr char kReplicasLimit[] =
    "the master keeps state for every worker, for gap-aware snapshots a copy of the model each";

// Kubernetes names and sizes the operator writes into the objects it
// creates (the API server would refuse them later, on a pod, with a less
// helpful message).
constexpr char kDnsSubdomainPattern[] = "^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$";
constexpr char kDnsSubdomainMeaning[] =
    "a Kubernetes object name: lower-case letters, digits, '-' and '.'";
constexpr char kQuantityPattern[] = "^[0-9]+(\\.[0-9]+)?(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?$";
constexpr char kQuantityMeaning[] = "a Kubernetes quantity such as 5Gi or 500M";

// The rules between fields, each as the error names it: the field's path
// and why. ParseTrainingJob checks all but those marked "on a cluster"
// (adding the values it saw), the operator those before it creates
// anything; the CRD (operator/crd) states every one as a CEL rule whose
// message is Text(), so `kubectl apply` refuses with the same words the
// operator would fail the job with. One place, so the two cannot drift.
struct JobRule {
  const char* path;
  const char* why;

  // "spec.workers.minReplicas: must be <= replicas"
  std::string Text() const { return std::string(path) + ": " + why; }
};

inline constexpr JobRule kRuleOneLength{"spec.training",
                                        "set exactly one of epochs and maxUpdates"};
inline constexpr JobRule kRuleNesterovNeedsMomentum{"spec.training.optimizer.nesterov",
                                                    "needs momentum > 0"};
inline constexpr JobRule kRuleDecayFractionsIncrease{"spec.training.optimizer.decay.atFractions",
                                                     "must be increasing"};
inline constexpr JobRule kRuleNoNesterovWithDana{
    "spec.training.optimizer.nesterov", "DANA rules are already look-ahead; set nesterov: false"};
inline constexpr JobRule kRuleMinReplicas{"spec.workers.minReplicas", "must be <= replicas"};
inline constexpr JobRule kRuleMaxReplicas{"spec.workers.maxReplicas", "must be >= replicas"};
inline constexpr JobRule kRuleAutoscaleRange{
    "spec.workers.autoscale",
    "needs maxReplicas above minReplicas (0: replicas): the range it chooses N in"};
inline constexpr JobRule kRuleAutoscaleGap{
    "spec.workers.autoscale",
    "needs async training with a Gap-Aware rule (gap-aware or gap-aware-dana): it scales on "
    "the Gap"};
inline constexpr JobRule kRuleBackupWorkers{"spec.training.sync.backupWorkers",
                                            "must be < workers.replicas"};
// On a cluster: NAME-coordinator names a Service, whose name is a DNS-1035
// label (at most 63 characters, a leading letter), and "-coordinator" is
// the longest suffix the operator adds.
inline constexpr size_t kMaxClusterJobNameLength = 51;
inline constexpr JobRule kRuleClusterJobName{
    "metadata.name",
    "on a cluster it must start with a letter and have at most 51 characters "
    "(NAME-coordinator names a Service, a DNS label)"};
// Files gaptrain reads have a path and their own size; data the trainers'
// code reads (format custom or shards) has a size, and its path is the
// user's.
inline constexpr JobRule kRuleDataPath{"spec.data.path",
                                       "is required unless format is custom or shards"};
inline constexpr JobRule kRuleCustomDataSize{
    "spec.data.trainSamples",
    "is required with format custom or shards, and only then (the other formats' files give "
    "the size)"};
inline constexpr JobRule kRuleShardCount{"spec.data.shards",
                                         "is required with format shards, and only then"};
inline constexpr JobRule kRuleCustomDataFromTrainer{
    "spec.model.fromTrainer",
    "must be true with spec.data.format custom or shards (your trainers read the data and "
    "declare the model)"};
// On a cluster, on an update: each master shard's checkpoints hold its
// range of θ (a master refuses another range's), so a job keeps the shards
// it was made with. The CRD states it as a transition rule; no manifest on
// its own breaks it.
inline constexpr JobRule kRuleShardsFixed{
    "spec.master.shards",
    "cannot change once the job exists (each shard's checkpoints hold its range of the "
    "parameters)"};
// The coordinator counts a task's positions in 32 bits.
inline constexpr char kTrainSamplesWhy[] = "positions are counted in 32 bits";
// On a cluster: the claim is mounted at the data path.
inline constexpr JobRule kRuleClaimPathAbsolute{
    "spec.data.path",
    "must be an absolute path when claimName is set (the claim is mounted there)"};
// The model's destination needs both halves: a claim without a path would
// make the operator pick a file name, a path without a claim names nothing.
// What a part of gaptrain that builds the job's model itself (the C++
// worker, the simulator) says of a job whose trainers declare it.
inline constexpr char kNoModelFromTrainer[] =
    "spec.model.fromTrainer: the job's trainers declare the model (the Python SDK's "
    "gaptrain.train and gaptrain.evaluate, run from spec.workers.template and "
    "spec.evaluator.template); gaptrain-worker and gaptrain simulate have none to run";

// A module the trainers declare is not also a TorchScript file.
inline constexpr JobRule kRuleFromTrainerWithoutTorchscript{
    "spec.model.fromTrainer", "the trainers declare the model; leave torchscript unset"};
inline constexpr JobRule kRuleOutputClaimAndPath{"spec.output",
                                                 "set both claimName and path, or neither"};
// A target is a metric and one bound.
inline constexpr JobRule kRuleTargetBound{"spec.training.target",
                                          "set metric and exactly one of atLeast and atMost"};
inline constexpr JobRule kRuleOneTarget{"spec.training.targetAccuracy",
                                        "set target or targetAccuracy, not both"};
// What gaptrain's own evaluator (gaptrain-worker --role evaluator) reports;
// any other metric comes from the user's (the Python SDK's
// gaptrain.evaluate, run from spec.evaluator.template).
inline constexpr const char* kEvaluatorMetrics[] = {"accuracy", "loss"};
inline constexpr char kRuleTargetMetricNeedsUsersEvaluator[] =
    "spec.training.target.metric: gaptrain's evaluator reports accuracy and loss only; another "
    "metric comes from your evaluator (gaptrain.evaluate's eval_fn, run by a command in "
    "spec.evaluator.template)";
// A metric's name, as ReportEvaluation and Prometheus labels take it.
constexpr char kMetricNamePattern[] = "^[a-z][a-z0-9_]{0,62}$";
constexpr char kMetricNameMeaning[] =
    "lower-case letters, digits and '_', starting with a letter, at most 63 characters";

// The update rules that measure a Gap (kRuleAutoscaleGap).
inline constexpr const char* kGapAwareRules[] = {"gap-aware", "gap-aware-dana"};

// The update rules that look ahead already (kRuleNoNesterovWithDana).
inline constexpr const char* kDanaRules[] = {"dana-zero", "dana-slim", "gap-aware-dana"};

// How many step-decay fractions a job may list: the API server bounds what
// checking that they increase may cost (a CEL rule over every pair).
inline constexpr uint32_t kMaxDecayFractions = 100;

struct ModelSpec {
  std::string builtin = "mlp";
  std::string torchscript;  // overrides builtin
  // The trainers declare the model (the Python SDK: the first trainer's
  // module gives its layout and initial values); builtin is then unused.
  bool from_trainer = false;
};

inline const FieldSectionOf<ModelSpec>& ModelFields() {
  using S = ModelSpec;
  using F = FieldsOf<S>;
  static const FieldSectionOf<S> fields({
      F::Text("builtin", &S::builtin, "a built-in network").OneOf({"mlp", "lenet5", "resnet20"}),
      F::Text("torchscript", &S::torchscript,
              "path of a user's scripted module (forward(x) -> logits); overrides builtin"),
      F::Flag("fromTrainer", &S::from_trainer,
              "the trainers declare the model: the first one's module gives the master its "
              "layout and initial values (the Python SDK; builtin is unused)"),
  });
  return fields;
}

struct DataSpec {
  // mnist-idx | cifar10-bin: files gaptrain reads; custom: the trainers'
  // own code reads the data (the Python SDK's map-style dataset),
  // train_samples long; shards: the trainers' code streams it, `shards`
  // shards (an iterable dataset per shard) of train_samples in all.
  std::string format = "mnist-idx";
  std::string path;
  uint64_t train_samples = 0;  // custom: len(dataset); shards: all shards' samples
  uint64_t shards = 0;         // format shards: how many
  uint64_t shuffle_seed = 1;
  std::string claim_name;  // on a cluster: the PVC that holds `path`

  bool Sharded() const { return format == "shards"; }
  // The trainers' own code reads the data: gaptrain reads no files.
  bool ReadByTrainers() const { return format == "custom" || Sharded(); }
  // What the coordinator's task positions count: samples, or shards.
  uint64_t Positions(uint64_t samples) const { return Sharded() ? shards : samples; }
};

inline const FieldSectionOf<DataSpec>& DataFields() {
  using S = DataSpec;
  using F = FieldsOf<S>;
  static const FieldSectionOf<S> fields({
      F::Text("format", &S::format,
              "mnist-idx (MNIST, Fashion-MNIST) or cifar10-bin, files gaptrain reads; custom: "
              "your trainers' code reads the data (a map-style dataset); shards: your trainers' "
              "code streams it, shard by shard (an iterable dataset)")
          .OneOf({"mnist-idx", "cifar10-bin", "custom", "shards"}),
      F::Text("path", &S::path,
              "the directory that holds the dataset files; with format custom or shards, where "
              "your code finds them (optional)"),
      F::Integer("trainSamples", &S::train_samples,
                 "format custom: the training set's size in samples, len(dataset); the "
                 "coordinator cuts tasks over it and every trainer checks it. Format shards: "
                 "the samples of all shards together, the length of an epoch for the "
                 "learning-rate schedule")
          .AtLeast(1).Limit(4294967295.0, kTrainSamplesWhy).NoDefault(),
      F::Integer("shards", &S::shards,
                 "format shards: how many shards the training set has; each task is one shard, "
                 "the shards' order shuffled per epoch, and every trainer's dataset has as many")
          .AtLeast(1).Limit(4294967295.0, kTrainSamplesWhy).NoDefault(),
      F::Integer("shuffleSeed", &S::shuffle_seed, "seed of the per-epoch shuffle")
          .Limit(9007199254740991.0, "larger seeds lose digits in JSON readers that use doubles"),
      F::Text("claimName", &S::claim_name,
              "on a cluster: a PersistentVolumeClaim holding the dataset, mounted read-only at "
              "path in every pod")
          .MaxLength(253)
          .Pattern(kDnsSubdomainPattern, kDnsSubdomainMeaning),
  });
  return fields;
}

struct DecaySpec {
  std::string type = "step";
  std::vector<double> at_fractions = {0.5, 0.75};
  double factor = 0.1;
};

inline const FieldSectionOf<DecaySpec>& DecayFields() {
  using S = DecaySpec;
  using F = FieldsOf<S>;
  static const FieldSectionOf<S> fields({
      F::Text("type", &S::type, "step: multiply η by factor at each fraction; none")
          .OneOf({"step", "none"}),
      F::Numbers("atFractions", &S::at_fractions, "increasing fractions of the job's length")
          .Above(0).Below(1)
          .MaxItems(kMaxDecayFractions),
      F::Number("factor", &S::factor, "what η is multiplied by at each fraction")
          .Above(0).AtMost(1),
  });
  return fields;
}

struct OptimizerSpec {
  double learning_rate = 0.1;
  double momentum = 0.9;
  bool nesterov = false;
  double weight_decay = 1e-4;
  double warmup_epochs = 0;  // linear from lr/N to lr
  DecaySpec decay;
};

inline const FieldSectionOf<OptimizerSpec>& OptimizerFields() {
  using S = OptimizerSpec;
  using F = FieldsOf<S>;
  static const FieldSectionOf<S> fields({
      F::Number("learningRate", &S::learning_rate, "η, the step size").Above(0)
          .Limit(100, "linear scaling of 0.1 to a 65536 batch gives 25.6; fp32 updates "
                      "overflow within a few steps beyond"),
      F::Number("momentum", &S::momentum, "γ; for dana-slim the workers' momentum")
          .AtLeast(0).Below(1),
      F::Flag("nesterov", &S::nesterov, "Nesterov's look-ahead; needs momentum, not with DANA"),
      F::Number("weightDecay", &S::weight_decay, "λ, added to the gradient as λθ").AtLeast(0)
          .Limit(1, "λ = 1 already shrinks θ by η every update"),
      F::Number("warmupEpochs", &S::warmup_epochs, "linear warm-up from η/N to η").AtLeast(0)
          .Limit(1e6, kEpochsLimit),
      F::Section("decay", &S::decay, DecayFields(), "the step decay of η"),
  });
  return fields;
}

struct StalenessSpec {
  std::string rule = "gap-aware";
  std::string gap_source = "snapshot";
  std::string gap_precision = "fp32";
  bool penalize_weight_decay = true;
  uint64_t max_staleness = 0;  // 0 = unbounded
  double gap_beta = 0.999;
  double gap_epsilon = 1e-8;
  double dc_lambda = 0.04;
  bool dc_adaptive = false;
};

inline const FieldSectionOf<StalenessSpec>& StalenessFields() {
  using S = StalenessSpec;
  using F = FieldsOf<S>;
  static const FieldSectionOf<S> fields({
      F::Text("rule", &S::rule, "how the master treats stale gradients (docs/algorithms.md)")
          .OneOf({"none", "staleness-aware", "gap-aware", "dana-zero", "dana-slim",
                  "gap-aware-dana", "dc-asgd"}),
      F::Text("gapSource", &S::gap_source, "where the master finds a worker's copy of θ")
          .OneOf({"snapshot", "echo"}),
      F::Text("gapPrecision", &S::gap_precision, "storage of snapshots, wire type of echoes")
          .OneOf({"fp32", "bf16"}),
      F::Flag("penalizeWeightDecay", &S::penalize_weight_decay,
              "divide (g + λθ) by the gap, rather than g alone"),
      F::Integer("maxStaleness", &S::max_staleness, "drop pushes staler than this; 0: unbounded")
          .Limit(1e6, "a push a million updates stale is stale by any measure; 0 is unbounded"),
      F::Number("gapBeta", &S::gap_beta, "β of the gap's running mean square").Above(0).Below(1),
      F::Number("gapEpsilon", &S::gap_epsilon, "ε of C = η_max(√r̂ + ε)").Above(0)
          .Limit(1, "ε guards √r̂ against 0; at 1 it outweighs any gradient's scale"),
      F::Number("dcLambda", &S::dc_lambda, "DC-ASGD's λ (λ₀ when adaptive)").AtLeast(0)
          .Limit(100, "the DC-ASGD paper uses 0.04 to 2; more outweighs the gradient"),
      F::Flag("dcAdaptive", &S::dc_adaptive, "DC-ASGD's adaptive λ"),
  });
  return fields;
}

struct SyncSpec {
  uint32_t backup_workers = 0;
};

inline const FieldSectionOf<SyncSpec>& SyncFields() {
  using S = SyncSpec;
  using F = FieldsOf<S>;
  static const FieldSectionOf<S> fields({
      F::Integer("backupWorkers", &S::backup_workers,
                 "a step averages the first (live workers - backupWorkers) gradients")
          .Limit(1023, "fewer than workers.replicas, which is at most 1024"),
  });
  return fields;
}

// A target's bound: any finite number of a sane size (a metric's value is
// a double; one past 1e15 is no measurement).
constexpr double kMetricBoundLimit = 1e15;
constexpr char kMetricBoundWhy[] = "a metric's bound, in [-1e15, 1e15]";

// `spec.training.target`: the job succeeds once an evaluation's metric
// reaches a bound: accuracy or loss, or a metric of the user's evaluator
// (top-5 accuracy, perplexity, F1...). targetAccuracy: X is
// {metric: accuracy, atLeast: X}.
struct TargetSpec {
  std::string metric;  // "" = no target
  // Exactly one is set; NaN = unset (any finite bound is meaningful).
  double at_least = std::numeric_limits<double>::quiet_NaN();
  double at_most = std::numeric_limits<double>::quiet_NaN();

  bool IsSet() const { return !metric.empty(); }
  // Whether `value` reaches the bound.
  bool ReachedBy(double value) const {
    return std::isnan(at_least) ? value <= at_most : value >= at_least;
  }
  // "perplexity <= 20"
  std::string Text() const;
  // The metric at `value` against the bound: "perplexity 18.41 (<= 20)"
  // (4 significant digits).
  std::string Progress(double value) const;
};

inline const FieldSectionOf<TargetSpec>& TargetFields() {
  using S = TargetSpec;
  using F = FieldsOf<S>;
  static const FieldSectionOf<S> fields({
      F::Text("metric", &S::metric,
              "accuracy, loss, or a metric your evaluator's eval_fn returns")
          .Pattern(kMetricNamePattern, kMetricNameMeaning),
      F::Number("atLeast", &S::at_least, "succeed once the metric is at least this")
          .AtLeast(-kMetricBoundLimit).Limit(kMetricBoundLimit, kMetricBoundWhy).NoDefault(),
      F::Number("atMost", &S::at_most, "succeed once the metric is at most this")
          .AtLeast(-kMetricBoundLimit).Limit(kMetricBoundLimit, kMetricBoundWhy).NoDefault(),
  });
  return fields;
}

struct TrainingSpec {
  uint32_t batch_size = 128;    // per worker
  double epochs = 0;            // one of epochs / max_updates is set
  uint64_t max_updates = 0;
  double target_accuracy = 0;   // 0 = none; stop when the evaluator reports it
  TargetSpec target;
  uint64_t eval_every_updates = 500;
  OptimizerSpec optimizer;
  std::string mode = "async";
  // Values on the wire for pulled parameters and pushed gradients: fp32 |
  // bf16 (half the bytes; the master keeps θ and its state in fp32).
  std::string wire_type = "fp32";
  StalenessSpec staleness;
  SyncSpec sync;
};

inline const FieldSectionOf<TrainingSpec>& TrainingFields() {
  using S = TrainingSpec;
  using F = FieldsOf<S>;
  static const FieldSectionOf<S> fields({
      F::Integer("batchSize", &S::batch_size, "samples per batch, per worker").AtLeast(1)
          .Limit(65536, "a batch's activations must fit in one worker's memory"),
      F::Number("epochs", &S::epochs, "the job's length in epochs; or maxUpdates").Above(0)
          .Limit(1e6, kEpochsLimit).NoDefault(),
      F::Integer("maxUpdates", &S::max_updates, "the job's length in master updates; or epochs")
          .AtLeast(1).Limit(1e15, kUpdatesLimit).NoDefault(),
      F::Number("targetAccuracy", &S::target_accuracy,
                "succeed when the evaluator reports this test accuracy; 0: none")
          .AtLeast(0).AtMost(1),
      F::Section("target", &S::target, TargetFields(),
                 "succeed when the evaluator reports a metric at or past a bound"),
      F::Integer("evalEveryUpdates", &S::eval_every_updates, "evaluator period in master updates")
          .AtLeast(1).Limit(1e15, "no job is longer, so a longer period would never evaluate"),
      F::Section("optimizer", &S::optimizer, OptimizerFields(), "SGD with momentum"),
      F::Text("mode", &S::mode, "async or sync").OneOf({"async", "sync"}),
      F::Text("wireType", &S::wire_type, "values on the wire for pulled θ and pushed gradients")
          .OneOf({"fp32", "bf16"}),
      F::Section("staleness", &S::staleness, StalenessFields(), "async mode's update rule"),
      F::Section("sync", &S::sync, SyncFields(), "sync mode's backup workers"),
  });
  return fields;
}

// `spec.workers.autoscale`: the job chooses its own number of trainers in
// [minReplicas, maxReplicas] from the Gap it measures (docs/operator.md,
// "Autoscaling"; services/autoscale applies it).
struct AutoscaleSpec {
  bool enabled = false;
  // The mean Gap of recent pushes N is kept under. 2.5 from docs/results.md
  // ("Gap-aware autoscaling"): GA+DANA's Gap is about 2 at one to four
  // workers before the first decay, 3 at sixteen.
  double max_gap = 2.5;
  double min_gain = 0.5;           // an added trainer must add this share of a trainer's updates/s
  double interval_seconds = 60;    // between decisions; the window rates and Gaps are averaged over
};

inline const FieldSectionOf<AutoscaleSpec>& AutoscaleFields() {
  using S = AutoscaleSpec;
  using F = FieldsOf<S>;
  static const FieldSectionOf<S> fields({
      F::Flag("enabled", &S::enabled,
              "choose the number of trainers in [minReplicas, maxReplicas] from the Gap"),
      F::Number("maxGap", &S::max_gap,
                "grow while the mean Gap of recent pushes stays under this; shrink above it")
          .Above(1)
          .Limit(1e6, "a Gap is 1 + |Δ|/C: a bound of a million never binds"),
      F::Number("minGain", &S::min_gain,
                "keep a growth only if each added trainer added this share of one trainer's "
                "updates/s")
          .AtLeast(0)
          .AtMost(1),
      F::Number("intervalSeconds", &S::interval_seconds,
                "seconds between decisions, the window rates and Gaps are measured over")
          .AtLeast(1)
          .Limit(86400, "a day between decisions is no autoscaling"),
  });
  return fields;
}

struct WorkersSpec {
  uint32_t replicas = 1;
  uint32_t min_replicas = 0;    // 0 = replicas
  uint32_t max_replicas = 0;    // 0 = replicas
  bool preemptible = false;
  std::string restart_policy = "OnFailure";
  std::string template_yaml;    // PodTemplateSpec, passed through
  AutoscaleSpec autoscale;

  // The range the number of trainers may take: [minReplicas, maxReplicas],
  // each 0 meaning replicas.
  uint32_t Floor() const { return min_replicas == 0 ? replicas : min_replicas; }
  uint32_t Ceiling() const { return max_replicas == 0 ? replicas : max_replicas; }
};

inline const FieldSectionOf<WorkersSpec>& WorkersFields() {
  using S = WorkersSpec;
  using F = FieldsOf<S>;
  static const FieldSectionOf<S> fields({
      F::Integer("replicas", &S::replicas, "trainers").AtLeast(1).Limit(1024, kReplicasLimit),
      F::Integer("minReplicas", &S::min_replicas,
                 "the job runs while this many are live; 0: replicas")
          .Limit(1024, kReplicasLimit),
      F::Integer("maxReplicas", &S::max_replicas, "elastic upper bound; 0: replicas")
          .Limit(1024, kReplicasLimit),
      F::Flag("preemptible", &S::preemptible, "add the operator's spot tolerations and affinity"),
      F::Text("restartPolicy", &S::restart_policy, "when a trainer's pod is restarted")
          .OneOf({"Always", "OnFailure", "Never", "ExitCode"}),
      F::Object("template", &S::template_yaml, "the trainers' PodTemplateSpec"),
      F::Section("autoscale", &S::autoscale, AutoscaleFields(),
                 "Gap-aware autoscaling of the trainers"),
  });
  return fields;
}

struct CheckpointSpec {
  uint32_t interval_seconds = 60;
  uint32_t keep = 3;
  std::string path = "checkpoints";
  // On a cluster: the PersistentVolumeClaim NAME-checkpoints.
  std::string volume_size = "5Gi";
  std::string storage_class_name;  // "": the cluster's default class
};

inline const FieldSectionOf<CheckpointSpec>& CheckpointFields() {
  using S = CheckpointSpec;
  using F = FieldsOf<S>;
  static const FieldSectionOf<S> fields({
      F::Integer("intervalSeconds", &S::interval_seconds, "seconds between checkpoints")
          .AtLeast(1).Limit(86400, "a day, the most training a failure may lose"),
      F::Integer("keep", &S::keep, "checkpoints kept").AtLeast(1)
          .Limit(100, "each holds θ and the rule's state on disk"),
      F::Text("path", &S::path, "the checkpoint directory").NonEmpty(),
      F::Text("volumeSize", &S::volume_size,
              "on a cluster: the size of the checkpoints' PersistentVolumeClaim")
          .Pattern(kQuantityPattern, kQuantityMeaning),
      F::Text("storageClassName", &S::storage_class_name,
              "on a cluster: the checkpoints' StorageClass; empty: the cluster's default")
          .MaxLength(253)
          .Pattern(kDnsSubdomainPattern, kDnsSubdomainMeaning),
  });
  return fields;
}

struct MasterSpec {
  // θ is cut into this many ranges, each held by its own master process
  // (pod), with its own rule state, checkpoints and metrics
  // (services/engine/shard_plan.h).
  uint32_t shards = 1;
  CheckpointSpec checkpoint;
  uint32_t update_threads = 0;  // 0: one per CPU the master may use
  std::string template_yaml;
};

inline const FieldSectionOf<MasterSpec>& MasterFields() {
  using S = MasterSpec;
  using F = FieldsOf<S>;
  static const FieldSectionOf<S> fields({
      F::Integer("shards", &S::shards,
                 "parameter-server processes θ is split over, each holding a contiguous range "
                 "of it with its own rule state, checkpoints and metrics")
          .AtLeast(1)
          .Limit(64, "each shard is a pod every trainer holds a connection to"),
      F::Section("checkpoint", &S::checkpoint, CheckpointFields(), "the master's checkpoints"),
      F::Integer("updateThreads", &S::update_threads,
                 "threads that apply each update; 0: one per CPU the master may use")
          .AtMost(256),
      F::Object("template", &S::template_yaml, "the master's PodTemplateSpec"),
  });
  return fields;
}

struct EvaluatorSpec {
  // On spot nodes with the trainers; else, as the master and the
  // coordinator, on on-demand nodes where there are any.
  bool preemptible = false;
  std::string template_yaml;
};

inline const FieldSectionOf<EvaluatorSpec>& EvaluatorFields() {
  using S = EvaluatorSpec;
  using F = FieldsOf<S>;
  static const FieldSectionOf<S> fields({
      F::Flag("preemptible", &S::preemptible,
              "add the operator's spot tolerations and affinity; else the evaluator prefers "
              "on-demand nodes, as the master and the coordinator do"),
      F::Object("template", &S::template_yaml, "the evaluator's PodTemplateSpec"),
  });
  return fields;
}

struct CoordinatorSpec {
  uint32_t lease_seconds = 10;
  // On a cluster: the PersistentVolumeClaim NAME-coordinator-state.
  std::string state_volume_size = "1Gi";
  std::string storage_class_name;  // "": the cluster's default class
  std::string template_yaml;
};

inline const FieldSectionOf<CoordinatorSpec>& CoordinatorFields() {
  using S = CoordinatorSpec;
  using F = FieldsOf<S>;
  static const FieldSectionOf<S> fields({
      F::Integer("leaseSeconds", &S::lease_seconds, "a worker silent this long is gone")
          .AtLeast(1).Limit(3600, "a dead worker keeps its tasks until its lease ends"),
      F::Text("stateVolumeSize", &S::state_volume_size,
              "on a cluster: the size of the coordinator's state PersistentVolumeClaim")
          .Pattern(kQuantityPattern, kQuantityMeaning),
      F::Text("storageClassName", &S::storage_class_name,
              "on a cluster: the state volume's StorageClass; empty: the cluster's default")
          .MaxLength(253)
          .Pattern(kDnsSubdomainPattern, kDnsSubdomainMeaning),
      F::Object("template", &S::template_yaml, "the coordinator's PodTemplateSpec"),
  });
  return fields;
}

// ttlSecondsAfterFinished when the manifest has none: a finished job is
// kept until someone deletes it, as Kubernetes Jobs and Kubeflow's jobs are
// (its model and checkpoints go with it).
inline constexpr uint64_t kKeepFinishedJob = UINT64_MAX;

struct RunPolicySpec {
  uint32_t backoff_limit = 3;
  uint64_t active_deadline_seconds = 0;  // 0 = none
  // Seconds after completion until the operator deletes the job (0: at
  // once); kKeepFinishedJob when absent: never.
  uint64_t ttl_seconds_after_finished = kKeepFinishedJob;
  std::string clean_pod_policy = "Running";
  bool suspend = false;
  std::string volume_retention_policy = "Delete";
  // On a cluster: a job whose ready trainers stay below minReplicas this
  // long gives their pods back for a while (gang_release.h); 0: never.
  uint64_t schedule_timeout_seconds = 0;
};

inline const FieldSectionOf<RunPolicySpec>& RunPolicyFields() {
  using S = RunPolicySpec;
  using F = FieldsOf<S>;
  static const FieldSectionOf<S> fields({
      F::Integer("backoffLimit", &S::backoff_limit,
                 "genuine failures tolerated; preemptions do not count")
          .Limit(100, "each failure restarts the job from its last checkpoint"),
      F::Integer("activeDeadlineSeconds", &S::active_deadline_seconds,
                 "fail the job after running this long; 0: never")
          .Limit(31536000, "a year; 0 is no deadline"),
      F::Integer("ttlSecondsAfterFinished", &S::ttl_seconds_after_finished,
                 "delete a finished job this long after it finished (0: at once); absent: "
                 "never")
          .Limit(31536000, "a year")
          .NoDefault(),
      F::Text("cleanPodPolicy", &S::clean_pod_policy, "which pods are deleted when the job ends")
          .OneOf({"All", "Running", "None"}),
      F::Flag("suspend", &S::suspend, "stop the job's pods; false resumes"),
      F::Integer("scheduleTimeoutSeconds", &S::schedule_timeout_seconds,
                 "on a cluster: when fewer than minReplicas trainers have been ready this "
                 "long, delete the trainers' pods (giving their nodes back to other jobs) and "
                 "make them again after as long and up to half as much again; 0: wait")
          .Limit(86400, "a day"),
      F::Text("volumeRetentionPolicy", &S::volume_retention_policy,
              "Delete: the job's volumes go with it; Retain: they outlive it")
          .OneOf({"Delete", "Retain"}),
  });
  return fields;
}

// Where the operator writes the trained model when the job succeeds: the
// parameters as `gaptrain export` writes them (a PyTorch state_dict), at
// `path` inside the PersistentVolumeClaim `claim_name`. Both empty: no
// export. `gaptrain run` ignores it (its run directory holds the
// checkpoints; `gaptrain export --run-dir` reads them).
struct OutputSpec {
  std::string claim_name;
  std::string path;  // relative to the claim's root: "models/mnist.pt"
};

// A path inside a claim as a file name the export pod can open under the
// claim's mount point: no leading '/', no empty, "." or ".." component
// (a component may not start with '.'), so it cannot leave the claim. The
// same regex in RE2 (the API server's) and ECMAScript (the parser's).
constexpr char kClaimPathPattern[] =
    "^[A-Za-z0-9_-][A-Za-z0-9._-]*(/[A-Za-z0-9_-][A-Za-z0-9._-]*)*$";
constexpr char kClaimPathMeaning[] =
    "a path relative to the claim's root: names of letters, digits, '.', '_' and '-', not "
    "starting with '.', joined by '/'";

inline const FieldSectionOf<OutputSpec>& OutputFields() {
  using S = OutputSpec;
  using F = FieldsOf<S>;
  static const FieldSectionOf<S> fields({
      F::Text("claimName", &S::claim_name,
              "on a cluster: the PersistentVolumeClaim the trained model is written to when the "
              "job succeeds")
          .MaxLength(253)
          .Pattern(kDnsSubdomainPattern, kDnsSubdomainMeaning),
      F::Text("path", &S::path,
              "the model's file inside the claim, relative to its root (a PyTorch state_dict; "
              "a model card PATH.json beside it)")
          .MaxLength(250)  // PATH.json stays within a file name's 255 bytes
          .Pattern(kClaimPathPattern, kClaimPathMeaning),
  });
  return fields;
}

struct TrainingJob {
  std::string name;
  std::string namespace_name = "default";
  std::map<std::string, std::string> labels;
  ModelSpec model;
  DataSpec data;
  TrainingSpec training;
  WorkersSpec workers;
  MasterSpec master;
  EvaluatorSpec evaluator;
  CoordinatorSpec coordinator;
  RunPolicySpec run_policy;
  OutputSpec output;
  // The raw `spec.simulation` section (read by `gaptrain simulate` only);
  // empty when absent.
  std::string simulation_yaml;
};

// `metadata`. Kubernetes validates it on a cluster (the CRD can restrict
// only the name); the keys the API server writes are accepted and ignored.
inline const FieldSectionOf<TrainingJob>& MetadataFields() {
  using S = TrainingJob;
  using F = FieldsOf<S>;
  static const FieldSectionOf<S> fields(
      {
          F::Text("name", &S::name, "the job's name; it names pods and services")
              .Required()
              .MaxLength(63)
              .Pattern("^[a-z0-9-]+$", "lower-case letters, digits and '-'"),
          F::Text("namespace", &S::namespace_name, "the job's namespace"),
          F::StringMap("labels", &S::labels, "copied onto every pod"),
      },
      {"annotations", "uid", "resourceVersion", "generation", "creationTimestamp",
       "managedFields", "ownerReferences", "finalizers", "deletionTimestamp",
       "deletionGracePeriodSeconds", "generateName", "selfLink"});
  return fields;
}

// `spec`.
inline const FieldSectionOf<TrainingJob>& SpecFields() {
  using S = TrainingJob;
  using F = FieldsOf<S>;
  static const FieldSectionOf<S> fields({
      F::Section("model", &S::model, ModelFields(), "the network"),
      F::Section("data", &S::data, DataFields(), "the dataset").Required(),
      F::Section("training", &S::training, TrainingFields(), "length, optimizer, update rule")
          .Required(),
      F::Section("workers", &S::workers, WorkersFields(), "the trainers"),
      F::Section("master", &S::master, MasterFields(), "the parameter server"),
      F::Section("evaluator", &S::evaluator, EvaluatorFields(), "the process that scores θ"),
      F::Section("coordinator", &S::coordinator, CoordinatorFields(), "tasks and membership"),
      F::Section("runPolicy", &S::run_policy, RunPolicyFields(), "failures, deadlines, cleanup"),
      F::Section("output", &S::output, OutputFields(),
                 "on a cluster: where the trained model is written when the job succeeds"),
      F::Object("simulation", &S::simulation_yaml,
                "virtual workers for `gaptrain simulate` (docs/simulate.md)"),
  });
  return fields;
}

// Parses and validates a manifest. `source` names it in errors ("job.yaml").
Status ParseTrainingJob(const std::string& yaml_text, const std::string& source,
                        TrainingJob* job);
// Reads `path` and parses it.
Status LoadTrainingJob(const std::string& path, TrainingJob* job);

// Whether gaptrain's own evaluator reports `metric` (kEvaluatorMetrics).
bool IsEvaluatorMetric(const std::string& metric);
// Whether `name` matches kMetricNamePattern.
bool IsMetricName(const std::string& name);
// What ends the job early: spec.training.target, or targetAccuracy as
// {accuracy, atLeast}; unset when neither is.
TargetSpec JobTarget(const TrainingSpec& training);

// The limits that depend on the training set, checked where its size is
// known (the master, the coordinator, `gaptrain run`, `gaptrain
// simulate`): it holds 1 to 2^32 - 1 samples (the epoch limit assumes so),
// and `epochs` covers at least one of them. Errors name the field.
Status CheckJobAgainstData(const TrainingJob& job, uint64_t train_samples);

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_API_TRAINING_JOB_H_
