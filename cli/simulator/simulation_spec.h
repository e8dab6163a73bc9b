// SimulationSpec: the `spec.simulation` section of a TrainingJob, read by
// `gaptrain simulate`. It describes the virtual cluster (how long each
// worker takes per batch, stragglers, preemptions) and what to sweep
// (rules, worker counts, learning rates, momenta, seeds). Fields absent
// from the sweep default to the job's own settings. docs/simulate.md
// documents every field.

#ifndef GAPTRAIN_CLI_SIMULATOR_SIMULATION_SPEC_H_
#define GAPTRAIN_CLI_SIMULATOR_SIMULATION_SPEC_H_

#include <cstdint>
#include <string>
#include <vector>

#include "services/api/training_job.h"
#include "services/base/status.h"

namespace gaptrain {

// Worker `worker` (index 0..N-1) leaves at virtual time `at`; a
// replacement joins `rejoin_after` later (never when 0).
struct ScheduledPreemption {
  uint32_t worker = 0;
  double at = 0;
  double rejoin_after = 0;
};

struct SimulationSpec {
  // The sweep. Every combination is one run.
  std::vector<uint64_t> workers;       // N values [the job's replicas]
  std::vector<std::string> rules;      // rule names or "sync" [the job's]
  std::vector<double> learning_rates;  // [the job's]
  std::vector<double> momenta;         // [the job's]
  std::vector<uint64_t> seeds = {1};
  std::vector<uint64_t> backup_workers;  // sync runs only [the job's]
  // Also run every combination but N once autoscaled: from the job's
  // replicas within [minReplicas, maxReplicas], by spec.workers.autoscale's
  // policy (services/autoscale), deciding every intervalSeconds of virtual
  // time.
  bool autoscale = false;
  // The summary's table of virtual time to reach this test accuracy
  // (a fraction); 0: no such table.
  double target_accuracy = 0;

  // Batch times: X ~ Gamma(shape, mean/shape) per batch, times `slowdown`
  // for stragglers.
  double time_shape = 100;
  double mean_batch_time = 1.0;
  double straggler_fraction = 0;
  double straggler_slowdown = 1;

  // Preemptions: scheduled ones, plus random ones at `preemption_rate`
  // per live worker per unit of virtual time, each replaced after
  // `rejoin_after` (never when 0).
  std::vector<ScheduledPreemption> preemptions;
  double preemption_rate = 0;
  double rejoin_after = 0;

  double eval_every_epochs = 0.5;      // evaluation period, in epochs
  uint64_t eval_samples = 0;           // test samples per evaluation; 0 = all
  std::string output = "sim-results";  // directory for CSV, table, plot
  uint32_t parallel = 0;               // runs at once; 0 = available CPUs
};

// Parses job.simulation_yaml (may be empty: all defaults) and fills the
// sweep's defaults from `job`. Errors name the field under spec.simulation.
Status ParseSimulationSpec(const TrainingJob& job, SimulationSpec* spec);

}  // namespace gaptrain

#endif  // GAPTRAIN_CLI_SIMULATOR_SIMULATION_SPEC_H_
