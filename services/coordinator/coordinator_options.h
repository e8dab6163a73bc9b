// CoordinatorOptions: how gaptrain-coordinator is started. The job comes
// from the TrainingJob manifest; addresses, secrets, the state directory
// and the coordinator's own knobs from flags or the environment (in
// Kubernetes: the pod spec and a Secret), as for gaptrain-master.

#ifndef GAPTRAIN_SERVICES_COORDINATOR_COORDINATOR_OPTIONS_H_
#define GAPTRAIN_SERVICES_COORDINATOR_COORDINATOR_OPTIONS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "services/common/status.h"
#include "services/coordinator/coordinator_config.h"

namespace gaptrain {

struct CoordinatorOptions {
  std::string job_file;                   // --job (required)
  std::string listen = "0.0.0.0:7071";    // --listen: gRPC address
  std::string http_address = "0.0.0.0";   // --http-address: /metrics, /healthz, /status
  uint16_t http_port = 9091;              // --http-port (0: ephemeral)
  std::string token;                      // --token-file, or $GAPTRAIN_TOKEN
  bool allow_no_token = false;            // --insecure-no-token (tests only)
  std::string tls_cert;                   // --tls-cert and --tls-key: TLS
  std::string tls_key;
  std::string master;                     // --master HOST:PORT: the membership feed
  std::string master_ca;                  // --master-ca PATH: the master serves TLS
  std::string state_dir = "coordinator-state";  // --state-dir
  uint64_t train_samples = 0;             // --train-samples: else read the dataset
  uint32_t task_batches = kDefaultTaskBatches;  // --task-batches
  uint64_t no_worker_timeout_seconds = 600;     // --no-worker-timeout-seconds (0: never)
  uint64_t master_timeout_seconds = 300;        // --master-timeout-seconds (0: never)
  std::string ports_file;                 // --ports-file: write "grpc http" when listening
};

// Parses flags (argv[0] excluded) and $GAPTRAIN_TOKEN. Errors name the
// flag and the reason.
Status ParseCoordinatorFlags(const std::vector<std::string>& args, CoordinatorOptions* options);

// The flags' help text.
const char* CoordinatorUsage();

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_COORDINATOR_COORDINATOR_OPTIONS_H_
