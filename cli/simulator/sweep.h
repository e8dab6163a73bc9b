// The sweep behind `gaptrain simulate`: every combination of the spec's
// rules, worker counts, learning rates, momenta, seeds (and backup workers
// for sync) is one run; runs execute in parallel, one per core, each on a
// single LibTorch thread.

#ifndef GAPTRAIN_CLI_SIMULATOR_SWEEP_H_
#define GAPTRAIN_CLI_SIMULATOR_SWEEP_H_

#include <cstdio>
#include <vector>

#include "cli/simulator/simulation_spec.h"
#include "cli/simulator/simulator.h"
#include "services/api/training_job.h"
#include "services/base/status.h"

namespace gaptrain {

// The runs of the sweep, in a stable order (rule, N, lr, momentum, b, seed).
std::vector<SimulationRun> ExpandSweep(const SimulationSpec& spec);

// Runs them all on `parallel` threads (0 = available CPUs). Writes a live
// progress line to `progress_out` when it is a terminal, else one line per
// finished run; nullptr for silence. Results come back in ExpandSweep order.
Status RunSweep(const TrainingJob& job, const SimulationSpec& spec, const SimulationData& data,
                FILE* progress_out, std::vector<RunResult>* results);

}  // namespace gaptrain

#endif  // GAPTRAIN_CLI_SIMULATOR_SWEEP_H_
