#include "operator/testing/kueue_manager.h"

#include <signal.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <set>
#include <thread>
#include <utility>

#include "operator/envtest/envtest_assets.h"
#include "operator/envtest/free_port.h"
#include "operator/envtest/test_certificates.h"
#include "operator/testing/base64.h"
#include "services/base/atomic_file.h"
#include "services/base/file_contents.h"
#include "services/base/file_paths.h"
#include "services/base/process.h"
#include "services/net/http_client.h"
#include "services/testing/yaml_to_json.h"

namespace gaptrain {
namespace kube_testing {
namespace {

using nlohmann::json;
using SteadyClock = std::chrono::steady_clock;

// The (API group, resource) each supported integration admits through
// Kueue's webhooks.
const std::map<std::string, std::pair<std::string, std::string>>& FrameworkResources() {
  static const auto* resources = new std::map<std::string, std::pair<std::string, std::string>>{
      {"batch/job", {"batch", "jobs"}}, {"pod", {"", "pods"}}};
  return *resources;
}

// True when every rule of `webhook` is about Kueue's own kinds or one of
// `allowed` (group, resource) pairs.
bool ServedWebhook(const json& webhook, const std::set<std::pair<std::string, std::string>>& allowed) {
  for (const json& rule : webhook.value("rules", json::array())) {
    for (const json& group : rule.value("apiGroups", json::array())) {
      if (group == "kueue.x-k8s.io") continue;
      for (const json& resource : rule.value("resources", json::array())) {
        if (allowed.count({group.get<std::string>(), resource.get<std::string>()}) == 0) {
          return false;
        }
      }
    }
  }
  return true;
}

// The documents of a YAML stream ("---" lines between them), empty ones left out.
Status YamlDocuments(const std::string& text, std::vector<json>* out) {
  std::string document;
  auto flush = [&]() -> Status {
    if (document.find_first_not_of(" \n") == std::string::npos) return Status::OK();
    json object;
    GAPTRAIN_RETURN_IF_ERROR(kube_testing::YamlToJson(document, &object));
    out->push_back(std::move(object));
    document.clear();
    return Status::OK();
  };
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(start, end - start);
    if (line == "---") {
      GAPTRAIN_RETURN_IF_ERROR(flush());
    } else {
      document += line + "\n";
    }
    start = end + 1;
  }
  return flush();
}

std::string Tail(const std::string& path) {
  std::string text;
  if (!ReadFile(path, &text).ok()) return "(no log at " + path + ")";
  return text.size() > 4000 ? "..." + text.substr(text.size() - 4000) : text;
}

}  // namespace

Status KueueManager::Start(envtest::ControlPlane* cluster, const Options& options,
                           std::unique_ptr<KueueManager>* out) {
  if (options.work_dir.empty()) return Status::InvalidArgument("KueueManager: work_dir is empty");
  for (const std::string& framework : options.frameworks) {
    if (FrameworkResources().count(framework) == 0) {
      return Status::InvalidArgument("KueueManager: framework '" + framework +
                                     "' is not supported here (batch/job, pod)");
    }
  }
  std::unique_ptr<KueueManager> kueue(new KueueManager(cluster, options));
  Status s = kueue->Launch();
  if (!s.ok()) {
    kueue->Stop();
    return s;
  }
  *out = std::move(kueue);
  return Status::OK();
}

KueueManager::~KueueManager() { Stop(); }

Status KueueManager::Launch() {
  std::string binary, assets;
  GAPTRAIN_RETURN_IF_ERROR(envtest::FindTool("kueue-manager", &binary));
  GAPTRAIN_RETURN_IF_ERROR(envtest::FindAssets(&assets));
  const std::string components = assets + "/kueue/config/components";
  if (!IsDirectory(components + "/crd/bases")) {
    return Status::NotFound(components + "/crd/bases is not there (scripts/test-cluster.sh "
                            "copies Kueue's manifests)");
  }
  const std::string pki = options_.work_dir + "/kueue-pki";
  std::error_code error;
  std::filesystem::remove_all(pki, error);
  std::filesystem::create_directories(pki, error);
  if (error) return Status::Internal("cannot make " + pki + ": " + error.message());
  log_file_ = options_.work_dir + "/kueue-manager.log";

  GAPTRAIN_RETURN_IF_ERROR(cluster_->ApplyCrds({components + "/crd/bases"}));
  GAPTRAIN_RETURN_IF_ERROR(cluster_->CreateNamespace("kueue-system"));

  // The webhook server's certificate (controller-runtime reads tls.crt and
  // tls.key from its certDir), for the address the API server calls.
  GAPTRAIN_RETURN_IF_ERROR(envtest::MakeTestCa(pki, "ca"));
  GAPTRAIN_RETURN_IF_ERROR(envtest::MakeTestLeaf(pki, "tls", "/CN=kueue-webhook",
                                        "subjectAltName=IP:127.0.0.1\n"
                                        "extendedKeyUsage=serverAuth\n"));
  std::string ca_pem;
  GAPTRAIN_RETURN_IF_ERROR(ReadFile(pki + "/ca.crt", &ca_pem));

  uint16_t metrics_port = 0;
  GAPTRAIN_RETURN_IF_ERROR(envtest::FreePort(false, &webhook_port_));
  GAPTRAIN_RETURN_IF_ERROR(envtest::FreePort(false, &probe_port_));
  GAPTRAIN_RETURN_IF_ERROR(envtest::FreePort(false, &metrics_port));

  std::string frameworks;
  for (const std::string& f : options_.frameworks) frameworks += "  - \"" + f + "\"\n";
  const std::string config = options_.work_dir + "/kueue-config.yaml";
  std::string text =
      "apiVersion: config.kueue.x-k8s.io/v1beta2\n"
      "kind: Configuration\n"
      "health:\n"
      "  healthProbeBindAddress: 127.0.0.1:" + std::to_string(probe_port_) + "\n"
      "metrics:\n"
      "  bindAddress: 127.0.0.1:" + std::to_string(metrics_port) + "\n"
      "webhook:\n"
      "  host: 127.0.0.1\n"
      "  port: " + std::to_string(webhook_port_) + "\n"
      "  certDir: " + pki + "\n"
      "leaderElection:\n"
      "  leaderElect: false\n"
      "internalCertManagement:\n"
      "  enable: false\n"
      "integrations:\n"
      "  frameworks:\n" + frameworks;
  if (!options_.external_frameworks.empty()) {
    text += "  externalFrameworks:\n";
    for (const std::string& f : options_.external_frameworks) text += "  - \"" + f + "\"\n";
  }
  GAPTRAIN_RETURN_IF_ERROR(WriteFileAtomically(config, text.data(), text.size()));

  ContainerProcess::Spec spec;
  spec.binary = binary;
  // The visibility API server (pending workloads) is off: it reads its
  // certificate at /visibility, and the API server would reach it only
  // through an APIService and a Service.
  spec.argv = {"kueue-manager", "--config=" + config, "--feature-gates=VisibilityOnDemand=false",
               "--zap-log-level=2"};
  spec.env = {"KUBECONFIG=" + cluster_->admin_kubeconfig_file()};
  spec.mounts = {{pki, "/etc/kueue/metrics/certs", /*read_only=*/true}};
  spec.log_file = log_file_;
  ::unlink(log_file_.c_str());
  GAPTRAIN_RETURN_IF_ERROR(ContainerProcess::Start(
      spec, [this](int wait_status) { wait_status_ = wait_status; }, &process_));
  GAPTRAIN_RETURN_IF_ERROR(WaitReady());
  // Installed once it serves: with failurePolicy Fail, a webhook nobody
  // answers would refuse every ClusterQueue and Job meanwhile.
  return InstallWebhooks(components + "/webhook/manifests.yaml", ca_pem);
}

Status KueueManager::InstallWebhooks(const std::string& manifests_file, const std::string& ca_pem) {
  std::string text;
  GAPTRAIN_RETURN_IF_ERROR(ReadFile(manifests_file, &text));
  std::vector<json> configurations;
  GAPTRAIN_RETURN_IF_ERROR(YamlDocuments(text, &configurations));
  std::set<std::pair<std::string, std::string>> allowed;
  for (const std::string& f : options_.frameworks) allowed.insert(FrameworkResources().at(f));
  const std::string base = "https://127.0.0.1:" + std::to_string(webhook_port_);
  json list = {{"apiVersion", "v1"}, {"kind", "List"}, {"items", json::array()}};
  for (json configuration : configurations) {
    // The name Kueue's kustomization gives it.
    const std::string name = "kueue-" + configuration["metadata"].value("name", "");
    configuration["metadata"] = {{"name", name}};
    json served = json::array();
    for (json webhook : configuration.value("webhooks", json::array())) {
      if (!ServedWebhook(webhook, allowed)) continue;
      const std::string path = webhook["clientConfig"]["service"].value("path", "");
      webhook["clientConfig"] = {{"url", base + path},
                                 {"caBundle", kube_testing::Base64Encode(ca_pem)}};
      served.push_back(webhook);
    }
    configuration["webhooks"] = served;
    webhook_configurations_.push_back(configuration.value("kind", "") + "/" + name);
    list["items"].push_back(configuration);
  }
  const std::string file = options_.work_dir + "/kueue-webhooks.json";
  const std::string bytes = list.dump(2);
  GAPTRAIN_RETURN_IF_ERROR(WriteFileAtomically(file, bytes.data(), bytes.size()));
  return cluster_->Kubectl({"apply", "--server-side", "-f", file});
}

Status KueueManager::WaitReady() {
  const SteadyClock::time_point deadline = SteadyClock::now() + std::chrono::seconds(60);
  std::string last = "no answer";
  for (;;) {
    if (wait_status_ != -1) return Failed("exited while starting");
    HttpClientResponse response;
    const Status s = HttpGet("127.0.0.1", probe_port_, "/readyz", 2.0, &response);
    if (s.ok() && response.status == 200) return Status::OK();
    last = s.ok() ? "HTTP " + std::to_string(response.status) + ": " + response.body : s.ToString();
    if (SteadyClock::now() > deadline) return Failed("not ready within 60 s; /readyz: " + last);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

Status KueueManager::Failed(const std::string& why) const {
  std::string exit;
  if (wait_status_ != -1) exit = " (" + DescribeWaitStatus(wait_status_) + ")";
  return Status::Unavailable("kueue-manager " + why + exit + "; its log:\n" + Tail(log_file_));
}

void KueueManager::Stop() {
  if (stopped_) return;
  stopped_ = true;
  // Before the server goes: a webhook nobody answers refuses requests.
  for (const std::string& configuration : webhook_configurations_) {
    cluster_->Kubectl({"delete", configuration, "--ignore-not-found"}).ok();
  }
  if (process_ != nullptr) {
    // SIGTERM, a moment to exit cleanly, then the destructor's SIGKILL.
    process_->SignalGroup(SIGTERM);
    const SteadyClock::time_point deadline = SteadyClock::now() + std::chrono::seconds(5);
    while (wait_status_ == -1 && SteadyClock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    process_.reset();
  }
}

}  // namespace kube_testing
}  // namespace gaptrain
