#include "operator/envtest/control_plane.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <mutex>
#include <sstream>
#include <thread>

#include "operator/envtest/api_resources.h"
#include "operator/envtest/envtest_assets.h"
#include "operator/envtest/free_port.h"
#include "operator/envtest/test_certificates.h"
#include "operator/kube/api_time.h"
#include "operator/kube/cluster_config.h"
#include "operator/kube/transport.h"
#include "services/base/atomic_file.h"
#include "services/base/file_contents.h"

namespace gaptrain {
namespace envtest {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using SteadyClock = std::chrono::steady_clock;

// Controllers a test cluster runs: all but those that need a cloud, node
// heartbeats (a test node sends none) or a service proxy.
constexpr char kControllers[] = "*,-nodelifecycle,-cloud-node-lifecycle,-service,-route,-nodeipam";

// 32 random hex digits.
std::string RandomToken() {
  unsigned char bytes[16] = {};
  std::ifstream urandom("/dev/urandom", std::ios::binary);
  urandom.read(reinterpret_cast<char*>(bytes), sizeof(bytes));
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned char b : bytes) {
    out += kHex[b >> 4];
    out += kHex[b & 15];
  }
  return out;
}

Status WriteText(const std::string& path, const std::string& text) {
  return WriteFileAtomically(path, text.data(), text.size());
}

std::string Tail(const std::string& path, size_t bytes) {
  std::string text;
  if (!ReadFile(path, &text).ok()) return "(no log at " + path + ")";
  if (text.size() > bytes) text = "..." + text.substr(text.size() - bytes);
  return text;
}

Status RemoveTree(const std::string& path) {
  std::error_code error;
  std::filesystem::remove_all(path, error);
  if (error) return Status::Internal("cannot remove " + path + ": " + error.message());
  return Status::OK();
}

std::string Field(const nlohmann::json& object, const char* key) {
  if (!object.is_object()) return "";
  auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : "";
}

// An AuditRecord from one line of the audit log (an audit.k8s.io/v1 Event).
Status ParseAuditEvent(const nlohmann::json& event, AuditRecord* out) {
  if (!event.is_object() || Field(event, "kind") != "Event") {
    return Status::InvalidArgument("not an audit Event");
  }
  AuditRecord record;
  const auto user = event.find("user");
  if (user != event.end()) record.user = Field(*user, "username");
  record.verb = Field(event, "verb");
  record.uri = Field(event, "requestURI");
  kube::ParseRfc3339(Field(event, "requestReceivedTimestamp"), &record.received);
  const auto ref = event.find("objectRef");
  if (ref != event.end()) {
    record.group = Field(*ref, "apiGroup");
    record.resource = Field(*ref, "resource");
    record.subresource = Field(*ref, "subresource");
    record.ns = Field(*ref, "namespace");
    record.name = Field(*ref, "name");
  }
  const auto status = event.find("responseStatus");
  if (status != event.end() && status->is_object()) {
    record.code = status->value("code", 0);
  }
  *out = std::move(record);
  return Status::OK();
}

}  // namespace

Status ControlPlane::Start(const Options& options, std::unique_ptr<ControlPlane>* out) {
  if (options.work_dir.empty()) return Status::InvalidArgument("ControlPlane: work_dir is empty");
  std::unique_ptr<ControlPlane> plane(new ControlPlane(options));
  Status s = plane->Launch();
  if (!s.ok()) {
    plane->Stop();
    return s;
  }
  *out = std::move(plane);
  return Status::OK();
}

ControlPlane::~ControlPlane() { Stop(); }

Status ControlPlane::Launch() {
  GAPTRAIN_RETURN_IF_ERROR(FindAssets(&assets_));
  const std::string release_dir = options_.minimum_supported_release ? "minimum/" : "";
  if (!release_dir.empty() && (options_.controller_manager || options_.scheduler)) {
    return Status::InvalidArgument(
        "ControlPlane: the minimum supported release is an API server and etcd only");
  }
  for (const char* tool : {"etcd", "kube-apiserver", "kubectl"}) {
    std::string path;
    GAPTRAIN_RETURN_IF_ERROR(FindTool(release_dir + tool, &path));
  }
  if (!release_dir.empty()) assets_ += "/minimum";
  if (options_.controller_manager) {
    std::string path;
    GAPTRAIN_RETURN_IF_ERROR(FindTool("kube-controller-manager", &path));
  }
  if (options_.scheduler) {
    std::string path;
    GAPTRAIN_RETURN_IF_ERROR(FindTool("kube-scheduler", &path));
  }
  pki_dir_ = options_.work_dir + "/pki";
  etcd_dir_ = options_.work_dir + "/etcd";
  logs_dir_ = options_.work_dir + "/logs";
  GAPTRAIN_RETURN_IF_ERROR(RemoveTree(pki_dir_));
  GAPTRAIN_RETURN_IF_ERROR(RemoveTree(etcd_dir_));
  for (const std::string& dir : {pki_dir_, etcd_dir_, logs_dir_}) {
    std::error_code error;
    std::filesystem::create_directories(dir, error);
    if (error) return Status::Internal("cannot make " + dir + ": " + error.message());
  }
  GAPTRAIN_RETURN_IF_ERROR(MakeCertificates());

  uint16_t etcd_client = 0, etcd_peer = 0;
  GAPTRAIN_RETURN_IF_ERROR(FreePort(false, &etcd_client));
  GAPTRAIN_RETURN_IF_ERROR(FreePort(false, &etcd_peer));
  GAPTRAIN_RETURN_IF_ERROR(FreePort(true, &port_));
  while (etcd_peer == etcd_client) GAPTRAIN_RETURN_IF_ERROR(FreePort(false, &etcd_peer));
  url_ = "https://127.0.0.1:" + std::to_string(port_);
  etcd_url_ = "http://127.0.0.1:" + std::to_string(etcd_client);
  const std::string& etcd_url = etcd_url_;

  admin_token_ = RandomToken();
  GAPTRAIN_RETURN_IF_ERROR(
      WriteText(pki_dir_ + "/tokens.csv",
                admin_token_ + ",envtest-admin,envtest-admin,\"system:masters\"\n"));
  admin_kubeconfig_file_ = options_.work_dir + "/admin.kubeconfig";
  GAPTRAIN_RETURN_IF_ERROR(WriteText(admin_kubeconfig_file_, Kubeconfig(admin_token_)));

  GAPTRAIN_RETURN_IF_ERROR(StartComponent(
      "etcd", {"--data-dir", etcd_dir_, "--listen-client-urls", etcd_url, "--advertise-client-urls",
               etcd_url, "--listen-peer-urls", "http://127.0.0.1:" + std::to_string(etcd_peer)}));

  std::vector<std::string> apiserver = {
      "--etcd-servers=" + etcd_url,
      "--bind-address=0.0.0.0",
      "--secure-port=" + std::to_string(port_),
      "--advertise-address=127.0.0.1",
      "--tls-cert-file=" + pki_dir_ + "/apiserver.crt",
      "--tls-private-key-file=" + pki_dir_ + "/apiserver.key",
      "--client-ca-file=" + ca_file_,
      "--token-auth-file=" + pki_dir_ + "/tokens.csv",
      "--authorization-mode=RBAC",
      "--service-account-issuer=https://kubernetes.default.svc",
      "--service-account-key-file=" + pki_dir_ + "/sa.pub",
      "--service-account-signing-key-file=" + pki_dir_ + "/sa.key",
      "--service-cluster-ip-range=10.96.0.0/16",
      "--allow-privileged=true",
  };
  if (!options_.uncached_resources.empty()) {
    std::string sizes;
    for (const std::string& resource : options_.uncached_resources) {
      if (resource.empty() || resource.find_first_of("#, ") != std::string::npos) {
        return Status::InvalidArgument("ControlPlane: uncached resource '" + resource +
                                       "' is not a resource name");
      }
      sizes += (sizes.empty() ? "" : ",") + resource + "#0";
    }
    apiserver.push_back("--watch-cache-sizes=" + sizes);
  }
  if (!options_.admission_plugins.empty()) {
    std::string plugins;
    for (const std::string& plugin : options_.admission_plugins) {
      if (plugin.empty() || plugin.find_first_of(", ") != std::string::npos) {
        return Status::InvalidArgument("ControlPlane: admission plugin '" + plugin +
                                       "' is not a plugin name");
      }
      plugins += (plugins.empty() ? "" : ",") + plugin;
    }
    // Added to the defaults (kube-apiserver's flag enables these on top).
    apiserver.push_back("--enable-admission-plugins=" + plugins);
  }
  if (options_.audit) {
    audit_file_ = logs_dir_ + "/audit.log";
    ::unlink(audit_file_.c_str());
    // Metadata of every request once answered (a watch: once started).
    GAPTRAIN_RETURN_IF_ERROR(WriteText(pki_dir_ + "/audit-policy.yaml",
                                       "apiVersion: audit.k8s.io/v1\n"
                                       "kind: Policy\n"
                                       "omitStages: [RequestReceived]\n"
                                       "rules:\n"
                                       "- level: Metadata\n"));
    apiserver.push_back("--audit-policy-file=" + pki_dir_ + "/audit-policy.yaml");
    apiserver.push_back("--audit-log-path=" + audit_file_);
    apiserver.push_back("--audit-log-mode=blocking");
  }
  GAPTRAIN_RETURN_IF_ERROR(StartComponent("kube-apiserver", apiserver));
  GAPTRAIN_RETURN_IF_ERROR(WaitReady());

  GAPTRAIN_RETURN_IF_ERROR(NewClient(admin_token_, &admin_));
  GAPTRAIN_RETURN_IF_ERROR(ApplyCrds(options_.crd_files));

  const std::vector<std::string> common = {
      "--kubeconfig=" + admin_kubeconfig_file_,
      "--authentication-kubeconfig=" + admin_kubeconfig_file_,
      "--authorization-kubeconfig=" + admin_kubeconfig_file_,
      "--leader-elect=false",
      "--bind-address=127.0.0.1",
  };
  if (options_.controller_manager) {
    uint16_t port = 0;
    GAPTRAIN_RETURN_IF_ERROR(FreePort(false, &port));
    std::vector<std::string> args = common;
    args.insert(args.end(), {"--secure-port=" + std::to_string(port),
                             "--service-account-private-key-file=" + pki_dir_ + "/sa.key",
                             "--root-ca-file=" + ca_file_, "--use-service-account-credentials=true",
                             std::string("--controllers=") + kControllers});
    GAPTRAIN_RETURN_IF_ERROR(StartComponent("kube-controller-manager", args));
  }
  if (options_.scheduler) {
    uint16_t port = 0;
    GAPTRAIN_RETURN_IF_ERROR(FreePort(false, &port));
    std::vector<std::string> args = common;
    args.push_back("--secure-port=" + std::to_string(port));
    GAPTRAIN_RETURN_IF_ERROR(StartComponent("kube-scheduler", args));
  }
  if (options_.controller_manager) {
    // Pods are admitted only once their namespace's ServiceAccount exists:
    // a test's first pod must not race the controller that makes it.
    const SteadyClock::time_point deadline = SteadyClock::now() + seconds(60);
    for (;;) {
      nlohmann::json account;
      if (admin_->Get(kServiceAccounts, "default", "default", &account).ok()) break;
      for (const auto& [name, process] : processes_) {
        if (!process->Running()) return ComponentFailed(name, "exited");
      }
      if (SteadyClock::now() > deadline) {
        return ComponentFailed("kube-controller-manager",
                               "made no ServiceAccount default/default within 60 s");
      }
      std::this_thread::sleep_for(milliseconds(50));
    }
  }
  return Status::OK();
}

Status ControlPlane::MakeCertificates() {
  ca_file_ = pki_dir_ + "/ca.crt";
  GAPTRAIN_RETURN_IF_ERROR(MakeTestCa(pki_dir_, "ca"));
  GAPTRAIN_RETURN_IF_ERROR(MakeTestLeaf(
      pki_dir_, "apiserver", "/CN=kube-apiserver",
      std::string("subjectAltName=IP:127.0.0.1,IP:") + kServiceIp +
          ",DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,"
          "DNS:kubernetes.default.svc.cluster.local\n"
          "extendedKeyUsage=serverAuth\n"));
  // The key that signs ServiceAccount tokens, and its public half that
  // verifies them.
  GAPTRAIN_RETURN_IF_ERROR(
      RunOpenssl(pki_dir_, "ecparam -name prime256v1 -genkey -noout -out sa.key"));
  GAPTRAIN_RETURN_IF_ERROR(RunOpenssl(pki_dir_, "ec -in sa.key -pubout -out sa.pub"));
  return ReadFile(ca_file_, &ca_pem_);
}

std::string ControlPlane::Kubeconfig(const std::string& token, const std::string& ns) const {
  std::ostringstream out;
  out << "apiVersion: v1\n"
      << "kind: Config\n"
      << "clusters:\n"
      << "- name: envtest\n"
      << "  cluster:\n"
      << "    server: " << url_ << "\n"
      << "    certificate-authority: " << ca_file_ << "\n"
      << "users:\n"
      << "- name: envtest-user\n"
      << "  user:\n"
      << "    token: " << token << "\n"
      << "contexts:\n"
      << "- name: envtest\n"
      << "  context:\n"
      << "    cluster: envtest\n"
      << "    user: envtest-user\n"
      << "    namespace: " << ns << "\n"
      << "current-context: envtest\n";
  return out.str();
}

Status ControlPlane::StartComponent(const std::string& component,
                                    const std::vector<std::string>& args) {
  Process::Spec spec;
  spec.binary = assets_ + "/" + component;
  spec.args = args;
  spec.log_file = LogFile(component);
  ::unlink(spec.log_file.c_str());
  std::unique_ptr<Process> process;
  Status s = Process::Start(spec, &process);
  if (!s.ok()) return s;
  processes_.emplace_back(component, std::move(process));
  return Status::OK();
}

Status ControlPlane::WaitReady() {
  std::unique_ptr<kube::Transport> transport;
  GAPTRAIN_RETURN_IF_ERROR(
      kube::Transport::New(ConfigFor(admin_token_), kube::Transport::Options(), &transport));
  const SteadyClock::time_point deadline = SteadyClock::now() + seconds(60);
  std::string last = "no answer";
  for (;;) {
    for (const auto& [name, process] : processes_) {
      if (!process->Running()) return ComponentFailed(name, "exited while starting");
    }
    kube::HttpReply reply;
    kube::HttpCall call;
    call.method = "GET";
    call.target = "/readyz";
    Status s = transport->RoundTrip(call, kube::Clock::now() + seconds(5), nullptr, &reply);
    if (s.ok() && reply.status == 200 && reply.body == "ok") return Status::OK();
    last = s.ok() ? "HTTP " + std::to_string(reply.status) + ": " + reply.body : s.ToString();
    if (SteadyClock::now() > deadline) {
      return ComponentFailed("kube-apiserver", "not ready within 60 s; /readyz: " + last);
    }
    std::this_thread::sleep_for(milliseconds(50));
  }
}

Status ControlPlane::ApplyCrds(const std::vector<std::string>& paths) const {
  if (paths.empty()) return Status::OK();
  for (const std::string& path : paths) {
    // Server-side: a large CRD (Kueue's Workload, 1.4 MB) does not fit the
    // last-applied annotation a client-side apply writes.
    GAPTRAIN_RETURN_IF_ERROR(Kubectl({"apply", "--server-side", "-f", path}));
  }
  return WaitCrdsEstablished();
}

// Polls rather than `kubectl wait --for=condition=Established`: kubectl
// fails outright ("accessor error: <nil>") on a CRD whose status has no
// conditions yet, which a CRD applied a moment ago may not have.
Status ControlPlane::WaitCrdsEstablished() const {
  const SteadyClock::time_point deadline = SteadyClock::now() + seconds(60);
  for (;;) {
    kube::ObjectList crds;
    Status s = admin_->List(kCustomResourceDefinitions, "", kube::ListOptions(), &crds);
    std::string waiting;
    for (const nlohmann::json& crd : crds.items) {
      bool established = false;
      const nlohmann::json status = crd.value("status", nlohmann::json::object());
      for (const nlohmann::json& c : status.value("conditions", nlohmann::json::array())) {
        established |= c.value("type", "") == "Established" && c.value("status", "") == "True";
      }
      if (!established)
        waiting = crd.value("metadata", nlohmann::json::object()).value("name", "?");
    }
    if (s.ok() && waiting.empty()) return Status::OK();
    if (SteadyClock::now() > deadline) {
      return Status::Unavailable("CustomResourceDefinitions not Established within 60 s: " +
                                 (s.ok() ? waiting : s.ToString()));
    }
    std::this_thread::sleep_for(milliseconds(50));
  }
}

Status ControlPlane::ComponentFailed(const std::string& component, const std::string& why) const {
  for (const auto& [name, process] : processes_) {
    if (name == component && process->wait_status() != -1) {
      return Status::Unavailable(component + " " + why + " (" +
                                 DescribeWaitStatus(process->wait_status()) + "); its log:\n" +
                                 Tail(LogFile(component), 3000));
    }
  }
  return Status::Unavailable(component + " " + why + "; its log:\n" +
                             Tail(LogFile(component), 3000));
}

void ControlPlane::Stop() {
  if (stopped_) return;
  stopped_ = true;
  if (admin_ != nullptr) admin_->Shutdown();
  // The controllers and the API server first, etcd last, each given a
  // moment to exit cleanly.
  for (auto it = processes_.rbegin(); it != processes_.rend(); ++it) {
    it->second->Stop(seconds(5));
  }
  processes_.clear();
  if (!etcd_dir_.empty()) RemoveTree(etcd_dir_);
  if (!pki_dir_.empty()) RemoveTree(pki_dir_);
}

std::map<std::string, pid_t> ControlPlane::ComponentPids() const {
  std::map<std::string, pid_t> pids;
  for (const auto& [name, process] : processes_) pids[name] = process->pid();
  return pids;
}

std::string ControlPlane::LogFile(const std::string& component) const {
  return logs_dir_ + "/" + component + ".log";
}

kube::ClusterConfig ControlPlane::ConfigFor(const std::string& token) const {
  kube::ClusterConfig config;
  config.server = url_;
  config.ca_pem = ca_pem_;
  config.token = token;
  config.source = "envtest";
  return config;
}

Status ControlPlane::NewClient(const std::string& token,
                               std::unique_ptr<kube::Client>* client) const {
  kube::ClientOptions options;
  options.field_manager = "envtest";
  options.user_agent = "envtest";
  return kube::Client::New(ConfigFor(token), options, client);
}

Status ControlPlane::Kubectl(const std::vector<std::string>& args, std::string* output) const {
  // Distinct logs for calls from several threads at once.
  static std::atomic<int> calls{0};
  const std::string log = logs_dir_ + "/kubectl-" + std::to_string(++calls) + ".log";
  Process::Spec spec;
  spec.binary = assets_ + "/kubectl";
  spec.args = {"--kubeconfig", admin_kubeconfig_file_};
  spec.args.insert(spec.args.end(), args.begin(), args.end());
  spec.log_file = log;
  std::unique_ptr<Process> process;
  GAPTRAIN_RETURN_IF_ERROR(Process::Start(spec, &process));
  const bool exited = process->WaitExit(seconds(60));
  std::string text;
  ReadFile(log, &text).ok();
  ::unlink(log.c_str());
  if (output != nullptr) *output = text;
  std::string command = "kubectl";
  for (const std::string& arg : args) command += " " + arg;
  if (!exited) return Status::Unavailable(command + ": no exit within 60 s:\n" + text);
  const int status = process->wait_status();
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return Status::Internal(command + ": " + DescribeWaitStatus(status) + ":\n" + text);
  }
  return Status::OK();
}

Status ControlPlane::CreateNamespace(const std::string& name) const {
  kube::ApiError error;
  Status s =
      admin_->Create(kNamespaces, "",
                     {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", name}}}},
                     nullptr, &error);
  if (!s.ok() && !kube::IsAlreadyExists(s)) return s;
  if (options_.controller_manager) return Status::OK();
  s = admin_->Create(kServiceAccounts, name,
                     {{"apiVersion", "v1"},
                      {"kind", "ServiceAccount"},
                      {"metadata", {{"name", "default"}, {"namespace", name}}}},
                     nullptr, &error);
  if (!s.ok() && !kube::IsAlreadyExists(s)) return s;
  return Status::OK();
}

Status ControlPlane::ServiceAccountToken(const std::string& ns, const std::string& name,
                                         std::string* token) const {
  std::string output;
  GAPTRAIN_RETURN_IF_ERROR(
      Kubectl({"create", "token", name, "--namespace", ns, "--duration=1h"}, &output));
  while (!output.empty() && (output.back() == '\n' || output.back() == ' ')) output.pop_back();
  if (output.empty() || output.find_first_of(" \n") != std::string::npos) {
    return Status::Internal("kubectl create token " + name + " -n " + ns +
                            " printed no token: " + output);
  }
  *token = output;
  return Status::OK();
}

Status ControlPlane::CompactEtcd(int64_t* revision) const {
  if (etcd_url_.empty()) return Status::FailedPrecondition("the control plane is not running");
  kube::ClusterConfig config;
  config.server = etcd_url_;
  config.source = "envtest etcd";
  std::unique_ptr<kube::Transport> transport;
  GAPTRAIN_RETURN_IF_ERROR(kube::Transport::New(config, kube::Transport::Options(), &transport));
  // etcd's JSON gateway (etcd 3.4+). Any response's header carries the
  // current revision; int64 fields are JSON strings there.
  auto call = [&](const std::string& path, const nlohmann::json& body, nlohmann::json* out) {
    kube::HttpReply reply;
    kube::HttpCall http{"POST", path, "application/json", body.dump()};
    GAPTRAIN_RETURN_IF_ERROR(
        transport->RoundTrip(http, kube::Clock::now() + seconds(30), nullptr, &reply));
    *out = nlohmann::json::parse(reply.body, nullptr, false);
    if (reply.status != 200 || !out->is_object()) {
      return Status::Internal("etcd " + path + ": HTTP " + std::to_string(reply.status) + ": " +
                              reply.body);
    }
    return Status::OK();
  };
  nlohmann::json range;
  GAPTRAIN_RETURN_IF_ERROR(call("/v3/kv/range", {{"key", "AA=="}}, &range));  // the key "\0"
  std::string current;
  const auto header = range.find("header");
  if (header != range.end()) current = Field(*header, "revision");
  if (current.empty()) return Status::Internal("etcd /v3/kv/range: no revision: " + range.dump());
  nlohmann::json compacted;
  // physical: answered once the old revisions are gone, not merely scheduled.
  GAPTRAIN_RETURN_IF_ERROR(
      call("/v3/kv/compaction", {{"revision", current}, {"physical", true}}, &compacted));
  if (revision != nullptr) *revision = std::stoll(current);
  return Status::OK();
}

Status ControlPlane::AuditLog(std::vector<AuditRecord>* records) const {
  records->clear();
  if (audit_file_.empty()) {
    return Status::FailedPrecondition("the control plane was started without Options::audit");
  }
  // Tests poll this; the log only grows, so only what was appended since
  // the last call is read, up to its last complete line.
  std::lock_guard<std::mutex> lock(audit_mu_);
  std::ifstream in(audit_file_, std::ios::binary);
  if (!in) return Status::NotFound("no audit log at " + audit_file_);
  in.seekg(static_cast<std::streamoff>(audit_read_));
  std::string appended((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t complete = appended.rfind('\n');
  if (complete != std::string::npos) {
    audit_read_ += complete + 1;
    size_t start = 0;
    while (start <= complete) {
      const size_t end = appended.find('\n', start);
      const nlohmann::json event =
          nlohmann::json::parse(appended.substr(start, end - start), nullptr, false);
      start = end + 1;
      if (event.is_discarded()) continue;
      // A watch is logged when it starts and again when it ends: keep the first.
      if (Field(event, "stage") == "ResponseComplete" && Field(event, "verb") == "watch") continue;
      AuditRecord record;
      if (ParseAuditEvent(event, &record).ok()) audit_records_.push_back(std::move(record));
    }
  }
  *records = audit_records_;
  return Status::OK();
}

}  // namespace envtest
}  // namespace gaptrain
