// End-to-end test support: `gaptrain run` (and `gaptrain status`) started
// from the test's runfiles as real processes, exactly as a user runs them,
// with job files written for the real MNIST in ../shared/data.

#ifndef GAPTRAIN_TESTS_GAPTRAIN_RUN_FIXTURE_H_
#define GAPTRAIN_TESTS_GAPTRAIN_RUN_FIXTURE_H_

#include <sys/types.h>

#include <chrono>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "services/base/process.h"
#include "services/testing/test_files.h"      // ReadRaw
#include "services/testing/test_processes.h"  // TestTempDir, Eventually

namespace gaptrain {

// The job the end-to-end tests train; fields map to the manifest.
struct E2eJob {
  std::string name = "e2e";
  std::string model = "lenet5";
  std::string rule = "gap-aware";
  std::string mode = "async";   // or sync
  uint32_t backup_workers = 0;  // sync
  uint32_t replicas = 4;
  uint32_t min_replicas = 2;  // the job trains on while chaos has trainers down
  uint32_t max_replicas = 0;  // 0: not written (replicas)
  std::string autoscale;      // spec.workers.autoscale as a YAML flow map; empty: none
  double epochs = 4;
  uint32_t batch_size = 64;
  double learning_rate = 0.03;  // as examples/mnist-gap-aware.yaml: 0.05 collapsed some runs
  uint32_t checkpoint_seconds = 10;
  uint32_t master_shards = 1;  // spec.master.shards
  uint32_t lease_seconds = 6;
  uint64_t eval_every = 500;
  std::string target;  // spec.training.target as a YAML flow map; empty: none
};

// Writes `job` as <dir>/<job.name>.yaml; the data path is the real MNIST.
std::string WriteJobFile(const std::string& dir, const E2eJob& job);

// `gaptrain ARGS` started in the background, its stdout and stderr in
// `log_file`.
std::unique_ptr<Process> StartGaptrain(const std::vector<std::string>& args,
                                       const std::string& log_file);

// Runs `gaptrain ARGS` to its end (at most `timeout`); returns the wait
// status (-1 on timeout) and its output in *output.
int RunGaptrain(const std::vector<std::string>& args, std::string* output,
                std::chrono::seconds timeout = std::chrono::seconds(120));


// <run_dir>/endpoints.json once it exists (null JSON on timeout).
nlohmann::json WaitForEndpoints(const std::string& run_dir, std::chrono::seconds timeout);

// Process ids of the job's services, from endpoints.json.
std::map<std::string, pid_t> ServicePids(const nlohmann::json& endpoints);

// True when no process with this id is alive (gone, or a zombie waiting
// to be reaped).
bool ProcessGone(pid_t pid);

}  // namespace gaptrain

#endif  // GAPTRAIN_TESTS_GAPTRAIN_RUN_FIXTURE_H_
