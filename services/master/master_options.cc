#include "services/master/master_options.h"

#include "services/common/flag_values.h"

namespace gaptrain {

const char* MasterUsage() {
  return "usage: gaptrain-master --job JOB.yaml [flags]\n"
         "  --listen HOST:PORT       gRPC address [0.0.0.0:7070]\n"
         "  --http-address HOST      /metrics and /healthz address [0.0.0.0]\n"
         "  --http-port PORT         [9090]; 0 picks a free port\n"
         "  --token-file PATH        the job token (or $GAPTRAIN_TOKEN)\n"
         "  --insecure-no-token      accept calls without a token (tests only)\n"
         "  --tls-cert PATH --tls-key PATH   serve gRPC over TLS\n"
         "  --checkpoint-dir DIR     overrides spec.master.checkpoint.path\n"
         "  --train-samples N        training-set size (else read from spec.data)\n"
         "  --model-seed N           seed of the initial parameters [1]\n"
         "  --ports-file PATH        write the bound ports as \"GRPC HTTP\"\n";
}

Status ParseMasterFlags(const std::vector<std::string>& args, MasterOptions* options) {
  MasterOptions o;
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
  flags.String("--checkpoint-dir", &o.checkpoint_dir);
  flags.Unsigned("--train-samples", 0, UINT32_MAX, &o.train_samples);
  flags.Unsigned("--model-seed", 0, UINT64_MAX, &o.model_seed);
  flags.String("--ports-file", &o.ports_file);
  GAPTRAIN_RETURN_IF_ERROR(flags.Parse(args));
  if (o.job_file.empty()) return Status::InvalidArgument("--job: is required");
  if (!IsHostPort(o.listen)) {
    return Status::InvalidArgument("--listen: must be HOST:PORT, got '" + o.listen + "'");
  }
  if (o.tls_cert.empty() != o.tls_key.empty()) {
    return Status::InvalidArgument("--tls-cert and --tls-key: give both or neither");
  }
  GAPTRAIN_RETURN_IF_ERROR(ResolveJobToken(token_file, o.allow_no_token, &o.token));
  *options = o;
  return Status::OK();
}

}  // namespace gaptrain
