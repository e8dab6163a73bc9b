#include "operator/testing/local_node.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include "operator/testing/cluster_hosts.h"
#include "operator/testing/container_process.h"
#include "operator/testing/container_prober.h"
#include "operator/testing/json_fields.h"
#include "operator/testing/pod_status.h"
#include "operator/testing/pod_volumes.h"
#include "services/common/os_error.h"

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
  bool deletion_confirmed = false;
};

LocalNode::LocalNode(FakeApiServer* server, Options options)
    : server_(server), options_(std::move(options)) {}

Status LocalNode::Start(FakeApiServer* server, const Options& options,
                        std::unique_ptr<LocalNode>* node) {
  if (server == nullptr) return Status::InvalidArgument("server: Required value");
  if (options.work_dir.empty()) return Status::InvalidArgument("work_dir: Required value");
  if (options.node_name.empty()) return Status::InvalidArgument("node_name: Required value");
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
  std::unique_ptr<LocalNode> made(new LocalNode(server, resolved));
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
  made->watcher_ = std::thread([n = made.get()] { n->WatchStore(); });
  made->runner_ = std::thread([n = made.get()] { n->Run(); });
  *node = std::move(made);
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
  if (watcher_.joinable()) watcher_.join();
  std::lock_guard<std::mutex> lock(mu_);
  if (stopped_) return;
  stopped_ = true;
  for (auto& [uid, pod] : pods_) Remove(pod.get());
  pods_.clear();
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

void LocalNode::WatchStore() {
  // The stop check cannot take wake_mu_ inside the predicate's store lock
  // without ordering the two locks, so it polls: Stop() waits at most this.
  constexpr std::chrono::milliseconds kStopCheck{50};
  uint64_t seen = 0;
  bool first = true;
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(wake_mu_);
      if (stopping_) return;
    }
    std::shared_ptr<const ClusterSnapshot> fresh;
    server_->WaitFor(
        [&](const StoreView& view) {
          if (!first && view.resource_version() == seen) return false;
          first = false;
          seen = view.resource_version();
          fresh = std::make_shared<const ClusterSnapshot>(view);
          return true;
        },
        kStopCheck);
    if (fresh == nullptr) continue;
    {
      std::lock_guard<std::mutex> lock(wake_mu_);
      latest_ = std::move(fresh);
      wake_ = true;
    }
    wake_cv_.notify_all();
  }
}

void LocalNode::Run() {
  for (;;) {
    Clock::time_point deadline;
    {
      std::lock_guard<std::mutex> lock(mu_);
      deadline = NextDeadline();
    }
    std::shared_ptr<const ClusterSnapshot> snapshot;
    {
      std::unique_lock<std::mutex> lock(wake_mu_);
      wake_cv_.wait_until(lock, deadline, [this] { return wake_ || stopping_; });
      if (stopping_) return;
      wake_ = false;
      snapshot = latest_;
    }
    if (snapshot == nullptr) continue;
    std::lock_guard<std::mutex> lock(mu_);
    Pass(*snapshot);
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
  BindClaims(snapshot);
  Schedule(snapshot);
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
        server_->Delete("pods", StringField(*pod, {"metadata", "namespace"}),
                        StringField(*pod, {"metadata", "name"}), 0, "", uid);
        continue;
      }
      Admit(*pod);
    }
    Advance(pods_[uid].get(), *pod, snapshot);
  }
  for (auto& [uid, pod] : pods_) UpdateHosts(pod.get(), snapshot);
}

void LocalNode::BindClaims(const ClusterSnapshot& snapshot) {
  for (const json* claim : snapshot.All("persistentvolumeclaims")) {
    if (StringField(*claim, {"status", "phase"}) == "Bound" || IsDeleting(*claim)) continue;
    const std::string uid = Uid(*claim);
    MakeDirs(ClaimDirectory(options_.claims_dir, *claim));
    server_->Update("persistentvolumeclaims", StringField(*claim, {"metadata", "namespace"}),
                    StringField(*claim, {"metadata", "name"}), [&](json* current) {
                      if (Uid(*current) != uid ||
                          StringField(*current, {"status", "phase"}) == "Bound") {
                        return;
                      }
                      (*current)["spec"]["volumeName"] = "pvc-" + uid;
                      json status = {{"phase", "Bound"}};
                      const json* modes = FindField(*current, {"spec", "accessModes"});
                      if (modes != nullptr && modes->is_array()) status["accessModes"] = *modes;
                      const json* size =
                          FindField(*current, {"spec", "resources", "requests", "storage"});
                      if (size != nullptr) status["capacity"] = {{"storage", *size}};
                      (*current)["status"] = status;
                    });
  }
}

void LocalNode::Schedule(const ClusterSnapshot& snapshot) {
  for (const json* pod : snapshot.All("pods")) {
    if (!StringField(*pod, {"spec", "nodeName"}).empty() || IsDeleting(*pod)) continue;
    const std::string scheduler = StringField(*pod, {"spec", "schedulerName"});
    if (!scheduler.empty() && scheduler != "default-scheduler") continue;
    const std::string ns = StringField(*pod, {"metadata", "namespace"});
    std::string missing_claim;
    for (const json& volume : ListField(*pod, {"spec", "volumes"})) {
      const std::string claim = StringField(volume, {"persistentVolumeClaim", "claimName"});
      if (!claim.empty() && snapshot.Find("persistentvolumeclaims", ns, claim) == nullptr) {
        missing_claim = claim;
        break;
      }
    }
    const std::string uid = Uid(*pod);
    const std::string now = server_->Now();
    server_->Update("pods", ns, StringField(*pod, {"metadata", "name"}), [&](json* current) {
      if (Uid(*current) != uid || !StringField(*current, {"spec", "nodeName"}).empty()) return;
      json& status = (*current)["status"];
      if (missing_claim.empty()) {
        (*current)["spec"]["nodeName"] = options_.node_name;
        SetPodCondition(&status, "PodScheduled", true, "", "", now);
      } else {
        SetPodCondition(&status, "PodScheduled", false, "Unschedulable",
                        "0/1 nodes are available: persistentvolumeclaim \"" + missing_claim +
                            "\" not found.",
                        now);
      }
    });
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
  pod->state.start_time = server_->Now();
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
    SetTerminated(SIGKILL, server_->Now(), &pod->state.container);
    pod->state.container.signal = 0;
  }
  MakeDirs(pod->dir);
  std::ofstream(pod->resolv_conf)
      << "# gaptrain LocalNode: Service names are in /etc/hosts; no DNS server.\n"
      << "search " << pod->ns << ".svc.cluster.local svc.cluster.local cluster.local\n"
      << "nameserver 127.0.0.1\n"
      << "options ndots:5 timeout:1 attempts:1\n";
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
    SetTerminated(pod->exit->wait_status, server_->Now(), &container);
    ReleaseNetwork(pod);
  }
  if (container.phase == ContainerState::Phase::kWaiting) {
    if (deleting) {
      ReleaseNetwork(pod);
      ConfirmDeletion(pod);
      return;
    }
    // Tried again when the API objects changed, and now and then.
    if (snapshot.resource_version() != pod->tried_at_version || Clock::now() >= pod->retry_at) {
      pod->tried_at_version = snapshot.resource_version();
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
  if (container.phase == ContainerState::Phase::kTerminated &&
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
  const std::string restart_policy = StringField(object, {"spec", "restartPolicy"});
  if (!restart_policy.empty() && restart_policy != "Never") {
    return Status::InvalidArgument("spec.restartPolicy: Unsupported value: \"" + restart_policy +
                                   "\": the test node runs restartPolicy Never only");
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
  GAPTRAIN_RETURN_IF_ERROR(ResolveContainerEnv(pod_view, container, snapshot, &container_env));
  EnvironmentList env = {{"PATH", bin_dir_ + ":" + kDefaultPath},
                         {"HOSTNAME", pod->name},
                         {"HOME", "/root"}};
  for (const auto& [name, value] : options_.extra_env) SetVariable(&env, name, value);
  for (const auto& [name, value] : container_env) SetVariable(&env, name, value);
  GAPTRAIN_RETURN_IF_ERROR(ResolveCommand(container, env, &spec->argv));

  Status volumes = PreparePodVolumes(pod_view, container, snapshot, pod->dir,
                                     options_.claims_dir, &spec->mounts);
  if (!volumes.ok()) {
    if (volumes.code() != Status::Code::kInvalidArgument) *waiting_reason = "ContainerCreating";
    return volumes;
  }
  // Cluster DNS: Service names come from the hosts file, and any other
  // name fails at once (nothing listens on the pod's own port 53) instead
  // of waiting for the host's resolver, which a pod cannot reach.
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
    Status made = network_->AddPod(pod->ns + "/" + pod->name, &pod->network);
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
    SetTerminated(128 << 8, server_->Now(), &container);  // exit code 128, as containerd
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
  container.started_at = server_->Now();
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
  const std::string now = server_->Now();
  const json* seen = FindField(object, {"status"});
  json desired = seen != nullptr ? *seen : json::object();
  ApplyPodStatus(object, pod->state, now, &desired);
  if (seen != nullptr && desired == *seen) return;
  server_->Update("pods", pod->ns, pod->name, [&](json* current) {
    if (Uid(*current) != pod->uid) return;
    json status = (*current)["status"];
    ApplyPodStatus(*current, pod->state, now, &status);
    (*current)["status"] = status;
  });
}

void LocalNode::ConfirmDeletion(PodRuntime* pod) {
  if (pod->deletion_confirmed) return;
  pod->deletion_confirmed = true;
  server_->Delete("pods", pod->ns, pod->name, 0, "", pod->uid);
}

void LocalNode::UpdateHosts(PodRuntime* pod, const ClusterSnapshot& snapshot) {
  if (!pod->has_network) return;
  const json* object = snapshot.Find("pods", pod->ns, pod->name);
  if (object == nullptr || Uid(*object) != pod->uid) return;
  const std::string content = PodHostsFile(*object, pod->state.pod_ip, snapshot);
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
  GAPTRAIN_RETURN_IF_ERROR(server_->Get("pods", ns, name, &object));
  const std::string now = server_->Now();
  const bool shutdown = disruption == Disruption::kNodeShutdown;
  const std::string reason = shutdown ? "TerminationByKubelet" : "PreemptionByScheduler";
  std::string scheduler = StringField(object, {"spec", "schedulerName"});
  if (scheduler.empty()) scheduler = "default-scheduler";
  const std::string message =
      shutdown ? kNodeShutdownMessage
               : scheduler + ": preempting to accommodate a higher priority pod";
  GAPTRAIN_RETURN_IF_ERROR(server_->Update("pods", ns, name, [&](json* current) {
    if (Uid(*current) != pod->uid) return;
    SetPodCondition(&(*current)["status"], "DisruptionTarget", true, reason, message, now);
  }));
  if (shutdown) {
    pod->state.failure_reason = "Terminated";
    pod->state.failure_message = kNodeShutdownMessage;
    pod->delete_after_exit = true;
    if (!pod->terminating) BeginTermination(pod, TerminationGracePeriod(object));
  } else {
    GAPTRAIN_RETURN_IF_ERROR(server_->Delete("pods", ns, name, std::nullopt, "", pod->uid));
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
  std::ifstream in(path, std::ios::binary);
  std::stringstream content;
  content << in.rdbuf();
  *text = content.str();
  return Status::OK();
}

Status LocalNode::ClaimPath(const std::string& ns, const std::string& name,
                            std::string* path) const {
  json claim;
  GAPTRAIN_RETURN_IF_ERROR(server_->Get("persistentvolumeclaims", ns, name, &claim));
  *path = ClaimDirectory(options_.claims_dir, claim);
  return Status::OK();
}

}  // namespace kube_testing
}  // namespace gaptrain
