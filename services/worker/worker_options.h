// WorkerOptions: how gaptrain-worker is started. The job comes from the
// TrainingJob manifest; the coordinator's address, secrets, the role and
// the machine's resources from flags or the environment (in Kubernetes:
// the pod spec, the Downward API and a Secret). The master's address is
// not a flag: the coordinator hands it out at registration.

#ifndef GAPTRAIN_SERVICES_WORKER_WORKER_OPTIONS_H_
#define GAPTRAIN_SERVICES_WORKER_WORKER_OPTIONS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "services/base/status.h"

namespace gaptrain {

struct WorkerOptions {
  std::string job_file;                  // --job (required)
  std::string coordinator;               // --coordinator HOST:PORT (required)
  std::string token;                     // --token-file, or $GAPTRAIN_TOKEN
  bool allow_no_token = false;           // --insecure-no-token (tests only)
  std::string coordinator_ca;            // --coordinator-ca PATH: the coordinator serves TLS
  std::string master_ca;                 // --master-ca PATH: the master serves TLS
  bool evaluator = false;                // --role trainer|evaluator [trainer]
  int threads = 0;                       // --threads N; 0: the container's CPU limit
  std::string device = "cpu";            // --device cpu|cuda
  double grace_seconds = 20;             // --grace-seconds: after SIGTERM, until Leave
  std::string http_address = "0.0.0.0";  // --http-address: /metrics, /healthz
  uint16_t http_port = 9092;             // --http-port (0: ephemeral)
  std::string host_name;                 // --host-name; else $HOSTNAME, else gethostname()
  std::string data_dir;                  // --data-dir: overrides spec.data.path
  std::string data_cache;                // --data-cache: inflated copies (empty: none)
  std::string ports_file;                // --ports-file: write "HTTP_PORT" when serving
};

// Parses flags (argv[0] excluded), $GAPTRAIN_TOKEN and $HOSTNAME. Errors
// name the flag and the reason.
Status ParseWorkerFlags(const std::vector<std::string>& args, WorkerOptions* options);

// The flags' help text.
const char* WorkerUsage();

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_WORKER_WORKER_OPTIONS_H_
