#include "services/jobplan/service_commands.h"

#include <cstdio>

namespace gaptrain {
namespace {

// One setting of a worker: its flag, and the variable a user's command
// reads it from (nullptr: gaptrain-worker only).
struct WorkerSetting {
  const char* flag;
  const char* variable;
  std::string value;
};

std::string FormatSeconds(double seconds) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", seconds);
  return text;
}

void AddIfSet(std::vector<std::string>* args, const char* flag, const std::string& value) {
  if (!value.empty()) args->insert(args->end(), {flag, value});
}

std::vector<WorkerSetting> WorkerSettings(const JobFiles& files, const WorkerPlacement& worker) {
  std::vector<WorkerSetting> settings = {
      {"--job", "GAPTRAIN_JOB", files.job_file},
      {"--role", "GAPTRAIN_ROLE", worker.role},
      {"--coordinator", "GAPTRAIN_COORDINATOR", worker.coordinator},
      {"--token-file", nullptr, files.token_file},
      {"--http-address", nullptr, files.http_address},
      {"--http-port", "GAPTRAIN_HTTP_PORT", std::to_string(worker.http_port)},
      {"--host-name", "GAPTRAIN_HOST_NAME", worker.host_name},
      {"--grace-seconds", "GAPTRAIN_GRACE_SECONDS", FormatSeconds(worker.grace_seconds)},
      {"--threads", nullptr, worker.threads > 0 ? std::to_string(worker.threads) : ""},
      {"--data-cache", nullptr, worker.data_cache},
  };
  if (!files.tls_cert.empty()) {
    settings.push_back({"--coordinator-ca", "GAPTRAIN_COORDINATOR_CA", files.tls_ca});
    settings.push_back({"--master-ca", "GAPTRAIN_MASTER_CA", files.tls_ca});
  }
  return settings;
}

}  // namespace

std::vector<std::string> MasterArgs(const JobFiles& files, const MasterPlacement& master) {
  std::vector<std::string> args = {"--job", files.job_file, "--listen", master.listen};
  AddIfSet(&args, "--http-address", files.http_address);
  args.insert(args.end(), {"--http-port", std::to_string(master.http_port)});
  AddIfSet(&args, "--token-file", files.token_file);
  args.insert(args.end(), {"--checkpoint-dir", master.checkpoint_dir});
  if (master.shards > 1) args.insert(args.end(), {"--shard", std::to_string(master.shard)});
  if (!files.tls_cert.empty()) {
    args.insert(args.end(), {"--tls-cert", files.tls_cert, "--tls-key", files.tls_key});
  }
  return args;
}

std::vector<std::string> CoordinatorArgs(const JobFiles& files,
                                         const CoordinatorPlacement& coordinator) {
  std::vector<std::string> args = {"--job", files.job_file, "--listen", coordinator.listen};
  AddIfSet(&args, "--http-address", files.http_address);
  args.insert(args.end(), {"--http-port", std::to_string(coordinator.http_port)});
  AddIfSet(&args, "--token-file", files.token_file);
  args.insert(args.end(),
              {"--state-dir", coordinator.state_dir, "--master", coordinator.master});
  if (!files.tls_cert.empty()) {
    args.insert(args.end(), {"--tls-cert", files.tls_cert, "--tls-key", files.tls_key,
                             "--master-ca", files.tls_ca});
  }
  AddIfSet(&args, "--status-token-file", coordinator.status_token_file);
  return args;
}

std::vector<std::string> WorkerArgs(const JobFiles& files, const WorkerPlacement& worker) {
  std::vector<std::string> args;
  for (const WorkerSetting& s : WorkerSettings(files, worker)) AddIfSet(&args, s.flag, s.value);
  return args;
}

std::vector<std::pair<std::string, std::string>> WorkerEnvironment(
    const JobFiles& files, const WorkerPlacement& worker) {
  std::vector<std::pair<std::string, std::string>> env;
  for (const WorkerSetting& s : WorkerSettings(files, worker)) {
    if (s.variable != nullptr && !s.value.empty()) env.emplace_back(s.variable, s.value);
  }
  return env;
}

}  // namespace gaptrain
