// Simulator: runs one training job with N virtual workers in virtual time.
// Each event computes a real gradient with the learning library on that
// worker's own copy of the parameters and applies it with the real
// UpdateEngine, so the simulator has no second implementation of any rule.
//
// Async: each worker's next finish time is f ← f + X (BatchTimeSampler);
// the earliest finisher pushes its gradient, pulls the reply as its new
// copy, and starts its next batch. Sync: an iteration takes the N-th
// smallest of N + b draws; the N fastest gradients are averaged (the b late
// ones would be discarded, so they are not computed). BatchNorm running
// statistics are shared by all virtual workers (one model).

#ifndef GAPTRAIN_CLI_SIMULATOR_SIMULATOR_H_
#define GAPTRAIN_CLI_SIMULATOR_SIMULATOR_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "cli/simulator/simulation_spec.h"
#include "services/api/training_job.h"
#include "services/base/status.h"
#include "services/learn/dataset.h"

namespace gaptrain {

// One cell of the sweep.
struct SimulationRun {
  std::string rule;  // a staleness rule name, or "sync"
  // N; 0 for the autoscaled run, which starts at the job's replicas and
  // chooses N in [minReplicas, maxReplicas] (spec.workers.autoscale).
  uint32_t workers = 1;
  double learning_rate = 0.1;
  double momentum = 0.9;
  uint64_t seed = 1;
  uint32_t backup_workers = 0;  // sync only

  bool autoscale() const { return workers == 0; }

  // "gap-aware N=16 lr=0.1 m=0.9 seed=1" (sync adds "b=2"; autoscaled:
  // "N=auto").
  std::string Label() const;
};

struct EvalPoint {
  double virtual_time = 0;
  uint64_t updates = 0;  // master version
  double epoch = 0;      // training samples consumed / training set size
  double accuracy = 0;
  double loss = 0;
  // Means over the pushes since the previous point.
  double mean_staleness = 0;
  double mean_gap = 1;
  double mean_penalty = 1;
  uint32_t live_workers = 0;  // at this point
};

// A change of N by the autoscaler (spec.workers.autoscale), at virtual time.
struct ScaleChange {
  double virtual_time = 0;
  uint32_t from = 0, to = 0;
  std::string message;  // the policy's: what it measured and why
};

struct RunResult {
  SimulationRun run;
  std::vector<EvalPoint> points;  // the last one is the final evaluation
  bool diverged = false;          // a non-finite gradient or loss appeared
  uint64_t pushes = 0;
  uint64_t late_gradients = 0;  // sync: gradients a step did not wait for
  uint64_t preemptions = 0;
  std::vector<ScaleChange> scale_changes;  // autoscaled runs
  // Wall-clock split of the run (seconds).
  double seconds_gradient = 0;  // LibTorch forward/backward
  double seconds_update = 0;    // UpdateEngine push + pull
  double seconds_eval = 0;
  double seconds_total = 0;
};

// Datasets loaded once and shared, read-only, by concurrent runs.
struct SimulationData {
  Dataset train;
  Dataset test;  // already cut to spec.eval_samples
};

// Loads the job's train and test splits.
Status LoadSimulationData(const TrainingJob& job, const SimulationSpec& spec, SimulationData* data);

struct SimulationProgress {
  double fraction = 0;  // of the run's updates
  double epoch = 0;
  double last_accuracy = 0;
};
using ProgressCallback = std::function<void(const SimulationProgress&)>;

// Runs one simulation; `job` supplies the model, data and optimizer, `run`
// overrides rule, N, learning rate, momentum and seed. Thread-safe across
// concurrent calls (one Model per call). `progress` may be empty. With
// `final_parameters`, it receives the master's θ at the end.
Status RunSimulation(const TrainingJob& job, const SimulationSpec& spec, const SimulationRun& run,
                     const SimulationData& data, const ProgressCallback& progress,
                     RunResult* result, std::vector<float>* final_parameters = nullptr);

// The training order the simulator uses: minibatches of `batch_size` from
// EpochPermutation(job.data.shuffle_seed + run.seed, epoch), consumed in
// sequence by whichever worker finishes next (the last batch of an epoch
// may be short).
uint64_t SimulationShuffleSeed(const TrainingJob& job, const SimulationRun& run);

}  // namespace gaptrain

#endif  // GAPTRAIN_CLI_SIMULATOR_SIMULATOR_H_
