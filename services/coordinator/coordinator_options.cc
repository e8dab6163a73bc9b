#include "services/coordinator/coordinator_options.h"

#include "services/common/flag_values.h"

namespace gaptrain {

const char* CoordinatorUsage() {
  return "usage: gaptrain-coordinator --job JOB.yaml [flags]\n"
         "  --listen HOST:PORT       gRPC address [0.0.0.0:7071]\n"
         "  --http-address HOST      /metrics, /healthz and /status address [0.0.0.0]\n"
         "  --http-port PORT         [9091]; 0 picks a free port\n"
         "  --token-file PATH        the job token (or $GAPTRAIN_TOKEN)\n"
         "  --insecure-no-token      accept calls without a token (tests only)\n"
         "  --tls-cert PATH --tls-key PATH   serve gRPC over TLS\n"
         "  --master HOST:PORT       the master, fed the live workers (SetMembers)\n"
         "  --master-ca PATH         the master serves TLS signed by this CA\n"
         "  --state-dir DIR          where the state is kept across restarts\n"
         "                           [coordinator-state]\n"
         "  --train-samples N        training-set size (else read from spec.data)\n"
         "  --task-batches N         batches per data task [200]\n"
         "  --no-worker-timeout-seconds N   fail the job after N s without a live\n"
         "                           worker [600]; 0 = never\n"
         "  --master-timeout-seconds N      fail the job after N s without reaching\n"
         "                           the master [300]; 0 = never\n"
         "  --ports-file PATH        write the bound ports as \"GRPC HTTP\"\n";
}

Status ParseCoordinatorFlags(const std::vector<std::string>& args, CoordinatorOptions* options) {
  CoordinatorOptions o;
  std::string token_file;
  FlagSet flags;
  flags.String("--job", &o.job_file);
  flags.String("--listen", &o.listen);
  flags.String("--http-address", &o.http_address);
  flags.Unsigned("--http-port", 0, 65535, &o.http_port);
  flags.String("--token-file", &token_file);
  flags.Switch("--insecure-no-token", &o.allow_no_token);
  flags.String("--tls-cert", &o.tls_cert);
  flags.String("--tls-key", &o.tls_key);
  flags.String("--master", &o.master);
  flags.String("--master-ca", &o.master_ca);
  flags.String("--state-dir", &o.state_dir);
  flags.Unsigned("--train-samples", 1, UINT32_MAX, &o.train_samples);
  flags.Unsigned("--task-batches", 1, 1u << 20, &o.task_batches);
  flags.Unsigned("--no-worker-timeout-seconds", 0, 365ull * 86400, &o.no_worker_timeout_seconds);
  flags.Unsigned("--master-timeout-seconds", 0, 365ull * 86400, &o.master_timeout_seconds);
  flags.String("--ports-file", &o.ports_file);
  GAPTRAIN_RETURN_IF_ERROR(flags.Parse(args));
  if (o.job_file.empty()) return Status::InvalidArgument("--job: is required");
  if (!IsHostPort(o.listen)) {
    return Status::InvalidArgument("--listen: must be HOST:PORT, got '" + o.listen + "'");
  }
  if (!o.master.empty() && !IsHostPort(o.master)) {
    return Status::InvalidArgument("--master: must be HOST:PORT, got '" + o.master + "'");
  }
  if (!o.master_ca.empty() && o.master.empty()) {
    return Status::InvalidArgument("--master-ca: needs --master");
  }
  if (o.tls_cert.empty() != o.tls_key.empty()) {
    return Status::InvalidArgument("--tls-cert and --tls-key: give both or neither");
  }
  if (o.state_dir.empty()) return Status::InvalidArgument("--state-dir: must not be empty");
  GAPTRAIN_RETURN_IF_ERROR(ResolveJobToken(token_file, o.allow_no_token, &o.token));
  *options = o;
  return Status::OK();
}

}  // namespace gaptrain
