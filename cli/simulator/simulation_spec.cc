#include "cli/simulator/simulation_spec.h"

#include <yaml-cpp/yaml.h>

#include "services/api/yaml_fields.h"

namespace gaptrain {

Status ParseSimulationSpec(const TrainingJob& job, SimulationSpec* spec) {
  SimulationSpec s;
  Status status;
  YAML::Node root;
  try {
    if (!job.simulation_yaml.empty()) root = YAML::Load(job.simulation_yaml);
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument(std::string("spec.simulation: ") + e.what());
  }

  const std::string path = "spec.simulation";
  YamlFields f(root, path, &status);
  f.Read("workers", &s.workers);
  f.Read("rules", &s.rules);
  f.Read("learningRates", &s.learning_rates);
  f.Read("momentum", &s.momenta);
  f.Read("seeds", &s.seeds);
  f.Read("backupWorkers", &s.backup_workers);
  f.Read("autoscale", &s.autoscale);
  f.Read("targetAccuracy", &s.target_accuracy);
  YamlFields time(f.Map("time"), path + ".time", &status);
  time.Read("shape", &s.time_shape);
  time.Read("meanBatchTime", &s.mean_batch_time);
  time.Finish();
  YamlFields stragglers(f.Map("stragglers"), path + ".stragglers", &status);
  stragglers.Read("fraction", &s.straggler_fraction);
  stragglers.Read("slowdown", &s.straggler_slowdown);
  stragglers.Finish();
  YamlFields preemptions(f.Map("preemptions"), path + ".preemptions", &status);
  preemptions.ReadEach("schedule", [&](const YAML::Node& node, const std::string& item_path) {
    ScheduledPreemption p;
    YamlFields item(node, item_path, &status);
    item.Read("worker", &p.worker);
    item.Read("at", &p.at);
    item.Read("rejoinAfter", &p.rejoin_after);
    item.Finish();
    FieldChecker(&status).Require(p.at >= 0 && p.rejoin_after >= 0, item_path,
                                  "at and rejoinAfter must be >= 0");
    s.preemptions.push_back(p);
  });
  preemptions.Read("rate", &s.preemption_rate);
  preemptions.Read("rejoinAfter", &s.rejoin_after);
  preemptions.Finish();
  f.Read("evalEveryEpochs", &s.eval_every_epochs);
  f.Read("evalSamples", &s.eval_samples);
  f.Read("output", &s.output);
  f.Read("parallel", &s.parallel);
  f.Finish();
  if (!status.ok()) return status;

  if (s.workers.empty()) s.workers = {job.workers.replicas};
  if (s.rules.empty()) {
    s.rules = {job.training.mode == "sync" ? "sync" : job.training.staleness.rule};
  }
  if (s.learning_rates.empty()) s.learning_rates = {job.training.optimizer.learning_rate};
  if (s.momenta.empty()) s.momenta = {job.training.optimizer.momentum};
  if (s.backup_workers.empty()) s.backup_workers = {job.training.sync.backup_workers};

  FieldChecker c(&status);
  for (uint64_t n : s.workers) {
    c.Require(n >= 1 && n <= 4096, path + ".workers", "each must be in [1, 4096]");
  }
  for (const std::string& r : s.rules) {
    c.OneOf(r,
            {"sync", "none", "staleness-aware", "gap-aware", "dana-zero", "dana-slim",
             "gap-aware-dana", "dc-asgd"},
            path + ".rules");
  }
  for (double lr : s.learning_rates) {
    c.Require(lr > 0, path + ".learningRates", "each must be > 0");
  }
  for (double m : s.momenta) {
    c.Require(m >= 0 && m < 1, path + ".momentum", "each must be in [0, 1)");
  }
  c.Require(!s.seeds.empty(), path + ".seeds", "needs at least one seed");
  for (uint64_t b : s.backup_workers) {
    for (uint64_t n : s.workers) {
      bool sync = false;
      for (const std::string& r : s.rules) sync = sync || r == "sync";
      c.Require(
          !sync || b < n, path + ".backupWorkers",
          "must be < every workers value (" + std::to_string(b) + " >= " + std::to_string(n) + ")");
    }
  }
  if (s.autoscale) {
    for (const std::string& r : s.rules) {
      bool gap = false;
      for (const char* rule : kGapAwareRules) gap |= r == rule;
      c.Require(
          gap, path + ".autoscale",
          "needs Gap-Aware rules (gap-aware, gap-aware-dana): it scales on the Gap, got " + r);
    }
    c.Require(job.workers.Ceiling() > job.workers.Floor(), path + ".autoscale",
              "needs spec.workers.maxReplicas above minReplicas (0: replicas)");
  }
  c.Require(s.target_accuracy >= 0 && s.target_accuracy <= 1, path + ".targetAccuracy",
            "must be a fraction in [0, 1]");
  c.Require(s.time_shape > 0, path + ".time.shape", "must be > 0");
  c.Require(s.mean_batch_time > 0, path + ".time.meanBatchTime", "must be > 0");
  c.Require(s.straggler_fraction >= 0 && s.straggler_fraction <= 1, path + ".stragglers.fraction",
            "must be in [0, 1]");
  c.Require(s.straggler_slowdown >= 1, path + ".stragglers.slowdown", "must be >= 1");
  c.Require(s.preemption_rate >= 0, path + ".preemptions.rate", "must be >= 0");
  c.Require(s.rejoin_after >= 0, path + ".preemptions.rejoinAfter", "must be >= 0");
  c.Require(s.eval_every_epochs > 0, path + ".evalEveryEpochs", "must be > 0");
  c.Require(!s.output.empty(), path + ".output", "must not be empty");
  if (!status.ok()) return status;
  *spec = std::move(s);
  return Status::OK();
}

}  // namespace gaptrain
