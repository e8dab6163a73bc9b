// `gaptrain status`: a running job's status, from its coordinator. Finds a
// local job through its run directory (gaptrain run writes the address and
// the token there), or any job, e.g. on a cluster through
// `kubectl port-forward`, with --coordinator and the token.

#ifndef GAPTRAIN_CLI_RUN_STATUS_COMMAND_H_
#define GAPTRAIN_CLI_RUN_STATUS_COMMAND_H_

#include <string>
#include <vector>

#include "proto/gaptrain.pb.h"

namespace gaptrain {

// Exit codes: 0 printed, 1 the job cannot be reached, 2 bad usage.
int StatusCommand(const std::vector<std::string>& args);

// The human-readable form StatusCommand prints.
std::string FormatJobStatus(const proto::CoordinatorStatusResponse& status);

}  // namespace gaptrain

#endif  // GAPTRAIN_CLI_RUN_STATUS_COMMAND_H_
