#include "services/common/training_job.h"

#include <yaml-cpp/yaml.h>

#include <fstream>
#include <sstream>

#include "services/common/yaml_fields.h"

namespace gaptrain {
namespace {

std::string Num(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

void ReadSpec(const YAML::Node& spec_node, TrainingJob* job, Status* status) {
  YamlFields spec(spec_node, "spec", status);

  YamlFields model(spec.Map("model"), "spec.model", status);
  model.Read("builtin", &job->model.builtin);
  model.Read("torchscript", &job->model.torchscript);
  model.Finish();

  YamlFields data(spec.Map("data"), "spec.data", status);
  data.Read("format", &job->data.format);
  data.Read("path", &job->data.path);
  data.Read("shuffleSeed", &job->data.shuffle_seed);
  data.Finish();

  TrainingSpec& t = job->training;
  YamlFields training(spec.Map("training"), "spec.training", status);
  training.Read("batchSize", &t.batch_size);
  training.Read("epochs", &t.epochs);
  training.Read("maxUpdates", &t.max_updates);
  training.Read("targetAccuracy", &t.target_accuracy);
  training.Read("evalEveryUpdates", &t.eval_every_updates);
  training.Read("mode", &t.mode);
  training.Read("wireType", &t.wire_type);

  OptimizerSpec& o = t.optimizer;
  YamlFields optimizer(training.Map("optimizer"), "spec.training.optimizer", status);
  optimizer.Read("learningRate", &o.learning_rate);
  optimizer.Read("momentum", &o.momentum);
  optimizer.Read("nesterov", &o.nesterov);
  optimizer.Read("weightDecay", &o.weight_decay);
  optimizer.Read("warmupEpochs", &o.warmup_epochs);
  YamlFields decay(optimizer.Map("decay"), "spec.training.optimizer.decay", status);
  decay.Read("type", &o.decay.type);
  decay.Read("atFractions", &o.decay.at_fractions);
  decay.Read("factor", &o.decay.factor);
  decay.Finish();
  optimizer.Finish();

  StalenessSpec& st = t.staleness;
  YamlFields staleness(training.Map("staleness"), "spec.training.staleness", status);
  staleness.Read("rule", &st.rule);
  staleness.Read("gapSource", &st.gap_source);
  staleness.Read("gapPrecision", &st.gap_precision);
  staleness.Read("penalizeWeightDecay", &st.penalize_weight_decay);
  staleness.Read("maxStaleness", &st.max_staleness);
  staleness.Read("gapBeta", &st.gap_beta);
  staleness.Read("gapEpsilon", &st.gap_epsilon);
  staleness.Read("dcLambda", &st.dc_lambda);
  staleness.Read("dcAdaptive", &st.dc_adaptive);
  staleness.Finish();

  YamlFields sync(training.Map("sync"), "spec.training.sync", status);
  sync.Read("backupWorkers", &t.sync.backup_workers);
  sync.Finish();
  training.Finish();

  WorkersSpec& w = job->workers;
  YamlFields workers(spec.Map("workers"), "spec.workers", status);
  workers.Read("replicas", &w.replicas);
  workers.Read("minReplicas", &w.min_replicas);
  workers.Read("maxReplicas", &w.max_replicas);
  workers.Read("preemptible", &w.preemptible);
  workers.Read("restartPolicy", &w.restart_policy);
  workers.ReadRaw("template", &w.template_yaml);
  workers.Finish();

  YamlFields master(spec.Map("master"), "spec.master", status);
  YamlFields checkpoint(master.Map("checkpoint"), "spec.master.checkpoint", status);
  checkpoint.Read("intervalSeconds", &job->master.checkpoint.interval_seconds);
  checkpoint.Read("keep", &job->master.checkpoint.keep);
  checkpoint.Read("path", &job->master.checkpoint.path);
  checkpoint.Finish();
  master.Read("updateThreads", &job->master.update_threads);
  master.ReadRaw("template", &job->master.template_yaml);
  master.Finish();

  YamlFields coordinator(spec.Map("coordinator"), "spec.coordinator", status);
  coordinator.Read("leaseSeconds", &job->coordinator.lease_seconds);
  coordinator.ReadRaw("template", &job->coordinator.template_yaml);
  coordinator.Finish();

  RunPolicySpec& r = job->run_policy;
  YamlFields run_policy(spec.Map("runPolicy"), "spec.runPolicy", status);
  run_policy.Read("backoffLimit", &r.backoff_limit);
  run_policy.Read("activeDeadlineSeconds", &r.active_deadline_seconds);
  run_policy.Read("ttlSecondsAfterFinished", &r.ttl_seconds_after_finished);
  run_policy.Read("cleanPodPolicy", &r.clean_pod_policy);
  run_policy.Read("suspend", &r.suspend);
  run_policy.Finish();

  spec.ReadRaw("simulation", &job->simulation_yaml);
  spec.Finish();
}

void Validate(const TrainingJob& job, Status* status) {
  FieldChecker c(status);
  const TrainingSpec& t = job.training;
  const OptimizerSpec& o = t.optimizer;
  const StalenessSpec& st = t.staleness;
  const WorkersSpec& w = job.workers;

  c.Require(!job.name.empty(), "metadata.name", "is required");
  c.Require(job.name.size() <= 63, "metadata.name", "must be at most 63 characters");
  for (char ch : job.name) {
    bool ok = (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '-';
    c.Require(ok, "metadata.name",
              "must consist of lower-case letters, digits and '-', got " + Quoted(job.name));
    if (!ok) break;
  }

  if (job.model.torchscript.empty()) {
    c.OneOf(job.model.builtin, {"mlp", "lenet5", "resnet20"}, "spec.model.builtin");
  }
  c.OneOf(job.data.format, {"mnist-idx", "cifar10-bin"}, "spec.data.format");
  c.Require(!job.data.path.empty(), "spec.data.path", "is required");

  c.Require(t.batch_size >= 1, "spec.training.batchSize", "must be >= 1");
  c.Require(t.epochs >= 0, "spec.training.epochs", "must be > 0, got " + Num(t.epochs));
  c.Require((t.epochs > 0) != (t.max_updates > 0), "spec.training",
            "set exactly one of epochs and maxUpdates");
  c.Require(t.target_accuracy >= 0 && t.target_accuracy <= 1, "spec.training.targetAccuracy",
            "must be in [0, 1], got " + Num(t.target_accuracy));
  c.Require(t.eval_every_updates >= 1, "spec.training.evalEveryUpdates", "must be >= 1");
  c.OneOf(t.mode, {"async", "sync"}, "spec.training.mode");
  c.OneOf(t.wire_type, {"fp32", "bf16"}, "spec.training.wireType");

  const std::string opt = "spec.training.optimizer.";
  c.Require(o.learning_rate > 0, opt + "learningRate", "must be > 0, got " + Num(o.learning_rate));
  c.Require(o.momentum >= 0 && o.momentum < 1, opt + "momentum",
            "must be in [0, 1), got " + Num(o.momentum));
  c.Require(!o.nesterov || o.momentum > 0, opt + "nesterov", "needs momentum > 0");
  c.Require(o.weight_decay >= 0, opt + "weightDecay", "must be >= 0, got " + Num(o.weight_decay));
  c.Require(o.warmup_epochs >= 0, opt + "warmupEpochs", "must be >= 0");
  c.OneOf(o.decay.type, {"step", "none"}, opt + "decay.type");
  c.Require(o.decay.factor > 0 && o.decay.factor <= 1, opt + "decay.factor",
            "must be in (0, 1], got " + Num(o.decay.factor));
  double previous = 0;
  for (double f : o.decay.at_fractions) {
    c.Require(f > previous && f < 1, opt + "decay.atFractions",
              "must be increasing and in (0, 1), got " + Num(f));
    previous = f;
  }

  const std::string stale = "spec.training.staleness.";
  c.OneOf(st.rule,
          {"none", "staleness-aware", "gap-aware", "dana-zero", "dana-slim", "gap-aware-dana",
           "dc-asgd"},
          stale + "rule");
  c.OneOf(st.gap_source, {"snapshot", "echo"}, stale + "gapSource");
  c.OneOf(st.gap_precision, {"fp32", "bf16"}, stale + "gapPrecision");
  c.Require(st.gap_beta > 0 && st.gap_beta < 1, stale + "gapBeta", "must be in (0, 1)");
  c.Require(st.gap_epsilon > 0, stale + "gapEpsilon", "must be > 0");
  c.Require(st.dc_lambda >= 0, stale + "dcLambda", "must be >= 0");
  bool dana = st.rule == "dana-zero" || st.rule == "dana-slim" || st.rule == "gap-aware-dana";
  c.Require(!(dana && o.nesterov && t.mode == "async"), opt + "nesterov",
            "DANA rules are already look-ahead; set nesterov: false");

  c.Require(w.replicas >= 1, "spec.workers.replicas", "must be >= 1");
  c.Require(w.min_replicas <= w.replicas, "spec.workers.minReplicas",
            "must be <= replicas (" + std::to_string(w.replicas) + ")");
  c.Require(w.max_replicas == 0 || w.max_replicas >= w.replicas, "spec.workers.maxReplicas",
            "must be >= replicas (" + std::to_string(w.replicas) + ")");
  c.OneOf(w.restart_policy, {"Always", "OnFailure", "Never", "ExitCode"},
          "spec.workers.restartPolicy");
  if (t.mode == "sync") {
    c.Require(t.sync.backup_workers < w.replicas, "spec.training.sync.backupWorkers",
              "must be < workers.replicas (" + std::to_string(w.replicas) + ")");
  }

  c.Require(job.master.checkpoint.interval_seconds >= 1,
            "spec.master.checkpoint.intervalSeconds", "must be >= 1");
  c.Require(job.master.checkpoint.keep >= 1, "spec.master.checkpoint.keep", "must be >= 1");
  c.Require(!job.master.checkpoint.path.empty(), "spec.master.checkpoint.path",
            "must not be empty");
  c.Require(job.master.update_threads <= 256, "spec.master.updateThreads",
            "must be in [0, 256] (0: one per CPU the master may use)");
  c.Require(job.coordinator.lease_seconds >= 1, "spec.coordinator.leaseSeconds",
            "must be >= 1");
  c.OneOf(job.run_policy.clean_pod_policy, {"All", "Running", "None"},
          "spec.runPolicy.cleanPodPolicy");
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

    YamlFields metadata(top.Map("metadata"), "metadata", &status);
    metadata.Read("name", &parsed.name);
    metadata.Read("namespace", &parsed.namespace_name);
    metadata.Read("labels", &parsed.labels);
    // Written by Kubernetes; harmless in a manifest read back from a cluster.
    for (const char* k : {"annotations", "uid", "resourceVersion", "generation",
                          "creationTimestamp", "managedFields"}) {
      metadata.Ignore(k);
    }
    metadata.Finish();

    YAML::Node spec = top.Map("spec");
    if (status.ok() && (!spec || spec.IsNull())) {
      status = Status::InvalidArgument("spec: is required");
    }
    ReadSpec(spec, &parsed, &status);
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

}  // namespace gaptrain
