// `gaptrain simulate -f JOB [--output DIR] [--parallel K]`: runs the job's
// simulation sweep and writes results.csv, summary.md and the plots.

#ifndef GAPTRAIN_CLI_SIMULATOR_SIMULATE_COMMAND_H_
#define GAPTRAIN_CLI_SIMULATOR_SIMULATE_COMMAND_H_

#include <string>
#include <vector>

namespace gaptrain {

// Returns the process exit code: 0 on success, 2 for bad usage or a bad
// job file, 1 when the simulation fails.
int SimulateCommand(const std::vector<std::string>& args);

}  // namespace gaptrain

#endif  // GAPTRAIN_CLI_SIMULATOR_SIMULATE_COMMAND_H_
