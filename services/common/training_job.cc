#include "services/common/training_job.h"

#include <yaml-cpp/yaml.h>

#include <fstream>
#include <sstream>

#include "services/common/yaml_fields.h"

namespace gaptrain {
namespace {

// The rules between fields; each field's own rules are in its table line.
void Validate(const TrainingJob& job, Status* status) {
  FieldChecker c(status);
  const TrainingSpec& t = job.training;
  const OptimizerSpec& o = t.optimizer;
  const WorkersSpec& w = job.workers;

  c.Require((t.epochs > 0) != (t.max_updates > 0), "spec.training",
            "set exactly one of epochs and maxUpdates");

  const std::string opt = "spec.training.optimizer.";
  c.Require(!o.nesterov || o.momentum > 0, opt + "nesterov", "needs momentum > 0");
  for (size_t i = 1; i < o.decay.at_fractions.size(); ++i) {
    c.Require(o.decay.at_fractions[i] > o.decay.at_fractions[i - 1], opt + "decay.atFractions",
              "must be increasing, got " + FormatNumber(o.decay.at_fractions[i]) + " after " +
                  FormatNumber(o.decay.at_fractions[i - 1]));
  }
  const std::string& rule = t.staleness.rule;
  const bool dana = rule == "dana-zero" || rule == "dana-slim" || rule == "gap-aware-dana";
  c.Require(!(dana && o.nesterov && t.mode == "async"), opt + "nesterov",
            "DANA rules are already look-ahead; set nesterov: false");

  c.Require(w.min_replicas <= w.replicas, "spec.workers.minReplicas",
            "must be <= replicas (" + std::to_string(w.replicas) + ")");
  c.Require(w.max_replicas == 0 || w.max_replicas >= w.replicas, "spec.workers.maxReplicas",
            "must be >= replicas (" + std::to_string(w.replicas) + ")");
  if (t.mode == "sync") {
    c.Require(t.sync.backup_workers < w.replicas, "spec.training.sync.backupWorkers",
              "must be < workers.replicas (" + std::to_string(w.replicas) + ")");
  }
}

}  // namespace

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
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound(path + ": cannot open the job file");
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return Status::DataLoss(path + ": read error");
  return ParseTrainingJob(text.str(), path, job);
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
