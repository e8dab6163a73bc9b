#include "cli/run/local_job.h"

#include <sys/stat.h>

#include <chrono>
#include <cstdio>

#include "services/base/blas_environment.h"
#include "services/net/ports_file.h"

namespace gaptrain {
namespace {

constexpr auto kStartTimeout = std::chrono::seconds(120);

std::string Loopback(uint16_t port) { return "127.0.0.1:" + std::to_string(port); }

}  // namespace

LocalJob::LocalJob(Options options) : options_(std::move(options)) {
  masters_.resize(std::max<uint32_t>(options_.master_shards, 1));
  master_ports_.assign(masters_.size(), {0, 0});
  trainers_.resize(options_.trainers);
  trainer_ports_.assign(options_.trainers, {0});
  for (const char* dir : {"logs", "ports", "coordinator", "checkpoints"}) {
    mkdir((options_.run_dir + "/" + dir).c_str(), 0755);
  }
}

LocalJob::~LocalJob() = default;  // each Process SIGKILLs its child

std::string LocalJob::LogFile(const std::string& service) const {
  return options_.run_dir + "/logs/" + service + ".log";
}

std::string LocalJob::master_address(size_t shard) const {
  return Loopback(master_ports_[shard][0]);
}
std::string LocalJob::coordinator_address() const { return Loopback(coordinator_ports_[0]); }

std::string LocalJob::PortsFile(const std::string& service) const {
  return options_.run_dir + "/ports/" + service + ".ports";
}

Status LocalJob::Launch(const std::string& service, const std::string& binary,
                        std::vector<std::string> args, int port_count, bool wait,
                        std::unique_ptr<Process>* process, std::vector<uint16_t>* ports,
                        std::vector<std::pair<std::string, std::string>> extra_env,
                        bool ports_file_flag) {
  if (*process && (*process)->Running()) {
    return Status::FailedPrecondition(service + " is already running");
  }
  const std::string ports_file = PortsFile(service);
  std::remove(ports_file.c_str());
  if (ports_file_flag) args.insert(args.end(), {"--ports-file", ports_file});
  Process::Spec spec;
  spec.binary = binary;
  spec.args = std::move(args);
  spec.env = BlasStartEnvironment();  // for the master and the workers, which load LibTorch
  spec.env.emplace_back("GAPTRAIN_TOKEN", options_.token);
  for (auto& e : extra_env) spec.env.push_back(std::move(e));
  // A user's command gets no flags: the Python SDK reads this instead.
  if (!ports_file_flag) spec.env.emplace_back("GAPTRAIN_PORTS_FILE", ports_file);
  spec.log_file = LogFile(service);
  process->reset();
  GAPTRAIN_RETURN_IF_ERROR(Process::Start(spec, process));
  if (!wait) {
    ports->assign(port_count, 0);
    return Status::OK();
  }
  Status started = WaitForPortsFile(process->get(), ports_file, port_count, kStartTimeout, ports);
  if (!started.ok()) return Status(started.code(), service + ": " + started.message());
  return Status::OK();
}

JobFiles LocalJob::Files() const {
  JobFiles files;
  files.job_file = options_.job_file;
  files.http_address = "127.0.0.1";  // the token is $GAPTRAIN_TOKEN (Launch)
  return files;
}

Status LocalJob::StartMaster(size_t shard) {
  if (shard >= masters_.size()) return Status::OutOfRange("no master " + std::to_string(shard));
  // A restart keeps the gRPC port: the coordinator and workers know it.
  MasterPlacement placement;
  placement.listen = Loopback(master_ports_[shard][0]);
  placement.checkpoint_dir = CheckpointDir(options_.run_dir);
  placement.shard = static_cast<uint32_t>(shard);
  placement.shards = static_cast<uint32_t>(masters_.size());
  return Launch(MasterName(shard), options_.binaries.master, MasterArgs(Files(), placement), 2,
                /*wait=*/true, &masters_[shard], &master_ports_[shard]);
}

Status LocalJob::StartCoordinator() {
  CoordinatorPlacement placement;
  placement.listen = Loopback(coordinator_ports_[0]);
  placement.state_dir = options_.run_dir + "/coordinator";
  for (size_t i = 0; i < masters_.size(); ++i) {
    placement.master += (i == 0 ? "" : ",") + master_address(i);
  }
  return Launch("coordinator", options_.binaries.coordinator,
                CoordinatorArgs(Files(), placement), 2, /*wait=*/true, &coordinator_,
                &coordinator_ports_);
}

WorkerPlacement LocalJob::Worker(const std::string& name, const std::string& role) const {
  WorkerPlacement worker;
  worker.role = role;
  worker.coordinator = coordinator_address();
  worker.host_name = name;
  worker.grace_seconds = options_.worker_grace_seconds;
  worker.threads = options_.threads_per_worker;
  worker.data_cache = options_.data_cache;
  return worker;
}

Status LocalJob::StartEvaluator() {
  if (!options_.evaluator_command.argv.empty()) {
    // The user's command as given: its settings come from the environment.
    const TemplateCommand& command = options_.evaluator_command;
    auto env = WorkerEnvironment(Files(), Worker("evaluator", "evaluator"));
    for (const auto& e : command.env) env.push_back(e);
    return Launch("evaluator", command.argv[0],
                  std::vector<std::string>(command.argv.begin() + 1, command.argv.end()), 1,
                  /*wait=*/false, &evaluator_, &evaluator_ports_, std::move(env),
                  /*ports_file=*/false);
  }
  const WorkerPlacement worker = Worker("evaluator", "evaluator");
  return Launch("evaluator", options_.binaries.worker, WorkerArgs(Files(), worker), 1,
                /*wait=*/false, &evaluator_, &evaluator_ports_,
                WorkerEnvironment(Files(), worker));
}

Status LocalJob::StartTrainer(size_t index) {
  if (index >= trainers_.size()) {
    return Status::OutOfRange("no trainer " + std::to_string(index));
  }
  const std::string name = TrainerName(index);
  const WorkerPlacement worker = Worker(name, "trainer");
  auto env = WorkerEnvironment(Files(), worker);
  if (TemplateTrainer(index)) {
    // The user's command as given: its settings come from the environment.
    const TemplateCommand& command = options_.trainer_command;
    for (const auto& e : command.env) env.push_back(e);
    return Launch(name, command.argv[0],
                  std::vector<std::string>(command.argv.begin() + 1, command.argv.end()), 1,
                  /*wait=*/false, &trainers_[index], &trainer_ports_[index], std::move(env),
                  /*ports_file=*/false);
  }
  return Launch(name, options_.binaries.worker, WorkerArgs(Files(), worker), 1, /*wait=*/false,
                &trainers_[index], &trainer_ports_[index], std::move(env));
}

void LocalJob::EnsureTrainerSlots(size_t count) {
  if (count <= trainers_.size()) return;
  trainers_.resize(count);
  trainer_ports_.resize(count, {0});
}

bool LocalJob::RefreshWorkerPorts() {
  bool learned = false;
  auto refresh = [&](const std::string& service, const std::unique_ptr<Process>& process,
                     std::vector<uint16_t>* ports) {
    if (process && (*ports)[0] == 0 && ReadPortsFile(PortsFile(service), 1, ports).ok()) {
      learned = true;
    }
  };
  refresh("evaluator", evaluator_, &evaluator_ports_);
  for (size_t i = 0; i < trainers_.size(); ++i) {
    refresh(TrainerName(i), trainers_[i], &trainer_ports_[i]);
  }
  return learned;
}

Status LocalJob::StartAll() {
  for (size_t i = 0; i < masters_.size(); ++i) GAPTRAIN_RETURN_IF_ERROR(StartMaster(i));
  GAPTRAIN_RETURN_IF_ERROR(StartCoordinator());
  GAPTRAIN_RETURN_IF_ERROR(StartEvaluator());
  for (size_t i = 0; i < trainers_.size(); ++i) GAPTRAIN_RETURN_IF_ERROR(StartTrainer(i));
  return Status::OK();
}

std::vector<LocalJob::MetricsTarget> LocalJob::targets() {
  std::vector<MetricsTarget> targets;
  for (size_t i = 0; i < masters_.size(); ++i) {
    if (masters_[i] && masters_[i]->Running()) {
      targets.push_back({MasterName(i), "master", "master", Loopback(master_ports_[i][1])});
    }
  }
  if (coordinator_ && coordinator_->Running()) {
    targets.push_back({"coordinator", "coordinator", "coordinator", Loopback(coordinator_ports_[1])});
  }
  if (evaluator_ && evaluator_->Running() && EvaluatorReported()) {
    targets.push_back({"evaluator", "worker", "evaluator", Loopback(evaluator_ports_[0])});
  }
  for (size_t i = 0; i < trainers_.size(); ++i) {
    if (trainers_[i] && trainers_[i]->Running() && TrainerReported(i)) {
      targets.push_back({TrainerName(i), "worker", "trainer", Loopback(trainer_ports_[i][0])});
    }
  }
  return targets;
}

}  // namespace gaptrain
