// LocalJob: one TrainingJob's services as real processes on this machine,
// talking gRPC over loopback: the master, the coordinator, the evaluator
// and N trainers, the same binaries a cluster runs. `gaptrain run` drives
// it; it only starts, restarts and stops processes and knows their
// addresses.
//
// Files, all under the run directory:
//   logs/<service>.log    each process's stdout and stderr (appended
//                         across restarts)
//   ports/<service>.ports the ports a process bound (its --ports-file)
//   coordinator/          the coordinator's state (--state-dir)
//   checkpoints/          the master's checkpoints (--checkpoint-dir)
//
// What the caller may rely on:
//   - Every process gets the job token through $GAPTRAIN_TOKEN and listens
//     on 127.0.0.1 only.
//   - A restarted master or coordinator listens on the gRPC port it had, so
//     the others find it again; HTTP (metrics) ports may change, and
//     targets() always lists the current ones.
//   - StartMaster() and StartCoordinator() return once the process has
//     written its ports file, or an error with the tail of its log: the
//     others need their addresses.
//   - StartEvaluator() and StartTrainer() return once the process is
//     started, without waiting for it to load its model and data (seconds
//     each on a small machine): the workers start in parallel, and a
//     supervisor that restarts one is not held up. Their metrics ports are
//     known once RefreshWorkerPorts() has read their ports files.
//   - A job whose spec.workers.template sets a command (trainer_command)
//     runs its first `template_trainers` trainers as that command, the
//     rest as gaptrain-worker; the user's command gets no flags, only the
//     environment below plus GAPTRAIN_PORTS_FILE (its ports file: the
//     Python SDK writes it, and TrainerReported() and targets() follow;
//     a command that does not is known started once the coordinator lists
//     it, job_runner.h), and is supervised as gaptrain-worker is.
//   - Every process gets the command line the operator's pods get, but
//     for where things are (services/jobplan/service_commands.h), and
//     every worker its settings in the environment too: GAPTRAIN_JOB,
//     GAPTRAIN_ROLE, GAPTRAIN_COORDINATOR, GAPTRAIN_HTTP_PORT (0),
//     GAPTRAIN_HOST_NAME (trainer-N, evaluator) and GAPTRAIN_GRACE_SECONDS
//     (the token is $GAPTRAIN_TOKEN, so there is no GAPTRAIN_TOKEN_FILE).
//   - The destructor SIGKILLs whatever still runs (see Process).
// Not thread-safe; use it from the main thread (see Process).

#ifndef GAPTRAIN_CLI_RUN_LOCAL_JOB_H_
#define GAPTRAIN_CLI_RUN_LOCAL_JOB_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cli/run/service_binaries.h"
#include "cli/run/template_command.h"
#include "services/base/process.h"
#include "services/base/status.h"
#include "services/jobplan/service_commands.h"

namespace gaptrain {

class LocalJob {
 public:
  // Where the master of a run in `run_dir` keeps its checkpoints.
  static std::string CheckpointDir(const std::string& run_dir) { return run_dir + "/checkpoints"; }

  struct Options {
    std::string job_file;  // the manifest every process reads
    std::string run_dir;
    std::string token;
    uint32_t trainers = 1;
    uint32_t master_shards = 1;  // spec.master.shards: one master process each
    uint32_t threads_per_worker = 1;
    double worker_grace_seconds = 10;  // a trainer's --grace-seconds
    std::string data_cache;            // the workers' --data-cache; empty: none
    ServiceBinaries binaries;
    // The workers' template's command (template_command.h); empty argv:
    // none.
    TemplateCommand trainer_command;
    // The evaluator's template's command: when it has one, the evaluator
    // runs it (the user's own evaluation, the Python SDK's
    // gaptrain.evaluate) in place of gaptrain-worker --role evaluator.
    TemplateCommand evaluator_command;
    // Trainers 0 .. template_trainers - 1 run trainer_command (when it has
    // one); the others gaptrain-worker.
    uint32_t template_trainers = UINT32_MAX;
  };

  // A /metrics endpoint: "master", "coordinator", "evaluator", "trainer-3".
  struct MetricsTarget {
    std::string service;
    std::string role;          // master | coordinator | worker
    std::string replica_type;  // master | coordinator | evaluator | trainer
    std::string address;       // 127.0.0.1:PORT
  };

  explicit LocalJob(Options options);
  ~LocalJob();
  LocalJob(const LocalJob&) = delete;
  LocalJob& operator=(const LocalJob&) = delete;

  // The master and the coordinator, each once it serves; then the
  // evaluator and the trainers together, without waiting for them: a
  // worker needs only the coordinator, and each spends its first second
  // loading LibTorch and its data.
  Status StartAll();

  // Reads the ports files of the workers whose ports are not known yet;
  // true when it learned any (targets() changed).
  bool RefreshWorkerPorts();
  // Whether a worker's current process has reported its ports (it got
  // through start-up).
  bool EvaluatorReported() const { return evaluator_ports_[0] != 0; }
  bool TrainerReported(size_t index) const { return trainer_ports_[index][0] != 0; }

  // (Re)start one process. A process still running is an error; so is a
  // trainer index at or above trainer_count().
  Status StartMaster(size_t shard = 0);
  Status StartCoordinator();
  Status StartEvaluator();
  Status StartTrainer(size_t index);

  // Makes room for trainers up to trainer-(count - 1), not started (a job
  // that autoscales grows); never removes any. Each new one gets its own
  // log and ports file, as the first `trainers` do.
  void EnsureTrainerSlots(size_t count);
  // Trainers started or with room made for them; trainer(i) is null until
  // started.
  size_t trainer_count() const { return trainers_.size(); }
  static std::string TrainerName(size_t index) { return "trainer-" + std::to_string(index); }
  // Whether trainer `index` runs the template's command.
  bool TemplateTrainer(size_t index) const {
    return !options_.trainer_command.argv.empty() && index < options_.template_trainers;
  }

  // The masters: one per shard of θ; "master" when there is one, else
  // "master-I".
  size_t master_count() const { return masters_.size(); }
  std::string MasterName(size_t shard) const {
    return masters_.size() == 1 ? "master" : "master-" + std::to_string(shard);
  }

  // Null until started.
  Process* master(size_t shard = 0) { return masters_[shard].get(); }
  Process* coordinator() { return coordinator_.get(); }
  Process* evaluator() { return evaluator_.get(); }
  Process* trainer(size_t index) { return trainers_[index].get(); }

  std::string master_address(size_t shard = 0) const;  // gRPC
  std::string coordinator_address() const;             // gRPC
  uint16_t master_http_port(size_t shard = 0) const { return master_ports_[shard][1]; }
  uint16_t coordinator_http_port() const { return coordinator_ports_[1]; }

  // The /metrics endpoints of the processes running now.
  std::vector<MetricsTarget> targets();

  std::string LogFile(const std::string& service) const;
  const Options& options() const { return options_; }

 private:
  // Starts `binary` as `service`; with `wait`, reads `port_count` ports
  // from its ports file into *ports, else sets them to 0 (unknown).
  // `ports_file`: whether the process is told --ports-file (a user's
  // command is not).
  Status Launch(const std::string& service, const std::string& binary,
                std::vector<std::string> args, int port_count, bool wait,
                std::unique_ptr<Process>* process, std::vector<uint16_t>* ports,
                std::vector<std::pair<std::string, std::string>> extra_env = {},
                bool ports_file = true);
  std::string PortsFile(const std::string& service) const;
  // Where this run's processes find the job, and a worker's settings
  // (services/jobplan/service_commands.h makes the command lines).
  JobFiles Files() const;
  WorkerPlacement Worker(const std::string& name, const std::string& role) const;

  Options options_;
  std::unique_ptr<Process> coordinator_, evaluator_;
  std::vector<std::unique_ptr<Process>> masters_, trainers_;
  std::vector<std::vector<uint16_t>> master_ports_;   // per shard: gRPC, HTTP
  std::vector<uint16_t> coordinator_ports_ = {0, 0};  // gRPC, HTTP
  std::vector<uint16_t> evaluator_ports_ = {0};       // HTTP
  std::vector<std::vector<uint16_t>> trainer_ports_;
};

}  // namespace gaptrain

#endif  // GAPTRAIN_CLI_RUN_LOCAL_JOB_H_
