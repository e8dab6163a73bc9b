#include "services/coordinator/coordinator_options.h"

#include "services/base/flag_values.h"

namespace gaptrain {
namespace {

// --master's comma-separated list: shard i's address at i.
Status ParseMasters(const std::string& flag, std::vector<std::string>* masters) {
  masters->clear();
  if (flag.empty()) return Status::OK();
  size_t begin = 0;
  while (true) {
    const size_t comma = flag.find(',', begin);
    const std::string item =
        flag.substr(begin, comma == std::string::npos ? std::string::npos : comma - begin);
    const std::string shard = "master shard " + std::to_string(masters->size());
    if (item.empty()) {
      return Status::InvalidArgument("--master: " + shard + "'s address is empty in '" + flag +
                                     "'");
    }
    if (!IsHostPort(item)) {
      return Status::InvalidArgument("--master: must be HOST:PORT, got '" + item + "'");
    }
    for (size_t i = 0; i < masters->size(); ++i) {
      if ((*masters)[i] == item) {
        return Status::InvalidArgument("--master: " + shard + "'s address '" + item +
                                       "' is master shard " + std::to_string(i) + "'s too");
      }
    }
    masters->push_back(item);
    if (masters->size() > kMaxMasterShards) {
      return Status::InvalidArgument("--master: at most " + std::to_string(kMaxMasterShards) +
                                     " addresses (one per master shard)");
    }
    if (comma == std::string::npos) return Status::OK();
    begin = comma + 1;
  }
}

}  // namespace

std::string CoordinatorUsage() {
  return "usage: gaptrain-coordinator --job JOB.yaml [flags]\n" +
         ServerFlagsUsage(CoordinatorOptions().server,
                          "/metrics, /healthz and /status") +
         "  --master HOST:PORT[,...] the master, fed the live workers (SetMembers);\n"
         "                           with spec.master.shards, shard i's address at i\n"
         "  --master-ca PATH         the master serves TLS signed by this CA\n"
         "  --status-token-file PATH GET /status needs 'Authorization: Bearer' the\n"
         "                           token in PATH [none: open]\n"
         "  --state-dir DIR          where the state is kept across restarts\n"
         "                           [coordinator-state]\n"
         "  --train-samples N        training-set size (else read from spec.data)\n"
         "  --task-batches N         batches per data task [200]\n"
         "  --no-worker-timeout-seconds N   fail the job after N s without a live\n"
         "                           worker [600]; 0 = never\n"
         "  --master-timeout-seconds N      fail the job after N s without reaching\n"
         "                           the master [300]; 0 = never\n";
}

Status ParseCoordinatorFlags(const std::vector<std::string>& args, CoordinatorOptions* options) {
  CoordinatorOptions o;
  std::string token_file, status_token_file;
  FlagSet flags;
  AddServerFlags(&flags, &o.server, &token_file);
  flags.String("--master", &o.master);
  flags.String("--master-ca", &o.master_ca);
  flags.String("--state-dir", &o.state_dir);
  flags.String("--status-token-file", &status_token_file);
  flags.Unsigned("--train-samples", 1, UINT32_MAX, &o.train_samples);
  flags.Unsigned("--task-batches", 1, 1u << 20, &o.task_batches);
  flags.Unsigned("--no-worker-timeout-seconds", 0, 365ull * 86400, &o.no_worker_timeout_seconds);
  flags.Unsigned("--master-timeout-seconds", 0, 365ull * 86400, &o.master_timeout_seconds);
  GAPTRAIN_RETURN_IF_ERROR(flags.Parse(args));
  GAPTRAIN_RETURN_IF_ERROR(FinishServerFlags(token_file, &o.server));
  GAPTRAIN_RETURN_IF_ERROR(ParseMasters(o.master, &o.masters));
  if (!o.master_ca.empty() && o.master.empty()) {
    return Status::InvalidArgument("--master-ca: needs --master");
  }
  if (o.state_dir.empty()) return Status::InvalidArgument("--state-dir: must not be empty");
  if (!status_token_file.empty()) {
    GAPTRAIN_RETURN_IF_ERROR(
        ReadTokenFile("--status-token-file", status_token_file, &o.status_token));
  }
  *options = o;
  return Status::OK();
}

}  // namespace gaptrain
