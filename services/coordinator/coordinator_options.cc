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
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& flag = args[i];
    auto value = [&](std::string* out) -> Status {
      if (i + 1 >= args.size()) return Status::InvalidArgument(flag + ": needs a value");
      *out = args[++i];
      return Status::OK();
    };
    uint64_t number = 0;
    std::string text;
    if (flag == "--job") {
      GAPTRAIN_RETURN_IF_ERROR(value(&o.job_file));
    } else if (flag == "--listen") {
      GAPTRAIN_RETURN_IF_ERROR(value(&o.listen));
    } else if (flag == "--http-address") {
      GAPTRAIN_RETURN_IF_ERROR(value(&o.http_address));
    } else if (flag == "--http-port") {
      GAPTRAIN_RETURN_IF_ERROR(value(&text));
      GAPTRAIN_RETURN_IF_ERROR(ParseUnsignedFlag(flag, text, 0, 65535, &number));
      o.http_port = static_cast<uint16_t>(number);
    } else if (flag == "--token-file") {
      GAPTRAIN_RETURN_IF_ERROR(value(&token_file));
    } else if (flag == "--insecure-no-token") {
      o.allow_no_token = true;
    } else if (flag == "--tls-cert") {
      GAPTRAIN_RETURN_IF_ERROR(value(&o.tls_cert));
    } else if (flag == "--tls-key") {
      GAPTRAIN_RETURN_IF_ERROR(value(&o.tls_key));
    } else if (flag == "--master") {
      GAPTRAIN_RETURN_IF_ERROR(value(&o.master));
    } else if (flag == "--master-ca") {
      GAPTRAIN_RETURN_IF_ERROR(value(&o.master_ca));
    } else if (flag == "--state-dir") {
      GAPTRAIN_RETURN_IF_ERROR(value(&o.state_dir));
    } else if (flag == "--train-samples") {
      GAPTRAIN_RETURN_IF_ERROR(value(&text));
      GAPTRAIN_RETURN_IF_ERROR(ParseUnsignedFlag(flag, text, 1, UINT32_MAX, &o.train_samples));
    } else if (flag == "--task-batches") {
      GAPTRAIN_RETURN_IF_ERROR(value(&text));
      GAPTRAIN_RETURN_IF_ERROR(ParseUnsignedFlag(flag, text, 1, 1u << 20, &number));
      o.task_batches = static_cast<uint32_t>(number);
    } else if (flag == "--no-worker-timeout-seconds") {
      GAPTRAIN_RETURN_IF_ERROR(value(&text));
      GAPTRAIN_RETURN_IF_ERROR(
          ParseUnsignedFlag(flag, text, 0, 365ull * 86400, &o.no_worker_timeout_seconds));
    } else if (flag == "--master-timeout-seconds") {
      GAPTRAIN_RETURN_IF_ERROR(value(&text));
      GAPTRAIN_RETURN_IF_ERROR(
          ParseUnsignedFlag(flag, text, 0, 365ull * 86400, &o.master_timeout_seconds));
    } else if (flag == "--ports-file") {
      GAPTRAIN_RETURN_IF_ERROR(value(&o.ports_file));
    } else {
      return Status::InvalidArgument("unknown flag '" + flag + "'");
    }
  }
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
