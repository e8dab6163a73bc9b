// The same job on a cluster and locally, on this machine: the example
// examples/k8s/mnist-gap-aware-dana.yaml run in-cluster (a real control
// plane, a test node running its pods as local processes, the operator as
// deploy/'s Deployment: tests/cluster/cluster_testbed.h) against
// examples/mnist-gap-aware-dana.yaml under `gaptrain run` (the same job,
// the data read from a directory instead of a claim). Prints each one's
// updates per second while training (the master's model version sampled
// every 200 ms, from its first update to its last), the ratio
// cluster / local measured in the same run, and the CPU the control plane
// (etcd, kube-apiserver, kube-controller-manager, kube-scheduler), the
// operator's pods and the test node took meanwhile, as a share of the
// machine's.
//
//   bazel run -c opt //bench:cluster_bench            (as root: network namespaces)
//   bazel run -c opt //bench:cluster_bench -- --rounds 2
//
// docs/performance.md records the results.

#include <limits.h>
#include <stdlib.h>
#include <sys/types.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "bench/process_stats.h"
#include "tests/cluster/cluster_testbed.h"
#include "services/api/master_metric_names.h"
#include "services/base/available_cpus.h"
#include "services/base/file_contents.h"
#include "services/base/process.h"
#include "services/net/http_client.h"
#include "services/net/metrics_text.h"
#include "services/testing/testdata_dir.h"

namespace gaptrain {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr char kClusterJobFile[] = "examples/k8s/mnist-gap-aware-dana.yaml";
constexpr char kLocalJobFile[] = "examples/mnist-gap-aware-dana.yaml";
constexpr char kJobName[] = "mnist-gap-aware-dana";
constexpr auto kSampleEvery = std::chrono::milliseconds(200);

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

std::string RealPath(const std::string& path) {
  char resolved[PATH_MAX];
  return realpath(path.c_str(), resolved) != nullptr ? resolved : path;
}

// The master's model version over time, sampled until `done` says so.
struct Training {
  double updates_per_second = 0;
  double seconds = 0;  // from the first update to the last
  int64_t updates = 0;
  Clock::time_point start, end;
};

bool SampleTraining(const std::function<double()>& version, const std::function<bool()>& done,
                    Training* out) {
  int64_t first = -1, last = -1;
  Clock::time_point first_at, last_at;
  const Clock::time_point deadline = Clock::now() + std::chrono::minutes(15);
  while (!done() && Clock::now() < deadline) {
    const double v = version();
    const Clock::time_point now = Clock::now();
    if (v > 0 && first < 0) {
      first = static_cast<int64_t>(v);
      first_at = now;
    }
    if (v > last && first >= 0) {
      last = static_cast<int64_t>(v);
      last_at = now;
    }
    std::this_thread::sleep_for(kSampleEvery);
  }
  if (first < 0 || last <= first) return false;
  out->updates = last - first;
  out->seconds = Seconds(last_at - first_at);
  out->updates_per_second = out->updates / out->seconds;
  out->start = first_at;
  out->end = last_at;
  return true;
}

// `gaptrain run` of the local job, its data read from the shared datasets.
bool RunLocally(const std::string& work_dir, Training* training) {
  std::string data;
  Status s = FindSharedDataDir(&data);
  if (!s.ok()) {
    std::fprintf(stderr, "cluster_bench: %s\n", s.ToString().c_str());
    return false;
  }
  std::string job;
  s = ReadFile(kLocalJobFile, &job);
  if (!s.ok()) {
    std::fprintf(stderr, "cluster_bench: %s\n", s.ToString().c_str());
    return false;
  }
  const std::string relative = "../shared/data/mnist";
  const size_t at = job.find(relative);
  if (at == std::string::npos) {
    std::fprintf(stderr, "cluster_bench: %s no longer reads %s\n", kLocalJobFile,
                 relative.c_str());
    return false;
  }
  job.replace(at, relative.size(), data + "/mnist");
  const std::string job_file = work_dir + "/local-job.yaml";
  std::ofstream(job_file) << job;
  const std::string run_dir = work_dir + "/local-run";
  std::system(("rm -rf '" + run_dir + "'").c_str());

  Process::Spec spec;
  spec.binary = "cli/gaptrain";
  spec.args = {"run", "-f", job_file, "--run-dir", run_dir};
  // The services' binaries are this benchmark's runfiles too (the working
  // directory is <runfiles>/gaptrain, under `bazel run` and when started
  // from there by hand).
  char cwd[PATH_MAX];
  const char* runfiles = std::getenv("RUNFILES_DIR");
  if ((runfiles == nullptr || *runfiles == '\0') && getcwd(cwd, sizeof cwd) != nullptr) {
    const std::string here(cwd);
    spec.env = {{"RUNFILES_DIR", here.substr(0, here.rfind('/'))}};
  }
  spec.log_file = work_dir + "/gaptrain-run.log";
  std::unique_ptr<Process> process;
  s = Process::Start(spec, &process);
  if (!s.ok()) {
    std::fprintf(stderr, "cluster_bench: %s\n", s.ToString().c_str());
    return false;
  }
  std::string master_metrics;
  auto version = [&]() -> double {
    if (master_metrics.empty()) {
      std::ifstream endpoints(run_dir + "/endpoints.json");
      const json e = json::parse(endpoints, nullptr, false);
      if (e.is_object()) master_metrics = e["metrics"].value("master", "");
      if (master_metrics.empty()) return 0;
    }
    // "http://HOST:PORT/metrics"
    const std::string address = master_metrics.substr(7, master_metrics.find('/', 7) - 7);
    const size_t colon = address.rfind(':');
    HttpClientResponse response;
    if (!HttpGet(address.substr(0, colon), std::stoi(address.substr(colon + 1)), "/metrics", 2,
                 &response)
             .ok()) {
      return 0;
    }
    return MetricValue(ParseMetricsText(response.body), master_metric::kModelVersion, 0);
  };
  const bool sampled = SampleTraining(version, [&] { return !process->Running(); }, training);
  process->WaitExit(std::chrono::minutes(1));
  if (!sampled || process->wait_status() != 0) {
    std::fprintf(stderr, "cluster_bench: gaptrain run failed (%s); log %s\n",
                 DescribeWaitStatus(process->wait_status()).c_str(), spec.log_file.c_str());
    return false;
  }
  return true;
}

struct ClusterRun {
  Training training;
  double control_plane_cpu = 0;  // seconds, during training
  double operator_cpu = 0;
  double node_cpu = 0;  // this process: the test node's informers and status writes
  double jobs_cpu = 0;  // the job's own pods
  double wall = 0;
};

bool RunInCluster(ClusterTestbed* bed, int round, ClusterRun* run) {
  json job;
  Status s = bed->ReadJob(kClusterJobFile, &job);
  const std::string name = std::string(kJobName) + "-" + std::to_string(round);
  job["metadata"]["name"] = name;
  if (s.ok()) s = bed->admin()->Create(kube::kTrainingJobs, bed->job_namespace(), job, nullptr);
  if (!s.ok()) {
    std::fprintf(stderr, "cluster_bench: %s\n", s.ToString().c_str());
    return false;
  }
  const std::map<std::string, pid_t> control_plane = bed->cluster()->ComponentPids();
  std::vector<pid_t> operators =
      ProcessesRunning({RealPath(ClusterTestbed::Binaries().at("gaptrain-operator"))});
  std::vector<std::string> job_binaries;
  for (const char* command : {"gaptrain-master", "gaptrain-coordinator", "gaptrain-worker"}) {
    job_binaries.push_back(RealPath(ClusterTestbed::Binaries().at(command)));
  }
  auto cpu_of = [](const std::vector<pid_t>& pids) {
    double total = 0;
    for (pid_t pid : pids) total += ProcessCpuSeconds(pid);
    return total;
  };
  std::vector<pid_t> cp_pids;
  for (const auto& [component, pid] : control_plane) cp_pids.push_back(pid);

  // CPU is read when the first update is seen and at the last one, from
  // inside the sampler, so both ends match the training window.
  double cp_start = 0, op_start = 0, node_start = 0;
  std::map<pid_t, double> jobs_start;
  bool started = false;
  auto version = [&]() -> double {
    const double v = MetricValue(bed->PodMetrics(bed->job_namespace(), name + "-master"),
                                 master_metric::kModelVersion, 0);
    if (v > 0 && !started) {
      started = true;
      cp_start = cpu_of(cp_pids);
      op_start = cpu_of(operators);
      node_start = ProcessCpuSeconds(getpid());
      for (const std::string& binary : job_binaries) {
        for (pid_t pid : ProcessesRunning({binary})) jobs_start[pid] = ProcessCpuSeconds(pid);
      }
    }
    return v;
  };
  double cp_end = 0, op_end = 0, node_end = 0, jobs = 0;
  int64_t last_seen = -1;
  auto done = [&] {
    const json current = bed->Get(kube::kTrainingJobs, bed->job_namespace(), name);
    const std::string phase =
        current.is_object() ? current.value("status", json::object()).value("phase", "") : "";
    const double v = MetricValue(bed->PodMetrics(bed->job_namespace(), name + "-master"),
                                 master_metric::kModelVersion, -1);
    if (started && v > last_seen) {
      last_seen = static_cast<int64_t>(v);
      cp_end = cpu_of(cp_pids);
      op_end = cpu_of(operators);
      node_end = ProcessCpuSeconds(getpid());
      jobs = 0;
      for (const auto& [pid, at_start] : jobs_start) jobs += ProcessCpuSeconds(pid) - at_start;
    }
    return phase == "Succeeded" || phase == "Failed";
  };
  if (!SampleTraining(version, done, &run->training)) {
    std::fprintf(stderr, "cluster_bench: the in-cluster job did not train\n");
    return false;
  }
  run->control_plane_cpu = cp_end - cp_start;
  run->operator_cpu = op_end - op_start;
  run->node_cpu = node_end - node_start;
  run->jobs_cpu = jobs;
  run->wall = run->training.seconds;
  const json done_job = bed->Get(kube::kTrainingJobs, bed->job_namespace(), name);
  std::printf("  in-cluster job %s: %s, accuracy %.2f%%\n", name.c_str(),
              done_job["status"].value("phase", "").c_str(),
              100 * done_job["status"]["progress"].value("testAccuracy", 0.0));
  return true;
}

int Main(int argc, char** argv) {
  int rounds = 1;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--rounds") == 0 && i + 1 < argc) rounds = std::atoi(argv[++i]);
  }
  const char* tmp = std::getenv("TMPDIR");
  const std::string work_dir = std::string(tmp != nullptr ? tmp : "/tmp") + "/gaptrain-cluster-bench";
  std::system(("rm -rf '" + work_dir + "' && mkdir -p '" + work_dir + "'").c_str());

  std::string data;
  const Status found = FindSharedDataDir(&data);
  if (!found.ok()) {
    std::fprintf(stderr, "cluster_bench: %s\n", found.ToString().c_str());
    return 1;
  }
  ClusterTestbed::Options options;
  options.work_dir = work_dir + "/cluster";
  options.mnist_dir = data + "/mnist";
  std::unique_ptr<ClusterTestbed> bed;
  const Clock::time_point setup = Clock::now();
  const Status s = ClusterTestbed::Start(options, &bed);
  if (!s.ok()) {
    std::fprintf(stderr, "cluster_bench: %s\n", s.ToString().c_str());
    return 1;
  }
  std::printf("cluster ready (control plane, test node, operator from deploy/, datasets) in "
              "%.1f s; %d CPUs\n",
              Seconds(Clock::now() - setup), AvailableCpus());
  const int cpus = AvailableCpus();
  for (int round = 1; round <= rounds; ++round) {
    Training local;
    if (!RunLocally(work_dir, &local)) return 1;
    ClusterRun cluster;
    if (!RunInCluster(bed.get(), round, &cluster)) return 1;
    const double machine = cluster.wall * cpus;
    std::printf(
        "round %d: local %.1f upd/s (%lld updates in %.1f s); in-cluster %.1f upd/s (%lld in "
        "%.1f s); ratio in-cluster / local %.2f\n"
        "  CPU while the in-cluster job trained (%.1f s x %d CPUs = %.1f CPU-s): control plane "
        "%.1f CPU-s (%.1f%%), operator pods %.1f (%.1f%%), test node %.1f (%.1f%%), the job's "
        "pods %.1f (%.1f%%)\n",
        round, local.updates_per_second, static_cast<long long>(local.updates), local.seconds,
        cluster.training.updates_per_second, static_cast<long long>(cluster.training.updates),
        cluster.training.seconds, cluster.training.updates_per_second / local.updates_per_second,
        cluster.wall, cpus, machine, cluster.control_plane_cpu,
        100 * cluster.control_plane_cpu / machine, cluster.operator_cpu,
        100 * cluster.operator_cpu / machine, cluster.node_cpu, 100 * cluster.node_cpu / machine,
        cluster.jobs_cpu, 100 * cluster.jobs_cpu / machine);
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace
}  // namespace gaptrain

int main(int argc, char** argv) { return gaptrain::Main(argc, argv); }
