// A thousand jobs on one operator (issue 43): N copies of
// examples/k8s/mnist-gap-aware-dana.yaml (without spec.output) applied
// with one `kubectl apply` to a real control plane (operator/envtest:
// etcd, kube-apiserver, kube-controller-manager, kube-scheduler) with one
// registered Node that runs nothing, so every pod stays Pending; the
// operator is the real binary as a local process (--leader-elect=false,
// the shipped ServiceAccount's permissions). For the base size (100) and N
// (1000), each on a fresh control plane, it prints:
//   - apply: how long `kubectl apply` of the N jobs took;
//   - planned: from the end of the apply until every job has a
//     status.phase and all its pods exist (7 per job), and jobs/s from the
//     start of the apply;
//   - the operator's CPU seconds from the apply to planned, its peak
//     resident memory (VmHWM) and its settled resident memory after the
//     idle window;
//   - settled: from the end of the apply until the operator's log fell
//     silent (for 10 s: the scheduler's reasons written to every job);
//   - idle: the operator's CPU share of one core over `--idle-seconds`
//     (60) once settled, with the reconciles it ran meanwhile, and the API
//     server's share beside it; reconciles per job while planning;
//   - while planning: how busy the machine's CPUs were, and each control
//     plane component's and the operator's share of one core (the limit
//     that binds when the operator is not);
// and each of N's figures as a ratio to the base size's of the same run, so
// that growth per job shows (N/100 = 10 would be linear).
//
//   bazel run -c opt //bench:operator_scale_bench            (default N 1000)
//   bazel run -c opt //bench:operator_scale_bench -- --jobs 3000 --idle-seconds 60
//   ... -- --base 0   (N alone: no base run, no ratios)
//   bazel run -c opt //bench:operator_scale_bench -- --perf-idle /tmp/idle.data
//       (perf record -g of the operator over the idle window of N)
//   ... -- --heaptrack /tmp/heap   (heaptrack attached to N's operator from
//       before the apply to its exit: heaptrack_print /tmp/heap.zst)
//   ... -- --operator /path/to/gaptrain-operator   (another build of it)
//   ... -- --workers 4   (the operator's --workers; its default is 2)
//
// Needs $KUBEBUILDER_ASSETS (scripts/test-cluster.sh). docs/performance.md
// records the results.

#include <signal.h>
#include <stdlib.h>
#include <sys/types.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "bench/process_stats.h"
#include "deploy/manifest_checks.h"
#include "operator/controller/informer.h"
#include "operator/envtest/api_resources.h"
#include "operator/envtest/control_plane.h"
#include "operator/envtest/envtest_assets.h"
#include "operator/kube/resource.h"
#include "services/base/available_cpus.h"
#include "services/base/file_contents.h"
#include "services/base/process.h"
#include "tests/cluster/running_operator.h"
#include "tests/cluster/test_install.h"

namespace gaptrain {
namespace {

// A job as `kubectl apply` sends it, from this file, N times.
constexpr char kJobFile[] = "examples/k8s/mnist-gap-aware-dana.yaml";
constexpr char kNamespace[] = "bench";
constexpr char kJobLabel[] = "gaptrain.io/job-name";
// The example's pods: master, coordinator, evaluator and 4 trainers.
constexpr size_t kPodsPerJob = 7;
constexpr auto kPlanTimeout = std::chrono::minutes(15);
constexpr auto kSettle = std::chrono::seconds(10);
constexpr auto kSettleTimeout = std::chrono::minutes(10);

using nlohmann::json;
using Clock = std::chrono::steady_clock;

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

struct Figures {
  size_t jobs = 0;
  double apply_s = 0;
  double planned_s = 0;  // after the apply ended
  double jobs_per_s = 0;  // from the apply's start
  double settled_s = 0;  // after the apply ended, until the operator's log fell silent
  double operator_cpu_s = 0;  // apply start -> planned
  // Apply start -> planned: each of the control plane's components' and
  // the operator's CPU share of one core, and how busy the whole
  // machine's CPUs were (0-1 of all of them): whether the machine binds.
  std::map<std::string, double> planning_shares;
  long cpus = 0;  // the machine's, online
  double machine_busy_share = 0;
  double reconciles_per_job = 0;  // apply start -> planned
  double peak_mb = 0;
  double settled_mb = 0;
  double idle_share = 0;  // of one core
  double idle_reconciles_per_s = 0;
  double idle_apiserver_share = 0;
  size_t idle_log_lines = 0;
};

size_t CountLines(const std::string& text) {
  size_t n = 0;
  for (char c : text) n += c == '\n';
  return n;
}

double Reconciles(const RunningOperator& op) {
  return op.Metric("gaptrain_operator_reconcile_duration_seconds_count");
}

// The example job as kubectl would send it, named `name`, in kNamespace,
// without spec.output (the jobs never run: nothing would export).
Status ReadJob(json* job) {
  std::string text;
  GAPTRAIN_RETURN_IF_ERROR(ReadFile(kJobFile, &text));
  std::vector<json> objects;
  GAPTRAIN_RETURN_IF_ERROR(ParseManifests(text, &objects));
  if (objects.size() != 1 || !objects[0].is_object()) {
    return Status::InvalidArgument(std::string(kJobFile) + ": not one object");
  }
  *job = objects[0];
  (*job)["metadata"]["namespace"] = kNamespace;
  if ((*job)["spec"].is_object()) (*job)["spec"].erase("output");
  return Status::OK();
}

// A Node as a kubelet registers one (Ready, untainted), on which nothing
// ever runs: the scheduler binds pods to it and they stay Pending.
Status RegisterNode(kube::Client* admin) {
  const json node = {{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", "idle-node"}}}};
  GAPTRAIN_RETURN_IF_ERROR(admin->Create(envtest::kNodes, "", node, nullptr));
  const json status = {
      {"status",
       {{"conditions", {{{"type", "Ready"}, {"status", "True"}, {"reason", "KubeletReady"}}}},
        {"allocatable", {{"cpu", "64"}, {"memory", "256Gi"}, {"pods", "110"}}},
        {"capacity", {{"cpu", "64"}, {"memory", "256Gi"}, {"pods", "110"}}}}}};
  GAPTRAIN_RETURN_IF_ERROR(
      admin->MergePatch(envtest::kNodes.Subresource("status"), "", "idle-node", status, nullptr));
  return admin->MergePatch(envtest::kNodes, "", "idle-node", {{"spec", {{"taints", nullptr}}}},
                           nullptr);
}

// The jobs' phases, watched: an Informer (the operator's own machinery)
// whose cache keeps each job's name and status.phase only, so that the
// bench's watching costs the API server and this process next to nothing
// (a list of a thousand jobs every second took half a core here).
void KeepNameAndPhase(json* job) {
  if (!job->is_object()) return;
  json kept = {{"metadata", json::object()}};
  const json& metadata = job->value("metadata", json::object());
  for (const char* key : {"name", "namespace", "resourceVersion"}) {
    if (metadata.is_object() && metadata.contains(key)) kept["metadata"][key] = metadata[key];
  }
  const json& status = job->value("status", json::object());
  if (status.is_object() && status.contains("phase")) kept["status"]["phase"] = status["phase"];
  *job = std::move(kept);
}

size_t JobsWithPhase(const controller::Informer& jobs) {
  size_t phased = 0;
  jobs.Visit(kNamespace, [&phased](const json& job) {
    const json& status = job.value("status", json::object());
    const json& phase = status.is_object() ? status.value("phase", json()) : json();
    if (phase.is_string() && !phase.get<std::string>().empty()) ++phased;
  });
  return phased;
}

Status CountPods(kube::Client* admin, size_t* pods) {
  kube::ListOptions options;
  options.label_selector = kJobLabel;
  kube::ObjectList list;
  GAPTRAIN_RETURN_IF_ERROR(admin->List(kube::kPods, kNamespace, options, &list));
  *pods = list.items.size();
  return Status::OK();
}

// `kubectl apply -f file` as the admin, however long it takes (a thousand
// jobs on a busy machine take more than ControlPlane::Kubectl's minute).
Status KubectlApply(const envtest::ControlPlane& cluster, const std::string& file,
                    const std::string& log) {
  Process::Spec spec;
  GAPTRAIN_RETURN_IF_ERROR(envtest::FindTool("kubectl", &spec.binary));
  spec.args = {"--kubeconfig", cluster.admin_kubeconfig_file(), "apply", "-f", file};
  spec.log_file = log;
  std::unique_ptr<Process> kubectl;
  GAPTRAIN_RETURN_IF_ERROR(Process::Start(spec, &kubectl));
  if (!kubectl->WaitExit(std::chrono::minutes(30))) {
    kubectl->Stop(std::chrono::seconds(1));
    return Status::Unavailable("kubectl apply: no exit within 30 min; log " + log);
  }
  if (kubectl->wait_status() != 0) {
    return Status::Internal("kubectl apply: " + DescribeWaitStatus(kubectl->wait_status()) +
                            "; log " + log);
  }
  return Status::OK();
}

struct Tools {
  std::string operator_binary = "operator/gaptrain-operator";
  std::string perf_file;       // "": no CPU profile of the idle window
  std::string heaptrack_file;  // "": no heap profile
  std::string workers;         // the operator's --workers; "": its default
};

Status Run(const std::string& work_dir, size_t jobs, double idle_seconds, const Tools& tools,
           Figures* f) {
  f->jobs = jobs;
  envtest::ControlPlane::Options options;
  options.work_dir = work_dir;
  options.controller_manager = true;
  options.scheduler = true;
  options.crd_files = {kTrainingJobCrdFile};
  std::unique_ptr<envtest::ControlPlane> cluster;
  GAPTRAIN_RETURN_IF_ERROR(envtest::ControlPlane::Start(options, &cluster));
  GAPTRAIN_RETURN_IF_ERROR(InstallOperatorRbac(cluster.get(), RbacSource::kDeploy));
  GAPTRAIN_RETURN_IF_ERROR(cluster->CreateNamespace(kNamespace));
  GAPTRAIN_RETURN_IF_ERROR(RegisterNode(cluster->admin()));
  const pid_t apiserver = cluster->ComponentPids().at("kube-apiserver");

  json job;
  GAPTRAIN_RETURN_IF_ERROR(ReadJob(&job));
  json list = {{"apiVersion", "v1"}, {"kind", "List"}, {"items", json::array()}};
  for (size_t i = 0; i < jobs; ++i) {
    char name[64];
    std::snprintf(name, sizeof name, "mnist-%05zu", i);
    job["metadata"]["name"] = name;
    list["items"].push_back(job);
  }
  const std::string jobs_file = work_dir + "/jobs.json";
  std::ofstream(jobs_file) << list.dump();

  std::string kubeconfig;
  GAPTRAIN_RETURN_IF_ERROR(OperatorKubeconfig(cluster.get(), &kubeconfig));
  std::unique_ptr<RunningOperator> op;
  std::vector<std::string> args = {"--leader-elect=false"};
  if (!tools.workers.empty()) args.insert(args.end(), {"--workers", tools.workers});
  GAPTRAIN_RETURN_IF_ERROR(
      RunningOperator::Start(work_dir, "operator", kubeconfig, args, &op, {}, tools.operator_binary));
  const pid_t pid = op->process()->pid();
  std::unique_ptr<Process> heaptrack;
  if (!tools.heaptrack_file.empty()) {
    Process::Spec spec;
    spec.binary = "/usr/bin/heaptrack";
    spec.args = {"-o", tools.heaptrack_file, "-p", std::to_string(pid)};
    spec.log_file = work_dir + "/heaptrack.log";
    GAPTRAIN_RETURN_IF_ERROR(Process::Start(spec, &heaptrack));
    std::this_thread::sleep_for(std::chrono::seconds(5));  // gdb attaches
  }
  for (const Clock::time_point until = Clock::now() + std::chrono::seconds(60);;) {
    HttpClientResponse r;
    if (op->GetHealth("/readyz", &r).ok() && r.status == 200) break;
    if (Clock::now() > until) return Status(Status::Code::kDeadlineExceeded, "the operator is not ready");
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }

  controller::Informer::Options watch_options;
  watch_options.reflector.transform = KeepNameAndPhase;
  controller::Informer watched(cluster->admin(), kube::kTrainingJobs, kNamespace, watch_options);
  GAPTRAIN_RETURN_IF_ERROR(watched.Start());
  if (!watched.WaitForSync(std::chrono::seconds(60))) {
    return Status::Unavailable("cannot watch TrainingJobs");
  }

  std::map<std::string, pid_t> measured = cluster->ComponentPids();
  measured["operator"] = pid;
  std::map<std::string, double> measured_cpu0;
  for (const auto& [name, process] : measured) measured_cpu0[name] = ProcessCpuSeconds(process);
  const double cpu0 = measured_cpu0.at("operator");
  const double machine0 = MachineBusyCpuSeconds();
  const double plan_reconciles0 = Reconciles(*op);
  const Clock::time_point t0 = Clock::now();
  GAPTRAIN_RETURN_IF_ERROR(KubectlApply(*cluster, jobs_file, work_dir + "/apply.log"));
  const Clock::time_point t1 = Clock::now();
  f->apply_s = Seconds(t1 - t0);
  size_t phased = 0, pods = 0;
  for (;;) {
    phased = JobsWithPhase(watched);
    // The plan writes the status after the children: once every job has a
    // phase, one list says whether all their pods are there.
    if (phased == jobs && CountPods(cluster->admin(), &pods).ok() &&
        pods >= jobs * kPodsPerJob) {
      break;
    }
    if (Clock::now() - t0 > kPlanTimeout) {
      char so_far[160];
      std::snprintf(so_far, sizeof so_far,
                    "; the operator so far: %.1f s of CPU, %.0f MB resident, %.1f reconciles",
                    ProcessCpuSeconds(pid) - cpu0, ProcessMemoryMb(pid, "VmRSS"),
                    Reconciles(*op) - plan_reconciles0);
      return Status(Status::Code::kDeadlineExceeded,
                    std::to_string(phased) + " of " + std::to_string(jobs) + " jobs planned, " +
                        std::to_string(pods) + " pods, after " +
                        std::to_string(Seconds(Clock::now() - t0)) + " s" + so_far);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // reads the cache
  }
  const Clock::time_point t2 = Clock::now();
  f->planned_s = Seconds(t2 - t1);
  f->jobs_per_s = jobs / Seconds(t2 - t0);
  for (const auto& [name, process] : measured) {
    const double cpu = ProcessCpuSeconds(process) - measured_cpu0[name];
    if (name == "operator") f->operator_cpu_s = cpu;
    f->planning_shares[name] = cpu / Seconds(t2 - t0);
  }
  f->cpus = sysconf(_SC_NPROCESSORS_ONLN);
  f->machine_busy_share = (MachineBusyCpuSeconds() - machine0) / (Seconds(t2 - t0) * f->cpus);
  f->reconciles_per_job = (Reconciles(*op) - plan_reconciles0) / jobs;

  // Settled: the operator's log silent for kSettle (the scheduler marks
  // pods unschedulable one by one, and each job's condition follows).
  {
    size_t lines = CountLines(op->Log());
    Clock::time_point quiet_since = Clock::now();
    while (Clock::now() - quiet_since < kSettle && Clock::now() - t2 < kSettleTimeout) {
      std::this_thread::sleep_for(std::chrono::seconds(1));
      const size_t now_lines = CountLines(op->Log());
      if (now_lines != lines) quiet_since = Clock::now();
      lines = now_lines;
    }
    f->settled_s = Seconds(quiet_since - t1);
  }
  std::unique_ptr<Process> perf;
  if (!tools.perf_file.empty()) {
    Process::Spec spec;
    spec.binary = "/usr/bin/perf";
    spec.args = {"record", "-g", "-o", tools.perf_file, "-p", std::to_string(pid)};
    spec.log_file = work_dir + "/perf.log";
    GAPTRAIN_RETURN_IF_ERROR(Process::Start(spec, &perf));
  }
  const size_t log0 = CountLines(op->Log());
  const double idle_cpu0 = ProcessCpuSeconds(pid), idle_api0 = ProcessCpuSeconds(apiserver);
  const double reconciles0 = Reconciles(*op);
  const Clock::time_point i0 = Clock::now();
  std::this_thread::sleep_for(std::chrono::duration<double>(idle_seconds));
  const double window = Seconds(Clock::now() - i0);
  f->idle_share = (ProcessCpuSeconds(pid) - idle_cpu0) / window;
  f->idle_apiserver_share = (ProcessCpuSeconds(apiserver) - idle_api0) / window;
  f->idle_reconciles_per_s = (Reconciles(*op) - reconciles0) / window;
  f->idle_log_lines = CountLines(op->Log()) - log0;
  if (perf != nullptr) {
    perf->Signal(SIGINT);
    perf->WaitExit(std::chrono::seconds(60));
  }
  f->peak_mb = ProcessMemoryMb(pid, "VmHWM");
  f->settled_mb = ProcessMemoryMb(pid, "VmRSS");
  op->process()->Stop(std::chrono::seconds(10));
  if (heaptrack != nullptr) heaptrack->WaitExit(std::chrono::minutes(5));
  watched.Stop();
  cluster->Stop();
  return Status::OK();
}

void Print(const Figures& f) {
  std::string shares;
  for (const auto& [name, share] : f.planning_shares) {
    char one[80];
    std::snprintf(one, sizeof one, "%s%s %.0f%%", shares.empty() ? "" : ", ", name.c_str(),
                  100 * share);
    shares += one;
  }
  std::printf(
      "%5zu jobs: apply %.1f s; planned %.1f s after it (%.1f jobs/s), settled %.1f s after it; "
      "%.1f reconciles per job; operator CPU %.1f s; memory peak %.0f MB, settled %.0f MB; idle "
      "%.2f%% of a core (%.2f reconciles/s, %zu log lines), API server %.1f%%\n"
      "       while planning: the machine's %ld CPUs %.0f%% busy; of one core: %s\n",
      f.jobs, f.apply_s, f.planned_s, f.jobs_per_s, f.settled_s, f.reconciles_per_job,
      f.operator_cpu_s, f.peak_mb, f.settled_mb, 100 * f.idle_share, f.idle_reconciles_per_s,
      f.idle_log_lines, 100 * f.idle_apiserver_share, f.cpus,
      100 * f.machine_busy_share, shares.c_str());
  std::fflush(stdout);
}

double Ratio(double a, double b) { return b > 0 ? a / b : 0; }

int Main(int argc, char** argv) {
  size_t jobs = 1000, base = 100;
  double idle_seconds = 60;
  Tools tools;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool has_value = i + 1 < argc;
    if (arg == "--jobs" && has_value) {
      jobs = std::strtoul(argv[++i], nullptr, 10);
    } else if (arg == "--base" && has_value) {
      base = std::strtoul(argv[++i], nullptr, 10);
    } else if (arg == "--idle-seconds" && has_value) {
      idle_seconds = std::strtod(argv[++i], nullptr);
    } else if (arg == "--perf-idle" && has_value) {
      tools.perf_file = argv[++i];
    } else if (arg == "--heaptrack" && has_value) {
      tools.heaptrack_file = argv[++i];
    } else if (arg == "--operator" && has_value) {
      tools.operator_binary = argv[++i];
    } else if (arg == "--workers" && has_value) {
      tools.workers = argv[++i];  // the operator validates it
    } else {
      std::fprintf(stderr,
                   "usage: operator_scale_bench [--jobs N] [--base N] [--idle-seconds S] "
                   "[--perf-idle FILE] [--heaptrack FILE] [--operator PATH] [--workers N]\n");
      return 2;
    }
  }
  if (jobs == 0 || !(idle_seconds > 0)) {
    std::fprintf(stderr, "operator_scale_bench: --jobs and --idle-seconds must be > 0\n");
    return 2;
  }
  const char* tmp = std::getenv("TMPDIR");
  const std::string work_dir =
      std::string(tmp != nullptr ? tmp : "/tmp") + "/gaptrain-operator-scale-bench";
  std::system(("rm -rf '" + work_dir + "' && mkdir -p '" + work_dir + "'").c_str());
  std::printf("operator_scale_bench: %zu and %zu jobs, %d CPUs\n", base, jobs, AvailableCpus());
  Figures small, large;
  Tools base_tools;  // the profiles are of N's run
  base_tools.operator_binary = tools.operator_binary;
  base_tools.workers = tools.workers;
  Status s = base > 0 ? Run(work_dir + "/base", base, idle_seconds, base_tools, &small)
                      : Status::OK();  // --base 0: N alone (a profile)
  if (s.ok()) {
    if (base > 0) Print(small);
    s = Run(work_dir + "/n", jobs, idle_seconds, tools, &large);
  }
  if (!s.ok()) {
    std::fprintf(stderr, "operator_scale_bench: %s\n", s.ToString().c_str());
    return 1;
  }
  Print(large);
  if (base == 0) return 0;
  std::printf(
      "%zu / %zu jobs (x%.1f): planned time x%.2f, operator CPU x%.2f, peak memory x%.2f, "
      "settled memory x%.2f, idle CPU x%.2f\n",
      jobs, base, Ratio(jobs, base), Ratio(large.planned_s, small.planned_s),
      Ratio(large.operator_cpu_s, small.operator_cpu_s), Ratio(large.peak_mb, small.peak_mb),
      Ratio(large.settled_mb, small.settled_mb), Ratio(large.idle_share, small.idle_share));
  return 0;
}

}  // namespace
}  // namespace gaptrain

int main(int argc, char** argv) { return gaptrain::Main(argc, argv); }
