#include "services/api/training_job.h"

#include <yaml-cpp/yaml.h>

#include <cmath>
#include <cstdio>

#include "services/api/yaml_fields.h"
#include "services/base/file_contents.h"

namespace gaptrain {
namespace {

// The rules between fields (their words are training_job.h's JobRules); each
// field's own rules are in its table line.
void Validate(const TrainingJob& job, Status* status) {
  FieldChecker c(status);
  auto require = [&c](bool ok, const JobRule& rule, const std::string& detail = "") {
    c.Require(ok, rule.path, rule.why + detail);
  };
  const TrainingSpec& t = job.training;
  const OptimizerSpec& o = t.optimizer;
  const WorkersSpec& w = job.workers;

  require((t.epochs > 0) != (t.max_updates > 0), kRuleOneLength);
  require(!o.nesterov || o.momentum > 0, kRuleNesterovNeedsMomentum);
  for (size_t i = 1; i < o.decay.at_fractions.size(); ++i) {
    require(o.decay.at_fractions[i] > o.decay.at_fractions[i - 1], kRuleDecayFractionsIncrease,
            ", got " + FormatNumber(o.decay.at_fractions[i]) + " after " +
                FormatNumber(o.decay.at_fractions[i - 1]));
  }
  bool dana = false;
  for (const char* rule : kDanaRules) dana |= t.staleness.rule == rule;
  require(!(dana && o.nesterov && t.mode == "async"), kRuleNoNesterovWithDana);

  const std::string replicas = " (" + std::to_string(w.replicas) + ")";
  require(w.min_replicas <= w.replicas, kRuleMinReplicas, replicas);
  require(w.max_replicas == 0 || w.max_replicas >= w.replicas, kRuleMaxReplicas, replicas);
  if (w.autoscale.enabled) {
    require(w.Ceiling() > w.Floor(), kRuleAutoscaleRange,
            " (" + std::to_string(w.Floor()) + ", " + std::to_string(w.Ceiling()) + ")");
    bool gap = false;
    for (const char* rule : kGapAwareRules) gap |= t.staleness.rule == rule;
    require(t.mode == "async" && gap, kRuleAutoscaleGap);
  }
  if (t.mode == "sync") {
    require(t.sync.backup_workers < w.replicas, kRuleBackupWorkers, replicas);
  }
  require(job.output.claim_name.empty() == job.output.path.empty(), kRuleOutputClaimAndPath);
  require(job.data.ReadByTrainers() || !job.data.path.empty(), kRuleDataPath);
  require(job.data.ReadByTrainers() == (job.data.train_samples > 0), kRuleCustomDataSize);
  require(job.data.Sharded() == (job.data.shards > 0), kRuleShardCount);
  require(!job.data.ReadByTrainers() || job.model.from_trainer, kRuleCustomDataFromTrainer);
  require(!job.model.from_trainer || job.model.torchscript.empty(),
          kRuleFromTrainerWithoutTorchscript);
  const TargetSpec& target = t.target;
  const bool bounds = !std::isnan(target.at_least) || !std::isnan(target.at_most);
  if (target.IsSet() || bounds) {
    require(target.IsSet() && std::isnan(target.at_least) != std::isnan(target.at_most),
            kRuleTargetBound);
    require(t.target_accuracy == 0, kRuleOneTarget);
  }
}

}  // namespace

std::string TargetSpec::Text() const {
  return metric + (std::isnan(at_least) ? " <= " + FormatNumber(at_most)
                                        : " >= " + FormatNumber(at_least));
}

std::string TargetSpec::Progress(double value) const {
  char text[32];
  std::snprintf(text, sizeof text, "%.4g", value);
  return metric + " " + text + " (" +
         (std::isnan(at_least) ? "<= " + FormatNumber(at_most) : ">= " + FormatNumber(at_least)) +
         ")";
}

bool IsEvaluatorMetric(const std::string& metric) {
  for (const char* m : kEvaluatorMetrics) {
    if (metric == m) return true;
  }
  return false;
}

TargetSpec JobTarget(const TrainingSpec& training) {
  if (!(training.target_accuracy > 0)) return training.target;
  TargetSpec target;
  target.metric = "accuracy";
  target.at_least = training.target_accuracy;
  return target;
}

bool IsMetricName(const std::string& name) {
  if (name.empty() || name.size() > 63 || !(name[0] >= 'a' && name[0] <= 'z')) return false;
  for (char c : name) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) return false;
  }
  return true;
}

Status ParseTrainingJob(const std::string& yaml_text, const std::string& source,
                        TrainingJob* job) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument(source + ": not valid YAML at line " +
                                   std::to_string(e.mark.line + 1) + ", column " +
                                   std::to_string(e.mark.column + 1) + ": " + e.msg);
  }
  if (!root.IsMap()) {
    return Status::InvalidArgument(source + ": must be a TrainingJob mapping");
  }

  TrainingJob parsed;
  Status status;
  try {
    YamlFields top(root, "", &status);
    std::string api_version, kind;
    top.Read("apiVersion", &api_version);
    top.Read("kind", &kind);
    FieldChecker c(&status);
    c.Require(api_version == "gaptrain.io/v1alpha1", "apiVersion",
              "must be gaptrain.io/v1alpha1, got " + Quoted(api_version));
    c.Require(kind == "TrainingJob", "kind", "must be TrainingJob, got " + Quoted(kind));

    ReadFields(MetadataFields(), top.Map("metadata"), "metadata", &parsed, &status);
    YAML::Node spec = top.Map("spec");
    if (status.ok() && (!spec || spec.IsNull())) {
      status = Status::InvalidArgument("spec: is required");
    }
    ReadFields(SpecFields(), spec, "spec", &parsed, &status);
    top.Ignore("status");
    top.Finish();
  } catch (const YAML::Exception& e) {
    // yaml-cpp throws on malformed nodes we did not anticipate; never let it
    // escape this boundary.
    return Status::InvalidArgument(source + ": " + e.what());
  }
  if (status.ok()) Validate(parsed, &status);
  if (!status.ok()) return Status::InvalidArgument(source + ": " + status.message());
  *job = std::move(parsed);
  return Status::OK();
}

Status LoadTrainingJob(const std::string& path, TrainingJob* job) {
  std::string text;
  GAPTRAIN_RETURN_IF_ERROR(ReadFile(path, &text));
  return ParseTrainingJob(text, path, job);
}

Status CheckJobAgainstData(const TrainingJob& job, uint64_t train_samples) {
  if (train_samples == 0 || train_samples > UINT32_MAX) {
    return Status::InvalidArgument("spec.data.path: the training set must hold 1 to 2^32 - 1 "
                                   "samples, got " + std::to_string(train_samples));
  }
  if (job.training.epochs > 0 && job.training.epochs * static_cast<double>(train_samples) < 1) {
    return Status::InvalidArgument("spec.training.epochs: " + FormatNumber(job.training.epochs) +
                                   " epochs of " + std::to_string(train_samples) +
                                   " samples cover no sample");
  }
  return Status::OK();
}

}  // namespace gaptrain
