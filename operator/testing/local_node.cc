#include "operator/testing/local_node.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <thread>

#include "operator/kube/api_error.h"
#include "operator/testing/cluster_dns.h"
#include "operator/testing/cluster_hosts.h"
#include "operator/testing/container_prober.h"
#include "operator/testing/container_process.h"
#include "operator/testing/json_fields.h"
#include "operator/testing/pod_status.h"
#include "operator/testing/pod_volumes.h"
#include "services/base/file_contents.h"
#include "services/base/os_error.h"

namespace gaptrain {
namespace kube_testing {

using nlohmann::json;
using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

namespace {

constexpr char kDefaultPath[] = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
constexpr char kNodeShutdownMessage[] = "Pod was terminated in response to imminent node shutdown.";
// How often a pod that cannot start yet is tried again, besides after
// every change to the API objects.
constexpr std::chrono::seconds kRetryInterval{1};
// Linux limits hostnames to 64 bytes; the kubelet truncates pod names to 63.
constexpr size_t kMaxHostname = 63;
// Marks the PersistentVolumes this node provisioned (as a provisioner's
// pv.kubernetes.io/provisioned-by).
constexpr char kProvisionedBy[] = "gaptrain.io/local-node";

constexpr kube::Resource kNodes{"", "v1", "nodes", "Node", false, ""};
constexpr kube::Resource kPersistentVolumes{"", "v1", "persistentvolumes", "PersistentVolume",
                                            false, ""};
// ClusterSnapshot::Resources(), in that order, then the node's own.
const std::vector<kube::Resource>& WatchedResources() {
  static const std::vector<kube::Resource> resources = {
      kube::kPods,      kube::kServices, kube::kSecrets, kube::kConfigMaps,
      kube::kPersistentVolumeClaims, kPersistentVolumes};
  return resources;
}

bool IsDeleting(const json& object) {
  return FindField(object, {"metadata", "deletionTimestamp"}) != nullptr;
}

std::string Uid(const json& object) { return StringField(object, {"metadata", "uid"}); }

// Sets NAME in `env`, replacing an earlier value in place.
void SetVariable(EnvironmentList* env, const std::string& name, const std::string& value) {
  for (auto& [n, v] : *env) {
    if (n == name) {
      v = value;
      return;
    }
  }
  env->emplace_back(name, value);
}

bool IsExecutableFile(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(path.c_str(), X_OK) == 0;
}

// The binary `command` names, searched on `path_variable` like execvp, or
// "" when there is none.
std::string FindExecutable(const std::string& command, const std::string& path_variable,
                           const std::string& working_dir) {
  if (command.find('/') != std::string::npos) {
    if (command[0] == '/') return command;
    return (working_dir.empty() ? std::string("/") : working_dir + "/") + command;
  }
  std::istringstream dirs(path_variable);
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    const std::string candidate = (dir.empty() ? "." : dir) + "/" + command;
    if (IsExecutableFile(candidate)) return candidate;
  }
  return "";
}

// The grace period of the pod's spec (30 when unset, as defaulted).
int64_t TerminationGracePeriod(const json& pod) {
  return IntField(pod, {"spec", "terminationGracePeriodSeconds"}, 30);
}

}  // namespace

// What starting a pod's container takes, worked out before anything runs.
struct LocalNode::StartPlan {
  ContainerProcess::Spec process;
  std::optional<ProbeSpec> readiness;
  std::optional<ProbeSpec> liveness;
  int64_t liveness_grace_seconds = 30;
};

struct LocalNode::PodRuntime {
  // Written by the reaper thread, read by the node thread.
  struct Exit {
    std::atomic<int> wait_status{0};
    std::atomic<bool> exited{false};
  };

  std::string ns;
  std::string name;
  std::string uid;
  std::string dir;  // pods_dir_/UID: hosts file, secret/configMap/emptyDir volumes
  std::string hosts_file;
  std::string hosts_content;  // what hosts_file holds
  std::string resolv_conf;
  std::string log_file;
  bool has_network = false;
  PodNetwork::PodInterface network;
  PodState state;
  std::shared_ptr<Exit> exit = std::make_shared<Exit>();
  std::unique_ptr<ContainerProcess> process;
  std::unique_ptr<ContainerProber> readiness;
  std::unique_ptr<ContainerProber> liveness;
  int64_t liveness_grace_seconds = 30;
  Clock::time_point retry_at;  // while waiting
  uint64_t tried_at_version = 0;
  bool terminating = false;
  bool killed = false;
  Clock::time_point kill_deadline;
  bool out_of_memory = false;
  bool delete_after_exit = false;  // the node shut down under it
  // The API holds the status the node last worked out (WriteStatus).
  bool status_written = false;
  bool deletion_confirmed = false;
};

LocalNode::LocalNode(Options options) : options_(std::move(options)) {}

Status LocalNode::Start(const kube::ClusterConfig& config, const Options& options,
                        std::unique_ptr<LocalNode>* node) {
  if (options.work_dir.empty()) return Status::InvalidArgument("work_dir: Required value");
  if (options.node_name.empty()) return Status::InvalidArgument("node_name: Required value");
  if (!options.api_service_host.empty() && options.api_service_port == 0) {
    return Status::InvalidArgument("api_service_port: Required value with api_service_host");
  }
  Options resolved = options;
  if (resolved.log_dir.empty()) resolved.log_dir = options.work_dir + "/logs";
  if (resolved.claims_dir.empty()) resolved.claims_dir = options.work_dir + "/claims";
  for (auto& [command, path] : resolved.binaries) {
    if (command.empty() || command.find('/') != std::string::npos) {
      return Status::InvalidArgument("binaries: \"" + command +
                                     "\" is not a command name (no '/')");
    }
    std::error_code ec;
    const fs::path absolute = fs::canonical(path, ec);
    if (ec || !IsExecutableFile(absolute.string())) {
      return Status::InvalidArgument("binaries[" + command + "]: " + path +
                                     " is not an executable file");
    }
    path = absolute.string();
  }
  std::unique_ptr<LocalNode> made(new LocalNode(resolved));
  kube::ClientOptions client_options;
  client_options.field_manager = "local-node";
  client_options.user_agent = "gaptrain-local-node";
  GAPTRAIN_RETURN_IF_ERROR(kube::Client::New(config, client_options, &made->client_));
  GAPTRAIN_RETURN_IF_ERROR(kube::Transport::New(config, kube::Transport::Options(),
                                                &made->transport_));
  made->bin_dir_ = options.work_dir + "/bin";
  made->pods_dir_ = options.work_dir + "/pods";
  std::error_code ec;
  fs::remove_all(made->bin_dir_, ec);
  fs::remove_all(made->pods_dir_, ec);
  for (const std::string& dir :
       {made->bin_dir_, made->pods_dir_, resolved.log_dir, resolved.claims_dir}) {
    GAPTRAIN_RETURN_IF_ERROR(MakeDirs(dir));
  }
  for (const auto& [command, path] : resolved.binaries) {
    const std::string link = made->bin_dir_ + "/" + command;
    if (symlink(path.c_str(), link.c_str()) != 0) return OsError(link, "symlink", errno);
  }
  GAPTRAIN_RETURN_IF_ERROR(PodNetwork::Create(options.work_dir, &made->network_));
  made->host_ip_ = made->network_->gateway_ip();
  made->subnet_ = made->network_->subnet();
  made->name_prefix_ = made->network_->name_prefix();
  if (!resolved.api_service_host.empty()) {
    GAPTRAIN_RETURN_IF_ERROR(made->network_->AddHostAddress(resolved.api_service_host));
  }
  GAPTRAIN_RETURN_IF_ERROR(ClusterDns::Start(made->host_ip_, 53, &made->dns_));
  GAPTRAIN_RETURN_IF_ERROR(made->StartInformers());
  GAPTRAIN_RETURN_IF_ERROR(made->Register());
  made->runner_ = std::thread([n = made.get()] { n->Run(); });
  *node = std::move(made);
  return Status::OK();
}

Status LocalNode::StartInformers() {
  for (const kube::Resource& resource : WatchedResources()) {
    controller::Informer::Options informer_options;
    informer_options.reflector.watch_timeout_seconds = 60;
    auto informer = std::make_unique<controller::Informer>(
        client_.get(), resource, kube::kAllNamespaces, informer_options);
    auto changed = [this] {
      ++changes_;
      Wake();
    };
    controller::EventHandlers handlers;
    handlers.on_add = [changed](const json&) { changed(); };
    handlers.on_update = [changed](const json&, const json&) { changed(); };
    handlers.on_delete = [changed](const json&, bool) { changed(); };
    handlers.on_synced = changed;
    GAPTRAIN_RETURN_IF_ERROR(informer->AddEventHandlers(std::move(handlers)));
    GAPTRAIN_RETURN_IF_ERROR(informer->Start());
    informers_.push_back(std::move(informer));
  }
  for (const auto& informer : informers_) {
    if (!informer->WaitForSync(std::chrono::seconds(30))) {
      return Status::Unavailable("test node: the " + std::string(informer->resource().plural) +
                                 " informer did not sync within 30 s");
    }
  }
  return Status::OK();
}

Status LocalNode::Register() {
  json labels = {{"kubernetes.io/hostname", options_.node_name}, {"kubernetes.io/os", "linux"}};
  for (const auto& [key, value] : options_.labels) labels[key] = value;
  const json node = {{"apiVersion", "v1"},
                     {"kind", "Node"},
                     {"metadata", {{"name", options_.node_name}, {"labels", labels}}}};
  Status s = client_->Create(kNodes, "", node, nullptr);
  if (!s.ok() && !kube::IsAlreadyExists(s)) return s;
  s = client_->MergePatch(kNodes, "", options_.node_name, {{"metadata", {{"labels", labels}}}},
                          nullptr);
  if (!s.ok()) return s;
  const json resources = {{"cpu", options_.allocatable_cpu},
                          {"memory", options_.allocatable_memory},
                          {"pods", "110"}};
  const std::string now = Now();
  const json status = {
      {"status",
       {{"conditions",
         {{{"type", "Ready"},
           {"status", "True"},
           {"reason", "KubeletReady"},
           {"message", "gaptrain test node is posting ready status"},
           {"lastHeartbeatTime", now},
           {"lastTransitionTime", now}}}},
        {"addresses",
         {{{"type", "InternalIP"}, {"address", host_ip_}},
          {{"type", "Hostname"}, {"address", options_.node_name}}}},
        {"capacity", resources},
        {"allocatable", resources}}}};
  GAPTRAIN_RETURN_IF_ERROR(
      client_->MergePatch(kNodes.Subresource("status"), "", options_.node_name, status, nullptr));
  // The admission taints a new Node not-ready; the node lifecycle
  // controller lifts that once the kubelet posts Ready, but it needs
  // heartbeats, which this node does not send, so it is off.
  json current;
  GAPTRAIN_RETURN_IF_ERROR(client_->Get(kNodes, "", options_.node_name, &current));
  json taints = json::array();
  for (const json& taint : ListField(current, {"spec", "taints"})) {
    if (StringField(taint, {"key"}) != "node.kubernetes.io/not-ready") taints.push_back(taint);
  }
  return client_->MergePatch(kNodes, "", options_.node_name,
                             {{"spec", {{"taints", taints.empty() ? json(nullptr) : taints}}}},
                             nullptr);
}

ClusterSnapshot LocalNode::Snapshot() const {
  ClusterSnapshot snapshot(changes_.load());
  const std::vector<std::string>& names = ClusterSnapshot::Resources();
  for (size_t i = 0; i < names.size(); ++i) {
    for (json& object : informers_[i]->List("")) snapshot.Put(names[i], std::move(object));
  }
  return snapshot;
}

std::string LocalNode::Now() {
  const std::time_t now = std::time(nullptr);
  std::tm utc;
  gmtime_r(&now, &utc);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &utc);
  return buf;
}

Status LocalNode::IssueToken(const json& pod, const std::string& audience,
                             int64_t expiration_seconds, std::string* token) {
  const std::string ns = StringField(pod, {"metadata", "namespace"});
  std::string account = StringField(pod, {"spec", "serviceAccountName"});
  if (account.empty()) account = "default";
  json request = {{"apiVersion", "authentication.k8s.io/v1"},
                  {"kind", "TokenRequest"},
                  {"spec",
                   {{"expirationSeconds", std::max<int64_t>(expiration_seconds, 600)},
                    {"boundObjectRef",
                     {{"apiVersion", "v1"},
                      {"kind", "Pod"},
                      {"name", StringField(pod, {"metadata", "name"})},
                      {"uid", Uid(pod)}}}}}};
  if (!audience.empty()) request["spec"]["audiences"] = {audience};
  kube::HttpCall call;
  call.method = "POST";
  call.target = "/api/v1/namespaces/" + ns + "/serviceaccounts/" + account + "/token";
  call.content_type = "application/json";
  call.body = request.dump();
  kube::HttpReply reply;
  GAPTRAIN_RETURN_IF_ERROR(transport_->RoundTrip(
      call, kube::Clock::now() + std::chrono::seconds(10), nullptr, &reply));
  const json answer = json::parse(reply.body, nullptr, false);
  const std::string issued = answer.is_object() ? StringField(answer, {"status", "token"}) : "";
  if (reply.status != 201 || issued.empty()) {
    return Status::Unavailable("TokenRequest for serviceaccount " + ns + "/" + account +
                               ": HTTP " + std::to_string(reply.status) + ": " +
                               reply.body.substr(0, 300));
  }
  *token = issued;
  return Status::OK();
}

LocalNode::~LocalNode() { Stop(); }

void LocalNode::Stop() {
  std::lock_guard<std::mutex> stop_lock(stop_mu_);
  {
    std::lock_guard<std::mutex> lock(wake_mu_);
    stopping_ = true;
  }
  wake_cv_.notify_all();
  if (runner_.joinable()) runner_.join();
  for (auto& informer : informers_) informer->Stop();
  if (client_ != nullptr) client_->Shutdown();
  if (transport_ != nullptr) transport_->Shutdown();
  std::lock_guard<std::mutex> lock(mu_);
  if (stopped_) return;
  stopped_ = true;
  for (auto& [uid, pod] : pods_) Remove(pod.get());
  pods_.clear();
  if (dns_ != nullptr) dns_->Stop();
  network_.reset();
  std::error_code ec;
  fs::remove_all(pods_dir_, ec);
  fs::remove_all(bin_dir_, ec);
}

void LocalNode::Wake() {
  {
    std::lock_guard<std::mutex> lock(wake_mu_);
    wake_ = true;
  }
  wake_cv_.notify_all();
}

void LocalNode::Run() {
  for (;;) {
    Clock::time_point deadline;
    {
      std::lock_guard<std::mutex> lock(mu_);
      deadline = NextDeadline();
    }
    {
      std::unique_lock<std::mutex> lock(wake_mu_);
      wake_cv_.wait_until(lock, deadline, [this] { return wake_ || stopping_; });
      if (stopping_) return;
      wake_ = false;
    }
    const ClusterSnapshot snapshot = Snapshot();
    std::lock_guard<std::mutex> lock(mu_);
    Pass(snapshot);
  }
}

Clock::time_point LocalNode::NextDeadline() const {
  Clock::time_point next = Clock::now() + std::chrono::hours(1);
  for (const auto& [uid, pod] : pods_) {
    if (pod->terminating && !pod->killed) next = std::min(next, pod->kill_deadline);
    if (pod->state.container.phase == ContainerState::Phase::kWaiting &&
        !pod->deletion_confirmed) {
      next = std::min(next, pod->retry_at);
    }
  }
  return next;
}

void LocalNode::Pass(const ClusterSnapshot& snapshot) {
  ProvisionVolumes(snapshot);
  // Once per pass: the node's DNS and every pod's hosts file read it.
  service_records_ = ServiceRecords(snapshot);
  dns_->SetRecords(service_records_);
  std::vector<const json*> mine;
  std::set<std::string> present;
  for (const json* pod : snapshot.All("pods")) {
    if (StringField(*pod, {"spec", "nodeName"}) != options_.node_name) continue;
    mine.push_back(pod);
    present.insert(Uid(*pod));
  }
  // Pods that are gone first: a pod recreated under the same name gets the
  // same address, which its predecessor must have given up.
  for (auto it = pods_.begin(); it != pods_.end();) {
    if (present.count(it->first) != 0) {
      ++it;
      continue;
    }
    Remove(it->second.get());
    it = pods_.erase(it);
  }
  for (const json* pod : mine) {
    const std::string uid = Uid(*pod);
    if (pods_.count(uid) == 0) {
      const std::string phase = StringField(*pod, {"status", "phase"});
      if (phase == "Succeeded" || phase == "Failed") continue;  // ended before this node
      if (IsDeleting(*pod)) {
        // Never started here: nothing to stop.
        kube::DeleteOptions now;
        now.grace_period_seconds = 0;
        now.precondition_uid = uid;
        client_->Delete(kube::kPods, StringField(*pod, {"metadata", "namespace"}),
                        StringField(*pod, {"metadata", "name"}), now);
        continue;
      }
      Admit(*pod);
    }
    Advance(pods_[uid].get(), *pod, snapshot);
  }
  for (auto& [uid, pod] : pods_) UpdateHosts(pod.get(), snapshot);
}

void LocalNode::ProvisionVolumes(const ClusterSnapshot& snapshot) {
  std::set<std::string> provided;  // claim uids some volume is for
  for (const json& volume : informers_.back()->List("")) {
    const std::string claim = StringField(volume, {"spec", "claimRef", "uid"});
    if (!claim.empty()) provided.insert(claim);
    const bool mine =
        StringField(volume, {"metadata", "annotations", "pv.kubernetes.io/provisioned-by"}) ==
        kProvisionedBy;
    if (mine && StringField(volume, {"status", "phase"}) == "Released" && !IsDeleting(volume)) {
      // Its claim is gone: the volume goes too (the directory stays).
      kube::DeleteOptions options;
      options.precondition_uid = Uid(volume);
      client_->Delete(kPersistentVolumes, "", StringField(volume, {"metadata", "name"}), options);
    }
  }
  for (const json* claim : snapshot.All("persistentvolumeclaims")) {
    const std::string uid = Uid(*claim);
    if (StringField(*claim, {"status", "phase"}) != "Pending" || IsDeleting(*claim) ||
        !StringField(*claim, {"spec", "volumeName"}).empty() || provided.count(uid) != 0) {
      continue;
    }
    const std::string dir = ClaimDirectory(options_.claims_dir, *claim);
    MakeDirs(dir);
    const json* size = FindField(*claim, {"spec", "resources", "requests", "storage"});
    const json* modes = FindField(*claim, {"spec", "accessModes"});
    json volume = {
        {"apiVersion", "v1"},
        {"kind", "PersistentVolume"},
        {"metadata",
         {{"name", "pvc-" + uid},
          {"annotations", {{"pv.kubernetes.io/provisioned-by", kProvisionedBy}}}}},
        {"spec",
         {{"capacity", {{"storage", size != nullptr ? *size : json("1Gi")}}},
          {"accessModes", modes != nullptr ? *modes : json::array({"ReadWriteOnce"})},
          {"persistentVolumeReclaimPolicy", "Retain"},
          {"storageClassName", StringField(*claim, {"spec", "storageClassName"})},
          {"volumeMode", "Filesystem"},
          {"hostPath", {{"path", dir}, {"type", "Directory"}}},
          {"claimRef",
           {{"apiVersion", "v1"},
            {"kind", "PersistentVolumeClaim"},
            {"namespace", StringField(*claim, {"metadata", "namespace"})},
            {"name", StringField(*claim, {"metadata", "name"})},
            {"uid", uid}}}}}};
    client_->Create(kPersistentVolumes, "", volume, nullptr);
  }
}

void LocalNode::Admit(const json& object) {
  auto pod = std::make_unique<PodRuntime>();
  pod->ns = StringField(object, {"metadata", "namespace"});
  pod->name = StringField(object, {"metadata", "name"});
  pod->uid = Uid(object);
  pod->dir = pods_dir_ + "/" + pod->uid;
  pod->hosts_file = pod->dir + "/hosts";
  pod->resolv_conf = pod->dir + "/resolv.conf";
  pod->log_file = options_.log_dir + "/" + pod->ns + "_" + pod->name + "_" + pod->uid + ".log";
  pod->state.host_ip = host_ip_;
  pod->state.start_time = Now();
  pod->retry_at = Clock::now();
  if (StringField(object, {"status", "phase"}) == "Running") {
    // It ran on a node of this name that is gone (a node restart): its
    // container cannot be found, so restartPolicy Never ends it, as the
    // kubelet reports it.
    pod->state.start_time = StringField(object, {"status", "startTime"});
    pod->state.pod_ip = StringField(object, {"status", "podIP"});
    pod->state.container.reason = "ContainerStatusUnknown";
    pod->state.container.message =
        "The container could not be located when the pod was terminated";
    SetTerminated(SIGKILL, Now(), &pod->state.container);
    pod->state.container.signal = 0;
  }
  MakeDirs(pod->dir);
  // As the kubelet writes it for dnsPolicy ClusterFirst; the nameserver is
  // the node's cluster DNS (cluster_dns.h) on its bridge.
  std::ofstream(pod->resolv_conf)
      << "search " << pod->ns << ".svc.cluster.local svc.cluster.local cluster.local\n"
      << "nameserver " << host_ip_ << "\n"
      << "options ndots:5\n";
  // The hosts file exists before the first start, as a mount source.
  std::ofstream(pod->hosts_file, std::ios::app);
  log_paths_[pod->ns + "/" + pod->name] = pod->log_file;
  pods_[pod->uid] = std::move(pod);
}

void LocalNode::Advance(PodRuntime* pod, const json& object, const ClusterSnapshot& snapshot) {
  const bool deleting = IsDeleting(object);
  ContainerState& container = pod->state.container;
  if (container.phase == ContainerState::Phase::kRunning && pod->exit->exited) {
    pod->readiness.reset();
    pod->liveness.reset();
    pod->process.reset();
    if (pod->out_of_memory) container.reason = "OOMKilled";
    SetTerminated(pod->exit->wait_status, Now(), &container);
    ReleaseNetwork(pod);
  }
  if (container.phase == ContainerState::Phase::kWaiting) {
    if (deleting) {
      ReleaseNetwork(pod);
      ConfirmDeletion(pod);
      return;
    }
    // Tried again when the API objects changed, and now and then.
    if (snapshot.version() != pod->tried_at_version || Clock::now() >= pod->retry_at) {
      pod->tried_at_version = snapshot.version();
      TryStart(pod, object, snapshot);
    }
  }
  if (container.phase == ContainerState::Phase::kRunning) {
    if (!pod->terminating && deleting) {
      BeginTermination(pod, IntField(object, {"metadata", "deletionGracePeriodSeconds"},
                                     TerminationGracePeriod(object)));
    }
    if (!pod->terminating && pod->liveness != nullptr && !pod->liveness->result()) {
      BeginTermination(pod, pod->liveness_grace_seconds);
    }
    if (pod->terminating && !pod->killed && Clock::now() >= pod->kill_deadline) {
      pod->process->SignalGroup(SIGKILL);
      pod->killed = true;
    }
    container.ready = pod->readiness == nullptr || pod->readiness->result();
  }
  WriteStatus(pod, object);
  // Only once the API has the terminated state: deleted before that, the
  // pod would go with the status it had (as the kubelet, which deletes a
  // pod only after its final status is written).
  if (container.phase == ContainerState::Phase::kTerminated && pod->status_written &&
      (deleting || pod->delete_after_exit)) {
    ConfirmDeletion(pod);
  }
}

Status LocalNode::PlanStart(PodRuntime* pod, const json& object, const ClusterSnapshot& snapshot,
                            StartPlan* plan, std::string* waiting_reason) {
  ContainerProcess::Spec* spec = &plan->process;
  *waiting_reason = "CreateContainerConfigError";
  const json containers = ListField(object, {"spec", "containers"});
  if (containers.size() != 1 || !ListField(object, {"spec", "initContainers"}).empty()) {
    return Status::InvalidArgument(
        "spec.containers: the test node runs pods with exactly one container and no init "
        "containers");
  }
  const json& container = containers[0];
  // What fieldRefs read, before the API has it.
  json pod_view = object;
  pod_view["spec"]["nodeName"] = options_.node_name;
  pod_view["status"]["podIP"] = pod->state.pod_ip;
  pod_view["status"]["hostIP"] = host_ip_;

  if (FindField(container, {"startupProbe"}) != nullptr) {
    return Status::InvalidArgument("startupProbe: not supported by the test node");
  }
  for (const char* field : {"readinessProbe", "livenessProbe"}) {
    const json* p = FindField(container, {field});
    if (p == nullptr) continue;
    std::optional<ProbeSpec>& probe =
        std::string(field) == "readinessProbe" ? plan->readiness : plan->liveness;
    probe.emplace();
    GAPTRAIN_RETURN_IF_ERROR(ParseProbe(*p, container, pod->state.pod_ip, field, &*probe));
  }
  plan->liveness_grace_seconds = IntField(container, {"livenessProbe", "terminationGracePeriodSeconds"},
                                          TerminationGracePeriod(object));
  EnvironmentList container_env;
  GAPTRAIN_RETURN_IF_ERROR(ResolveContainerEnv(
      pod_view, container, snapshot, &container_env,
      {{"cpu", options_.allocatable_cpu}, {"memory", options_.allocatable_memory}}));
  EnvironmentList env = {{"PATH", bin_dir_ + ":" + kDefaultPath},
                         {"HOSTNAME", pod->name},
                         {"HOME", "/root"}};
  if (!options_.api_service_host.empty()) {
    const std::string port = std::to_string(options_.api_service_port);
    SetVariable(&env, "KUBERNETES_SERVICE_HOST", options_.api_service_host);
    SetVariable(&env, "KUBERNETES_SERVICE_PORT", port);
    SetVariable(&env, "KUBERNETES_SERVICE_PORT_HTTPS", port);
    SetVariable(&env, "KUBERNETES_PORT", "tcp://" + options_.api_service_host + ":" + port);
  }
  for (const auto& [name, value] : options_.extra_env) SetVariable(&env, name, value);
  for (const auto& [name, value] : container_env) SetVariable(&env, name, value);
  GAPTRAIN_RETURN_IF_ERROR(ResolveCommand(container, env, &spec->argv));

  Status volumes = PreparePodVolumes(
      pod_view, container, snapshot, pod->dir, options_.claims_dir,
      [this](const json& p, const std::string& audience, int64_t seconds, std::string* token) {
        return IssueToken(p, audience, seconds, token);
      },
      &spec->mounts);
  if (!volumes.ok()) {
    if (volumes.code() != Status::Code::kInvalidArgument) *waiting_reason = "ContainerCreating";
    return volumes;
  }
  // Cluster DNS: Service names are in the hosts file and answered by the
  // node's DNS, which says at once that any other name does not exist.
  spec->mounts.push_back({pod->hosts_file, "/etc/hosts", false});
  spec->mounts.push_back({pod->resolv_conf, "/etc/resolv.conf", true});
  spec->network_namespace = pod->network.namespace_path;
  spec->hostname = pod->name.substr(0, kMaxHostname);
  spec->working_dir = StringField(container, {"workingDir"});
  spec->log_file = pod->log_file;
  std::string path_variable;
  for (const auto& [name, value] : env) {
    spec->env.push_back(name + "=" + value);
    if (name == "PATH") path_variable = value;
  }
  spec->binary = FindExecutable(spec->argv[0], path_variable, spec->working_dir);
  waiting_reason->clear();
  return Status::OK();
}

void LocalNode::TryStart(PodRuntime* pod, const json& object, const ClusterSnapshot& snapshot) {
  ContainerState& container = pod->state.container;
  auto wait = [&](const std::string& reason, const Status& why) {
    container.waiting_reason = reason;
    container.waiting_message = why.message();
    pod->retry_at = Clock::now() + kRetryInterval;
  };
  if (!pod->has_network) {
    Status made = network_->AddPod(&pod->network);
    if (!made.ok()) return wait("ContainerCreating", made);
    pod->has_network = true;
    pod->state.pod_ip = pod->network.ip;
  }
  StartPlan plan;
  std::string waiting_reason;
  Status prepared = PlanStart(pod, object, snapshot, &plan, &waiting_reason);
  if (!prepared.ok()) return wait(waiting_reason, prepared);
  const ContainerProcess::Spec& spec = plan.process;
  container.waiting_message.clear();
  auto fail_start = [&](const std::string& message) {
    container.reason = "StartError";
    container.message = message;
    SetTerminated(128 << 8, Now(), &container);  // exit code 128, as containerd
    ReleaseNetwork(pod);
  };
  if (spec.binary.empty()) {
    return fail_start("exec: \"" + spec.argv[0] + "\": executable file not found in $PATH");
  }
  UpdateHosts(pod, snapshot);
  std::shared_ptr<PodRuntime::Exit> exit = pod->exit;
  Status started = ContainerProcess::Start(
      spec,
      [this, exit](int wait_status) {
        exit->wait_status = wait_status;
        exit->exited = true;
        Wake();
      },
      &pod->process);
  if (!started.ok()) return fail_start(started.message());
  container.phase = ContainerState::Phase::kRunning;
  container.started_at = Now();
  container.container_id = "local://" + pod->uid;
  if (plan.readiness) {
    pod->readiness = std::make_unique<ContainerProber>(*plan.readiness, false, [this] { Wake(); });
  }
  if (plan.liveness) {
    pod->liveness = std::make_unique<ContainerProber>(*plan.liveness, true, [this] { Wake(); });
    pod->liveness_grace_seconds = plan.liveness_grace_seconds;
  }
}

void LocalNode::BeginTermination(PodRuntime* pod, int64_t grace_seconds) {
  pod->terminating = true;
  if (grace_seconds <= 0) {
    pod->process->SignalGroup(SIGKILL);
    pod->killed = true;
    return;
  }
  pod->process->SignalGroup(SIGTERM);
  pod->kill_deadline = Clock::now() + std::chrono::seconds(grace_seconds);
}

void LocalNode::WriteStatus(PodRuntime* pod, const json& object) {
  const json* seen = FindField(object, {"status"});
  json desired = seen != nullptr ? *seen : json::object();
  ApplyPodStatus(object, pod->state, Now(), &desired);
  pod->status_written = seen != nullptr && desired == *seen;
  if (pod->status_written) return;
  // Against the version seen: a Conflict means a newer one is on its way
  // to the informer, and the next pass writes again.
  json update = object;
  update["status"] = desired;
  pod->status_written =
      client_->Update(kube::kPods.Subresource("status"), pod->ns, update, nullptr).ok();
}

void LocalNode::ConfirmDeletion(PodRuntime* pod) {
  if (pod->deletion_confirmed) return;
  pod->deletion_confirmed = true;
  kube::DeleteOptions now;
  now.grace_period_seconds = 0;
  now.precondition_uid = pod->uid;
  client_->Delete(kube::kPods, pod->ns, pod->name, now);
}

void LocalNode::UpdateHosts(PodRuntime* pod, const ClusterSnapshot& snapshot) {
  if (!pod->has_network) return;
  const json* object = snapshot.Find("pods", pod->ns, pod->name);
  if (object == nullptr || Uid(*object) != pod->uid) return;
  const std::string content = PodHostsFile(*object, pod->state.pod_ip, service_records_);
  if (content == pod->hosts_content) return;
  // In place, not by rename: the file is bind-mounted into the pod.
  std::ofstream out(pod->hosts_file, std::ios::binary | std::ios::trunc);
  out << content;
  out.flush();
  if (out) pod->hosts_content = content;
}

void LocalNode::ReleaseNetwork(PodRuntime* pod) {
  if (!pod->has_network) return;
  network_->RemovePod(pod->network);
  pod->has_network = false;
}

void LocalNode::Remove(PodRuntime* pod) {
  pod->readiness.reset();
  pod->liveness.reset();
  pod->process.reset();  // SIGKILLs a process that still runs
  ReleaseNetwork(pod);
  std::error_code ec;
  fs::remove_all(pod->dir, ec);
}

LocalNode::PodRuntime* LocalNode::RunningPod(const std::string& ns, const std::string& name) {
  for (auto& [uid, pod] : pods_) {
    if (pod->ns == ns && pod->name == name && pod->process != nullptr &&
        pod->state.container.phase == ContainerState::Phase::kRunning) {
      return pod.get();
    }
  }
  return nullptr;
}

Status LocalNode::KillContainer(const std::string& ns, const std::string& name, int signal) {
  std::lock_guard<std::mutex> lock(mu_);
  PodRuntime* pod = RunningPod(ns, name);
  if (pod == nullptr) return Status::NotFound("no running container in pod " + ns + "/" + name);
  pod->process->Signal(signal);
  return Status::OK();
}

Status LocalNode::OutOfMemory(const std::string& ns, const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  PodRuntime* pod = RunningPod(ns, name);
  if (pod == nullptr) return Status::NotFound("no running container in pod " + ns + "/" + name);
  pod->out_of_memory = true;
  pod->process->Signal(SIGKILL);
  return Status::OK();
}

Status LocalNode::Preempt(const std::string& ns, const std::string& name,
                          Disruption disruption) {
  std::lock_guard<std::mutex> lock(mu_);
  PodRuntime* pod = RunningPod(ns, name);
  if (pod == nullptr) return Status::NotFound("no running container in pod " + ns + "/" + name);
  json object;
  GAPTRAIN_RETURN_IF_ERROR(client_->Get(kube::kPods, ns, name, &object));
  const std::string now = Now();
  const bool shutdown = disruption == Disruption::kNodeShutdown;
  const std::string reason = shutdown ? "TerminationByKubelet" : "PreemptionByScheduler";
  std::string scheduler = StringField(object, {"spec", "schedulerName"});
  if (scheduler.empty()) scheduler = "default-scheduler";
  const std::string message =
      shutdown ? kNodeShutdownMessage
               : scheduler + ": preempting to accommodate a higher priority pod";
  for (int attempt = 0;; ++attempt) {
    if (Uid(object) != pod->uid) return Status::NotFound("pod " + ns + "/" + name + " was replaced");
    SetPodCondition(&object["status"], "DisruptionTarget", true, reason, message, now);
    Status s = client_->Update(kube::kPods.Subresource("status"), ns, object, nullptr);
    if (s.ok()) break;
    if (!kube::IsConflict(s) || attempt == 4) return s;
    GAPTRAIN_RETURN_IF_ERROR(client_->Get(kube::kPods, ns, name, &object));
  }
  if (shutdown) {
    pod->state.failure_reason = "Terminated";
    pod->state.failure_message = kNodeShutdownMessage;
    pod->delete_after_exit = true;
    if (!pod->terminating) BeginTermination(pod, TerminationGracePeriod(object));
  } else {
    kube::DeleteOptions graceful;
    graceful.precondition_uid = pod->uid;
    GAPTRAIN_RETURN_IF_ERROR(client_->Delete(kube::kPods, ns, name, graceful));
  }
  Wake();
  return Status::OK();
}

std::string LocalNode::LogPath(const std::string& ns, const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = log_paths_.find(ns + "/" + name);
  return it == log_paths_.end() ? std::string() : it->second;
}

Status LocalNode::Logs(const std::string& ns, const std::string& name, std::string* text) const {
  const std::string path = LogPath(ns, name);
  if (path.empty()) return Status::NotFound("no pod " + ns + "/" + name + " ran on this node");
  ReadFile(path, text).ok();  // nothing written yet: ""
  return Status::OK();
}

Status LocalNode::ClaimPath(const std::string& ns, const std::string& name,
                            std::string* path) const {
  json claim;
  GAPTRAIN_RETURN_IF_ERROR(client_->Get(kube::kPersistentVolumeClaims, ns, name, &claim));
  *path = ClaimDirectory(options_.claims_dir, claim);
  return Status::OK();
}

}  // namespace kube_testing
}  // namespace gaptrain
