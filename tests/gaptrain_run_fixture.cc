#include "tests/gaptrain_run_fixture.h"

#include <signal.h>
#include <sys/wait.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include "services/testing/testdata_dir.h"

namespace gaptrain {

std::string WriteJobFile(const std::string& dir, const E2eJob& job) {
  const std::string data = SharedDataDir();
  const std::string path = dir + "/" + job.name + ".yaml";
  std::string workers = "{replicas: " + std::to_string(job.replicas) +
                        ", minReplicas: " + std::to_string(job.min_replicas);
  if (job.max_replicas > 0) workers += ", maxReplicas: " + std::to_string(job.max_replicas);
  if (!job.autoscale.empty()) workers += ", autoscale: " + job.autoscale;
  workers += "}";
  std::ofstream(path) << "apiVersion: gaptrain.io/v1alpha1\n"
                      << "kind: TrainingJob\n"
                      << "metadata: {name: " << job.name << "}\n"
                      << "spec:\n"
                      << "  model: {builtin: " << job.model << "}\n"
                      << "  data: {format: mnist-idx, path: " << data << "/mnist, shuffleSeed: 1}\n"
                      << "  training:\n"
                      << "    batchSize: " << job.batch_size << "\n"
                      << "    epochs: " << job.epochs << "\n"
                      << "    evalEveryUpdates: " << job.eval_every << "\n"
                      << (job.target.empty() ? "" : "    target: " + job.target + "\n")
                      << "    optimizer:\n"
                      << "      learningRate: " << job.learning_rate << "\n"
                      << "      momentum: 0.9\n"
                      << "      weightDecay: 1.0e-4\n"
                      << "      warmupEpochs: 0.25\n"
                      << "      decay: {type: step, atFractions: [0.7], factor: 0.1}\n"
                      << "    mode: " << job.mode << "\n"
                      << "    sync: {backupWorkers: " << job.backup_workers << "}\n"
                      << "    staleness: {rule: " << job.rule << "}\n"
                      << "  workers: " << workers << "\n"
                      << "  master:\n"
                      << (job.master_shards > 1
                              ? "    shards: " + std::to_string(job.master_shards) + "\n"
                              : std::string())
                      << "    checkpoint: {intervalSeconds: " << job.checkpoint_seconds
                      << ", keep: 3}\n"
                      << "  coordinator: {leaseSeconds: " << job.lease_seconds << "}\n";
  return path;
}

std::unique_ptr<Process> StartGaptrain(const std::vector<std::string>& args,
                                       const std::string& log_file) {
  Process::Spec spec;
  spec.binary = "cli/gaptrain";  // runfiles-relative: tests run in the runfiles tree
  spec.args = args;
  spec.log_file = log_file;
  std::unique_ptr<Process> process;
  Status s = Process::Start(spec, &process);
  if (!s.ok()) std::fprintf(stderr, "%s\n", s.ToString().c_str());
  return process;
}

int RunGaptrain(const std::vector<std::string>& args, std::string* output,
                std::chrono::seconds timeout) {
  static int counter = 0;
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string log = std::string(tmp != nullptr ? tmp : "/tmp") + "/gaptrain-" +
                          std::to_string(getpid()) + "-" + std::to_string(++counter) + ".out";
  std::unique_ptr<Process> p = StartGaptrain(args, log);
  if (p == nullptr) return -1;
  const bool exited = p->WaitExit(timeout);
  *output = ReadRaw(log);
  return exited ? p->wait_status() : -1;
}

nlohmann::json WaitForEndpoints(const std::string& run_dir, std::chrono::seconds timeout) {
  nlohmann::json endpoints;
  Eventually(
      [&] {
        std::ifstream in(run_dir + "/endpoints.json");
        if (!in) return false;
        endpoints = nlohmann::json::parse(in, nullptr, false);
        return endpoints.is_object();
      },
      timeout);
  return endpoints.is_object() ? endpoints : nlohmann::json();
}

std::map<std::string, pid_t> ServicePids(const nlohmann::json& endpoints) {
  std::map<std::string, pid_t> pids;
  if (!endpoints.is_object() || !endpoints.contains("pids")) return pids;
  for (const auto& [service, pid] : endpoints["pids"].items()) pids[service] = pid.get<pid_t>();
  return pids;
}

bool ProcessGone(pid_t pid) {
  if (kill(pid, 0) == -1 && errno == ESRCH) return true;
  // A dead child of a killed launcher is a zombie until its new parent
  // reaps it: dead all the same. /proc/<pid>/stat: "pid (comm) state ...".
  const std::string stat = ReadRaw("/proc/" + std::to_string(pid) + "/stat");
  const size_t paren = stat.rfind(')');
  return stat.empty() || (paren != std::string::npos && paren + 2 < stat.size() &&
                          stat[paren + 2] == 'Z');
}

}  // namespace gaptrain
