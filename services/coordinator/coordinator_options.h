// CoordinatorOptions: how gaptrain-coordinator is started. The job comes
// from the TrainingJob manifest; addresses, secrets, the state directory
// and the coordinator's own knobs from flags or the environment (in
// Kubernetes: the pod spec and a Secret), as for gaptrain-master.

#ifndef GAPTRAIN_SERVICES_COORDINATOR_COORDINATOR_OPTIONS_H_
#define GAPTRAIN_SERVICES_COORDINATOR_COORDINATOR_OPTIONS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "services/base/status.h"
#include "services/coordinator/coordinator_config.h"
#include "services/net/server_flags.h"

namespace gaptrain {

struct CoordinatorOptions {
  // --job, --listen [0.0.0.0:7071], --http-address, --http-port [9091],
  // the token, TLS and --ports-file.
  ServerFlags server = ServerFlags::Defaults("0.0.0.0:7071", 9091);
  // --master HOST:PORT[,HOST:PORT...]: the masters fed the live workers,
  // one per shard of θ (spec.master.shards); `master` as given, `masters`
  // its addresses, shard i's at i (at most kMaxMasterShards, distinct).
  std::string master;
  std::vector<std::string> masters;
  std::string master_ca;                  // --master-ca PATH: the master serves TLS
  // --status-token-file PATH: GET /status needs "Authorization: Bearer" it.
  std::string status_token;
  std::string state_dir = "coordinator-state";  // --state-dir
  uint64_t train_samples = 0;             // --train-samples: else read the dataset
  uint32_t task_batches = kDefaultTaskBatches;  // --task-batches
  uint64_t no_worker_timeout_seconds = 600;     // --no-worker-timeout-seconds (0: never)
  uint64_t master_timeout_seconds = 300;        // --master-timeout-seconds (0: never)
};

// Parses flags (argv[0] excluded) and $GAPTRAIN_TOKEN. Errors name the
// flag and the reason.
Status ParseCoordinatorFlags(const std::vector<std::string>& args, CoordinatorOptions* options);

// The flags' help text.
std::string CoordinatorUsage();

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_COORDINATOR_COORDINATOR_OPTIONS_H_
