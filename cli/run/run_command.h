// `gaptrain run -f JOB.yaml`: the whole job on this machine, as real
// processes on loopback (job_runner.h). The job file is validated, data
// included, before anything starts.

#ifndef GAPTRAIN_CLI_RUN_RUN_COMMAND_H_
#define GAPTRAIN_CLI_RUN_RUN_COMMAND_H_

#include <string>
#include <vector>

namespace gaptrain {

// Exit codes: 0 the job succeeded, 1 it failed or could not run, 2 bad
// usage or a bad job file (nothing was started), 130 interrupted.
int RunCommand(const std::vector<std::string>& args);

}  // namespace gaptrain

#endif  // GAPTRAIN_CLI_RUN_RUN_COMMAND_H_
