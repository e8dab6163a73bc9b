// Where `gaptrain run` finds the service binaries it starts
// (gaptrain-master, gaptrain-coordinator, gaptrain-worker): the same
// binaries a cluster runs.
//
// Searched in order, first hit wins:
//   1. $GAPTRAIN_BIN_DIR/<name> (an override for packagers and tests);
//   2. Bazel runfiles: $RUNFILES_DIR/gaptrain/<package>/<name>, then
//      <this executable>.runfiles/gaptrain/<package>/<name> (bazel run,
//      bazel test);
//   3. next to this executable (an installed gaptrain);
//   4. $PATH.
// NOT_FOUND names every place looked at.

#ifndef GAPTRAIN_CLI_RUN_SERVICE_BINARIES_H_
#define GAPTRAIN_CLI_RUN_SERVICE_BINARIES_H_

#include <string>

#include "services/base/status.h"

namespace gaptrain {

struct ServiceBinaries {
  std::string master;
  std::string coordinator;
  std::string worker;
};

Status FindServiceBinaries(ServiceBinaries* binaries);

// One binary, e.g. FindServiceBinary("services/master", "gaptrain-master").
Status FindServiceBinary(const std::string& package, const std::string& name, std::string* path);

}  // namespace gaptrain

#endif  // GAPTRAIN_CLI_RUN_SERVICE_BINARIES_H_
