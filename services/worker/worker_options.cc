#include "services/worker/worker_options.h"

#include <unistd.h>

#include <cstdlib>

#include "services/base/flag_values.h"

namespace gaptrain {
namespace {

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
         "  --device cpu|cuda        [cpu]; cuda computes on the GPU, or falls back to\n"
         "                           the cpu with a warning when it cannot\n"
         "  --grace-seconds S        after SIGTERM: finish or abandon the batch and leave\n"
         "                           within S seconds [20]\n"
         "  --http-address HOST      /metrics and /healthz address [0.0.0.0]\n"
         "  --http-port PORT         [9092]; 0 picks a free port\n"
         "  --host-name NAME         this worker's name [$HOSTNAME]\n"
         "  --data-dir DIR           overrides spec.data.path\n"
         "  --data-cache DIR         keep inflated copies of gzip'd data files here,\n"
         "                           shared with the other workers of the machine\n"
         "  --ports-file PATH        write the bound HTTP port once serving\n";
}

Status ParseWorkerFlags(const std::vector<std::string>& args, WorkerOptions* options) {
  WorkerOptions o;
  std::string token_file;
  std::string role = "trainer";
  FlagSet flags;
  flags.String("--job", &o.job_file);
  flags.String("--coordinator", &o.coordinator);
  flags.String("--token-file", &token_file);
  flags.Switch("--insecure-no-token", &o.allow_no_token);
  flags.String("--coordinator-ca", &o.coordinator_ca);
  flags.String("--master-ca", &o.master_ca);
  flags.OneOf("--role", {"trainer", "evaluator"}, &role);
  flags.Unsigned("--threads", 0, 1024, &o.threads);
  flags.OneOf("--device", {"cpu", "cuda"}, &o.device);
  flags.Seconds("--grace-seconds", 24 * 3600, &o.grace_seconds);
  flags.String("--http-address", &o.http_address);
  flags.Unsigned("--http-port", 0, 65535, &o.http_port);
  flags.String("--host-name", &o.host_name);
  flags.String("--data-dir", &o.data_dir);
  flags.String("--data-cache", &o.data_cache);
  flags.String("--ports-file", &o.ports_file);
  GAPTRAIN_RETURN_IF_ERROR(flags.Parse(args));
  o.evaluator = role == "evaluator";
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
