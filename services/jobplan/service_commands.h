// ServiceCommands: the command lines of a job's processes, once for both
// executors. `gaptrain run` starts them on loopback, with ports the kernel
// picks and files in its run directory; the operator in pods behind
// Services, with fixed ports and mounted files. Only where things are
// differs (the structs below): which flags each service gets, and which
// variables a user's own trainer command reads instead, are decided here,
// so a setting added for one executor reaches the other.

#ifndef GAPTRAIN_SERVICES_JOBPLAN_SERVICE_COMMANDS_H_
#define GAPTRAIN_SERVICES_JOBPLAN_SERVICE_COMMANDS_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace gaptrain {

// What every process of the job is given.
struct JobFiles {
  std::string job_file;      // --job
  // --token-file; empty: the executor hands the token over another way
  // ($GAPTRAIN_TOKEN locally, $GAPTRAIN_TOKEN_FILE in every container).
  std::string token_file;
  std::string http_address;  // --http-address; empty: every interface
  // In-cluster TLS (services/net/tls_credentials.h): the servers' cert and
  // key, the CA clients check them with; empty cert: plaintext.
  std::string tls_cert, tls_key, tls_ca;
};

struct MasterPlacement {
  std::string listen;  // host:port
  int http_port = 0;   // 0: any free port (then read from --ports-file)
  std::string checkpoint_dir;
  // spec.master.shards: which range of θ this master holds, of how many
  // (--shard only when there are several).
  uint32_t shard = 0;
  uint32_t shards = 1;
};

struct CoordinatorPlacement {
  std::string listen;
  int http_port = 0;
  std::string state_dir;
  // The masters' host:port, comma-separated, shard 0 first (--master).
  std::string master;
  std::string status_token_file;  // --status-token-file; empty: /status is open
};

struct WorkerPlacement {
  std::string role = "trainer";  // or "evaluator"
  std::string coordinator;       // host:port
  int http_port = 0;
  std::string host_name;
  double grace_seconds = 20;
  uint32_t threads = 0;    // --threads; 0: the worker's own choice
  std::string data_cache;  // --data-cache; empty: none
};

// Arguments after the binary's name (gaptrain-master, -coordinator,
// -worker), in a fixed order.
std::vector<std::string> MasterArgs(const JobFiles& files, const MasterPlacement& master);
std::vector<std::string> CoordinatorArgs(const JobFiles& files,
                                         const CoordinatorPlacement& coordinator);
std::vector<std::string> WorkerArgs(const JobFiles& files, const WorkerPlacement& worker);

// The same settings as WorkerArgs for a user's command, which is run as
// given (no flags added): the $GAPTRAIN_* variables the Python SDK reads
// (python/gaptrain/options.py), in WorkerArgs' order. The token is not
// among them (JobFiles::token_file), nor settings only gaptrain-worker
// has (threads, data cache, HTTP address).
std::vector<std::pair<std::string, std::string>> WorkerEnvironment(const JobFiles& files,
                                                                   const WorkerPlacement& worker);

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_JOBPLAN_SERVICE_COMMANDS_H_
