// MasterOptions: how gaptrain-master is started. The job comes from the
// TrainingJob manifest; addresses, secrets and overrides from flags or the
// environment (in Kubernetes: the pod spec and a Secret).

#ifndef GAPTRAIN_SERVICES_MASTER_MASTER_OPTIONS_H_
#define GAPTRAIN_SERVICES_MASTER_MASTER_OPTIONS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "services/common/status.h"

namespace gaptrain {

struct MasterOptions {
  std::string job_file;                   // --job (required)
  std::string listen = "0.0.0.0:7070";    // --listen: gRPC address
  std::string http_address = "0.0.0.0";   // --http-address: /metrics, /healthz
  uint16_t http_port = 9090;              // --http-port (0: ephemeral)
  std::string token;                      // --token-file, or $GAPTRAIN_TOKEN
  bool allow_no_token = false;            // --insecure-no-token (tests only)
  std::string tls_cert;                   // --tls-cert and --tls-key: TLS
  std::string tls_key;
  std::string checkpoint_dir;             // --checkpoint-dir: overrides the job's
  uint64_t train_samples = 0;             // --train-samples: else read the dataset
  uint64_t model_seed = 1;                // --model-seed: initial parameters
  std::string ports_file;                 // --ports-file: write "grpc http" when listening
};

// Parses flags (argv[0] excluded) and $GAPTRAIN_TOKEN. Errors name the
// flag and the reason.
Status ParseMasterFlags(const std::vector<std::string>& args, MasterOptions* options);

// The flags' help text.
const char* MasterUsage();

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_MASTER_MASTER_OPTIONS_H_
