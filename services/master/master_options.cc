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
    } else if (flag == "--checkpoint-dir") {
      GAPTRAIN_RETURN_IF_ERROR(value(&o.checkpoint_dir));
    } else if (flag == "--train-samples") {
      GAPTRAIN_RETURN_IF_ERROR(value(&text));
      GAPTRAIN_RETURN_IF_ERROR(ParseUnsignedFlag(flag, text, 0, UINT32_MAX, &o.train_samples));
    } else if (flag == "--model-seed") {
      GAPTRAIN_RETURN_IF_ERROR(value(&text));
      GAPTRAIN_RETURN_IF_ERROR(ParseUnsignedFlag(flag, text, 0, UINT64_MAX, &o.model_seed));
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
  if (o.tls_cert.empty() != o.tls_key.empty()) {
    return Status::InvalidArgument("--tls-cert and --tls-key: give both or neither");
  }
  GAPTRAIN_RETURN_IF_ERROR(ResolveJobToken(token_file, o.allow_no_token, &o.token));
  *options = o;
  return Status::OK();
}

}  // namespace gaptrain
