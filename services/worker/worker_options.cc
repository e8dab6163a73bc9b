#include "services/worker/worker_options.h"

#include "services/common/flag_values.h"

#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>

namespace gaptrain {
namespace {

Status ParseSeconds(const std::string& flag, const std::string& text, double* out) {
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || errno == ERANGE || !std::isfinite(v) || v < 0 ||
      v > 24 * 3600) {
    return Status::InvalidArgument(flag + ": must be a number of seconds in [0, 86400], got '" +
                                   text + "'");
  }
  *out = v;
  return Status::OK();
}


std::string DefaultHostName() {
  if (const char* env = std::getenv("HOSTNAME"); env != nullptr && *env) return env;
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) == 0 && name[0] != '\0') return name;
  return "";
}

}  // namespace

const char* WorkerUsage() {
  return "usage: gaptrain-worker --job JOB.yaml --coordinator HOST:PORT [flags]\n"
         "  --role trainer|evaluator [trainer]; one evaluator per job\n"
         "  --token-file PATH        the job token (or $GAPTRAIN_TOKEN)\n"
         "  --insecure-no-token      send no token (tests only)\n"
         "  --coordinator-ca PATH    the coordinator serves TLS signed by this CA\n"
         "  --master-ca PATH         the master serves TLS signed by this CA\n"
         "  --threads N              compute threads [0: the container's CPU limit]\n"
         "  --device cpu|cuda        [cpu]; cuda falls back to cpu when unavailable\n"
         "  --grace-seconds S        after SIGTERM: finish or abandon the batch and leave\n"
         "                           within S seconds [20]\n"
         "  --http-address HOST      /metrics and /healthz address [0.0.0.0]\n"
         "  --http-port PORT         [9092]; 0 picks a free port\n"
         "  --host-name NAME         this worker's name [$HOSTNAME]\n"
         "  --data-dir DIR           overrides spec.data.path\n"
         "  --ports-file PATH        write the bound HTTP port once serving\n";
}

Status ParseWorkerFlags(const std::vector<std::string>& args, WorkerOptions* options) {
  WorkerOptions o;
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
    } else if (flag == "--coordinator") {
      GAPTRAIN_RETURN_IF_ERROR(value(&o.coordinator));
    } else if (flag == "--token-file") {
      GAPTRAIN_RETURN_IF_ERROR(value(&token_file));
    } else if (flag == "--insecure-no-token") {
      o.allow_no_token = true;
    } else if (flag == "--coordinator-ca") {
      GAPTRAIN_RETURN_IF_ERROR(value(&o.coordinator_ca));
    } else if (flag == "--master-ca") {
      GAPTRAIN_RETURN_IF_ERROR(value(&o.master_ca));
    } else if (flag == "--role") {
      GAPTRAIN_RETURN_IF_ERROR(value(&text));
      if (text != "trainer" && text != "evaluator") {
        return Status::InvalidArgument("--role: must be trainer or evaluator, got '" + text + "'");
      }
      o.evaluator = text == "evaluator";
    } else if (flag == "--threads") {
      GAPTRAIN_RETURN_IF_ERROR(value(&text));
      GAPTRAIN_RETURN_IF_ERROR(ParseUnsignedFlag(flag, text, 0, 1024, &number));
      o.threads = static_cast<int>(number);
    } else if (flag == "--device") {
      GAPTRAIN_RETURN_IF_ERROR(value(&o.device));
      if (o.device != "cpu" && o.device != "cuda") {
        return Status::InvalidArgument("--device: must be cpu or cuda, got '" + o.device + "'");
      }
    } else if (flag == "--grace-seconds") {
      GAPTRAIN_RETURN_IF_ERROR(value(&text));
      GAPTRAIN_RETURN_IF_ERROR(ParseSeconds(flag, text, &o.grace_seconds));
    } else if (flag == "--http-address") {
      GAPTRAIN_RETURN_IF_ERROR(value(&o.http_address));
    } else if (flag == "--http-port") {
      GAPTRAIN_RETURN_IF_ERROR(value(&text));
      GAPTRAIN_RETURN_IF_ERROR(ParseUnsignedFlag(flag, text, 0, 65535, &number));
      o.http_port = static_cast<uint16_t>(number);
    } else if (flag == "--host-name") {
      GAPTRAIN_RETURN_IF_ERROR(value(&o.host_name));
    } else if (flag == "--data-dir") {
      GAPTRAIN_RETURN_IF_ERROR(value(&o.data_dir));
    } else if (flag == "--ports-file") {
      GAPTRAIN_RETURN_IF_ERROR(value(&o.ports_file));
    } else {
      return Status::InvalidArgument("unknown flag '" + flag + "'");
    }
  }
  if (o.job_file.empty()) return Status::InvalidArgument("--job: is required");
  if (o.coordinator.empty()) return Status::InvalidArgument("--coordinator: is required");
  if (!IsHostPort(o.coordinator)) {
    return Status::InvalidArgument("--coordinator: must be HOST:PORT, got '" + o.coordinator + "'");
  }
  if (o.host_name.empty()) o.host_name = DefaultHostName();
  if (o.host_name.empty()) {
    return Status::InvalidArgument("--host-name: required ($HOSTNAME is not set)");
  }
  GAPTRAIN_RETURN_IF_ERROR(ResolveJobToken(token_file, o.allow_no_token, &o.token));
  *options = o;
  return Status::OK();
}

}  // namespace gaptrain
