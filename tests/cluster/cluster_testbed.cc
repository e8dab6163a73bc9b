#include "tests/cluster/cluster_testbed.h"

#include <dirent.h>
#include <limits.h>
#include <unistd.h>

#include <cstdlib>
#include <chrono>
#include <thread>
#include <utility>

#include "deploy/manifest_checks.h"
#include "helm/helm.h"
#include "operator/envtest/envtest_assets.h"
#include "operator/kube/cluster_config.h"
#include "tests/cluster/test_install.h"
#include "operator/trainingjob/kueue_workload.h"
#include "services/base/atomic_file.h"
#include "services/base/file_contents.h"
#include "services/net/http_client.h"

namespace gaptrain {
namespace {

using nlohmann::json;
using SteadyClock = std::chrono::steady_clock;

constexpr char kDatasetsFile[] = "examples/k8s/datasets.yaml";
constexpr char kModelsFile[] = "examples/k8s/models.yaml";
constexpr char kOperatorSelector[] = "app.kubernetes.io/name=gaptrain-operator";

Status WriteFile(const std::string& path, const std::string& bytes) {
  return WriteFileAtomically(path, bytes.data(), bytes.size());
}

// Polls `condition` every 50 ms for up to `seconds`; false when it never held.
bool WaitFor(const std::function<bool()>& condition, int seconds) {
  const SteadyClock::time_point deadline = SteadyClock::now() + std::chrono::seconds(seconds);
  while (!condition()) {
    if (SteadyClock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return true;
}

}  // namespace

bool PodReady(const json& pod) {
  if (!pod.is_object() || !pod.contains("status")) return false;
  for (const json& c : pod["status"].value("conditions", json::array())) {
    if (c.value("type", "") == "Ready" && c.value("status", "") == "True") return true;
  }
  return false;
}

std::string PodIp(const json& pod) {
  return pod.is_object() ? pod.value("status", json::object()).value("podIP", "") : "";
}

uint16_t NamedPort(const json& pod, const std::string& name) {
  if (!pod.is_object()) return 0;
  for (const json& port : pod["spec"]["containers"][0].value("ports", json::array())) {
    if (port.value("name", "") == name) return port.value("containerPort", 0);
  }
  return 0;
}

std::vector<pid_t> ProcessesRunning(const std::set<std::string>& executables) {
  std::vector<pid_t> pids;
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return pids;
  while (dirent* entry = readdir(proc)) {
    const pid_t pid = std::atoi(entry->d_name);
    if (pid <= 0) continue;
    char exe[PATH_MAX];
    const std::string link = "/proc/" + std::string(entry->d_name) + "/exe";
    const ssize_t n = readlink(link.c_str(), exe, sizeof exe - 1);
    if (n <= 0) continue;
    exe[n] = '\0';
    if (executables.count(exe) > 0) pids.push_back(pid);
  }
  closedir(proc);
  return pids;
}

const std::map<std::string, std::string>& ClusterTestbed::Binaries() {
  static const std::map<std::string, std::string> binaries = {
      {"gaptrain-master", "services/master/gaptrain-master"},
      {"gaptrain-coordinator", "services/coordinator/gaptrain-coordinator"},
      {"gaptrain-worker", "services/worker/gaptrain-worker"},
      {"gaptrain-operator", "operator/gaptrain-operator"},
      // The export pod's `gaptrain export`, which execs gaptrain-torch.
      {"gaptrain", "cli/gaptrain"},
      {"gaptrain-torch", "cli/gaptrain-torch"}};
  return binaries;
}

Status ClusterTestbed::Start(const Options& options, std::unique_ptr<ClusterTestbed>* out) {
  std::unique_ptr<ClusterTestbed> bed(new ClusterTestbed(options));
  envtest::ControlPlane::Options cluster_options;
  cluster_options.work_dir = options.work_dir + "/cluster";
  cluster_options.controller_manager = true;
  cluster_options.scheduler = true;
  cluster_options.audit = true;
  cluster_options.crd_files = {kTrainingJobCrdFile};
  GAPTRAIN_RETURN_IF_ERROR(envtest::ControlPlane::Start(cluster_options, &bed->cluster_));

  kube::ClusterConfig config;
  config.server = bed->cluster_->url();
  config.ca_pem = bed->cluster_->ca_pem();
  config.token = bed->cluster_->admin_token();
  kube_testing::LocalNode::Options node_options;
  node_options.work_dir = options.work_dir + "/node";
  node_options.binaries = Binaries();
  node_options.api_service_host = envtest::kServiceIp;
  node_options.api_service_port = bed->cluster_->port();
  GAPTRAIN_RETURN_IF_ERROR(kube_testing::LocalNode::Start(config, node_options, &bed->node_));
  if (options.kueue) {
    if (options.install != Install::kChart) {
      return Status::InvalidArgument("ClusterTestbed: kueue needs Install::kChart");
    }
    kube_testing::KueueManager::Options kueue_options;
    kueue_options.work_dir = options.work_dir + "/kueue";
    kueue_options.external_frameworks = {trainingjob::kKueueExternalFramework};
    GAPTRAIN_RETURN_IF_ERROR(
        kube_testing::KueueManager::Start(bed->cluster_.get(), kueue_options, &bed->kueue_));
  }
  GAPTRAIN_RETURN_IF_ERROR(bed->InstallGaptrain());
  GAPTRAIN_RETURN_IF_ERROR(bed->FillDatasets());
  *out = std::move(bed);
  return Status::OK();
}

ClusterTestbed::~ClusterTestbed() { Stop(); }

void ClusterTestbed::Stop() {
  if (kueue_ != nullptr) kueue_->Stop();
  if (node_ != nullptr) node_->Stop();
  if (cluster_ != nullptr) cluster_->Stop();
}

Status ClusterTestbed::InstallGaptrain() {
  if (options_.install == Install::kDeploy) {
    std::string kubectl, manifests;
    GAPTRAIN_RETURN_IF_ERROR(envtest::FindTool("kubectl", &kubectl));
    GAPTRAIN_RETURN_IF_ERROR(KustomizeBuild(kubectl, "deploy", &manifests));
    const std::string file = options_.work_dir + "/install.yaml";
    GAPTRAIN_RETURN_IF_ERROR(WriteFile(file, manifests));
    GAPTRAIN_RETURN_IF_ERROR(
        cluster_->Kubectl({"apply", "--namespace", kOperatorNamespace, "-f", file}));
  } else {
    Helm helm;
    GAPTRAIN_RETURN_IF_ERROR(Helm::Find(&helm));
    // Values a user tunes, so the real API server and the operator take
    // them too; names stay the defaults the tests look for (the Lease, the
    // ServiceAccount in the audit log, the pods' label).
    HelmValues values;
    values.overrides = {
        {"workers", 3},
        {"leaderElection", {{"leaseDurationSeconds", 20}, {"renewDeadlineSeconds", 12}}},
        {"extraArgs", {"--progress-poll-seconds=10"}},
        {"extraEnv", {{{"name", "TZ"}, {"value", "UTC"}}}},
        {"podLabels", {{"example.com/team", "ml"}}},
        {"podAnnotations", {{"example.com/owner", "e2e"}}},
        {"serviceAccount", {{"annotations", {{"example.com/identity", "e2e"}}}}}};
    if (options_.kueue) values.overrides["kueue"] = {{"enabled", true}};
    // `helm install gaptrain helm/gaptrain -n gaptrain-system
    // --create-namespace`, as a user runs it (the CRD is there already:
    // Helm leaves it as it is).
    json release;
    GAPTRAIN_RETURN_IF_ERROR(helm.Install("helm/gaptrain",
                                          HelmRelease{"gaptrain", kOperatorNamespace}, values,
                                          cluster_->admin_kubeconfig_file(),
                                          /*dry_run=*/false, &release));
  }
  // Both replicas run and are ready (a standby is ready too); one leads.
  const bool ready = WaitFor(
      [&] {
        const std::vector<json> pods = Pods(kOperatorNamespace, kOperatorSelector);
        return pods.size() == 2 && PodReady(pods[0]) && PodReady(pods[1]) &&
               Leader().is_object();
      },
      120);
  if (!ready) {
    return Status::Unavailable("the operator's pods were not ready and leading within 120 s:\n" +
                               OperatorLogs());
  }
  return Status::OK();
}

Status ClusterTestbed::FillDatasets() {
  const std::string& ns = options_.job_namespace;
  GAPTRAIN_RETURN_IF_ERROR(cluster_->CreateNamespace(ns));
  // A hardened namespace: the job's pods and the loader must meet it.
  GAPTRAIN_RETURN_IF_ERROR(cluster_->Kubectl(
      {"label", "namespace", ns, "pod-security.kubernetes.io/enforce=restricted"}));
  GAPTRAIN_RETURN_IF_ERROR(cluster_->Kubectl({"apply", "--namespace", ns, "-f", kDatasetsFile}));
  // The claim the examples' spec.output writes their models to.
  GAPTRAIN_RETURN_IF_ERROR(cluster_->Kubectl({"apply", "--namespace", ns, "-f", kModelsFile}));
  GAPTRAIN_RETURN_IF_ERROR(cluster_->Kubectl({"wait", "--namespace", ns,
                                              "--for=condition=Ready", "pod/dataset-loader",
                                              "--timeout=60s"}));
  for (const auto& [claim, dir] : {std::make_pair("mnist-data", options_.mnist_dir),
                                    std::make_pair("fashion-mnist-data",
                                                   options_.fashion_mnist_dir)}) {
    if (dir.empty()) continue;
    std::string path;
    GAPTRAIN_RETURN_IF_ERROR(node_->ClaimPath(ns, claim, &path));
    for (const char* file : {"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
                             "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"}) {
      std::string bytes;
      GAPTRAIN_RETURN_IF_ERROR(ReadFile(dir + "/" + file, &bytes));
      GAPTRAIN_RETURN_IF_ERROR(WriteFile(path + "/" + file, bytes));
    }
  }
  return cluster_->Kubectl({"delete", "--namespace", ns, "pod/dataset-loader", "--wait=false"});
}

Status ClusterTestbed::ReadJob(const std::string& file, json* job) const {
  std::vector<json> objects;
  std::string text;
  GAPTRAIN_RETURN_IF_ERROR(ReadFile(file, &text));
  GAPTRAIN_RETURN_IF_ERROR(ParseManifests(text, &objects));
  if (objects.size() != 1) return Status::InvalidArgument(file + ": not one object");
  *job = objects[0];
  (*job)["metadata"]["namespace"] = options_.job_namespace;
  return Status::OK();
}

json ClusterTestbed::Get(const kube::Resource& resource, const std::string& ns,
                         const std::string& name) const {
  json object;
  return admin()->Get(resource, ns, name, &object).ok() ? object : json();
}

std::vector<json> ClusterTestbed::Pods(const std::string& ns, const std::string& selector) const {
  kube::ListOptions options;
  options.label_selector = selector;
  kube::ObjectList list;
  if (!admin()->List(kube::kPods, ns, options, &list).ok()) return {};
  return list.items;
}

json ClusterTestbed::Leader() const {
  const json lease = Get(kube::kLeases, kOperatorNamespace, "gaptrain-operator");
  if (!lease.is_object()) return json();
  // holderIdentity is POD_NAME + "_" + a suffix.
  const std::string holder = lease["spec"].value("holderIdentity", "");
  const std::string pod = holder.substr(0, holder.rfind('_'));
  return pod.empty() ? json() : Get(kube::kPods, kOperatorNamespace, pod);
}

MetricsSample ClusterTestbed::LeaderMetrics() const {
  const json leader = Leader();
  if (!leader.is_object()) return {};
  return PodMetrics(kOperatorNamespace, leader["metadata"]["name"].get<std::string>());
}

MetricsSample ClusterTestbed::PodMetrics(const std::string& ns, const std::string& name) const {
  const json pod = Get(kube::kPods, ns, name);
  HttpClientResponse response;
  if (!pod.is_object() ||
      !HttpGet(PodIp(pod), NamedPort(pod, "metrics"), "/metrics", 5, &response).ok() ||
      response.status != 200) {
    return {};
  }
  return ParseMetricsText(response.body);
}

std::string ClusterTestbed::OperatorLogs() const {
  std::string all;
  for (const json& pod : Pods(kOperatorNamespace, kOperatorSelector)) {
    std::string text;
    const std::string name = pod["metadata"]["name"];
    if (node_->Logs(kOperatorNamespace, name, &text).ok()) all += "--- " + name + ":\n" + text;
  }
  return all;
}

}  // namespace gaptrain
