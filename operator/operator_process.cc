#include "operator/operator_process.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <functional>
#include <utility>

#include "operator/controller/enqueue.h"
#include "operator/job_image.h"
#include "operator/job_pod_ids.h"
#include "operator/kube/cluster_config.h"
#include "operator/kube/resource.h"
#include "operator/trainingjob/cached_fields.h"
#include "operator/trainingjob/job_changes.h"
#include "operator/trainingjob/object_fields.h"
#include "operator/trainingjob/pod_state.h"
#include "services/net/metrics_endpoint.h"
#include "services/net/ports_file.h"

namespace gaptrain {
namespace {

using std::chrono::milliseconds;

// The informers' lists may be large; the reconciles' writes are small.
constexpr milliseconds kCacheRequestTimeout{60000};
constexpr milliseconds kApiRequestTimeout{15000};
// How long the Controller waits for the informers before the process gives
// up (no CRD, no permission): controller-runtime's CacheSyncTimeout.
constexpr milliseconds kSyncTimeout{120000};

Status NewClient(const kube::ClusterConfig& config, milliseconds timeout,
                 std::unique_ptr<kube::Client>* client) {
  kube::ClientOptions options;
  options.request_timeout = timeout;
  options.on_warning = [](const std::string& what, const std::string& warning) {
    spdlog::warn("{}{} ({})", kApiServerWarningLog, warning, what);
  };
  return kube::Client::New(config, options, client);
}

}  // namespace

OperatorProcess::OperatorProcess(const OperatorOptions& options) : options_(options) {}

OperatorProcess::~OperatorProcess() { Shutdown(); }

Status OperatorProcess::Start(const OperatorOptions& options,
                              std::unique_ptr<OperatorProcess>* process) {
  kube::ResolveOptions resolve;
  resolve.kubeconfig = options.kubeconfig;
  resolve.context = options.context;
  resolve.env = kube::ProcessEnvironment();
  kube::ClusterConfig config;
  GAPTRAIN_RETURN_IF_ERROR(kube::ResolveClusterConfig(resolve, &config));

  // The job pods' image, once: --image, else this pod's own (job_image.h).
  OperatorOptions chosen = options;
  {
    std::unique_ptr<kube::Client> client;
    GAPTRAIN_RETURN_IF_ERROR(NewClient(config, kApiRequestTimeout, &client));
    JobImageChoice image;
    GAPTRAIN_RETURN_IF_ERROR(ChooseJobImage(options, client.get(), &image));
    chosen.job.image = image.image;
    spdlog::info("job pods' image, where their template names none: {} ({}); a job keeps "
                 "the image its first pods got (status.image)",
                 image.image, image.source);
    if (!options.job.image_pull_secrets.empty()) {
      std::string names;
      for (const std::string& n : options.job.image_pull_secrets) {
        names += (names.empty() ? "" : ", ") + n;
      }
      spdlog::info("job pods' image pull secrets, after their template's: {}", names);
    }
    JobPodIdsChoice ids;
    GAPTRAIN_RETURN_IF_ERROR(ChooseJobPodIds(options.pod_ids, client.get(), &ids));
    chosen.job.fixed_pod_ids = ids.fixed;
    spdlog::info("job pods' user and group ids: {} ({})",
                 ids.fixed ? "runAsUser, runAsGroup and fsGroup 65532" : "assigned by the cluster",
                 ids.source);
  }

  std::unique_ptr<OperatorProcess> p(new OperatorProcess(chosen));
  GAPTRAIN_RETURN_IF_ERROR(p->Wire(config));
  GAPTRAIN_RETURN_IF_ERROR(p->ServeEndpoints());
  for (const auto& informer : p->informers_) GAPTRAIN_RETURN_IF_ERROR(informer->Start());
  GAPTRAIN_RETURN_IF_ERROR(p->StartLeaderElection());
  p->supervisor_ = std::thread([raw = p.get()] { raw->Supervise(); });
  spdlog::info("gaptrain-operator {}: cluster {}, watching {}, {} workers, leader election {}, "
               "/metrics on port {}, /healthz and /readyz on port {}",
               options.pod_name, config.source,
               options.watch_namespace.empty() ? "every namespace"
                                               : "namespace " + options.watch_namespace,
               options.workers, options.leader_elect ? "on (Lease " + options.lease_name + ")" : "off",
               p->metrics_port_, p->health_port_);
  if (!options.ports_file.empty()) {
    GAPTRAIN_RETURN_IF_ERROR(
        WritePortsFile(options.ports_file, {p->metrics_port_, p->health_port_}));
  }
  *process = std::move(p);
  return Status::OK();
}

Status OperatorProcess::Wire(const kube::ClusterConfig& config) {
  GAPTRAIN_RETURN_IF_ERROR(NewClient(config, kCacheRequestTimeout, &cache_client_));
  GAPTRAIN_RETURN_IF_ERROR(NewClient(config, kApiRequestTimeout, &api_client_));
  // The elector's calls must end well within the lease (leader_election.h).
  const milliseconds lease_timeout =
      std::min(kApiRequestTimeout, options_.lease_duration - options_.renew_deadline);
  GAPTRAIN_RETURN_IF_ERROR(NewClient(config, lease_timeout, &lease_client_));

  metrics_ = std::make_shared<OperatorMetrics>(std::make_shared<prometheus::Registry>());
  progress_ = std::make_unique<ProgressReader>();

  const std::string ns =
      options_.watch_namespace.empty() ? kube::kAllNamespaces : options_.watch_namespace;
  // The caches keep only what the reconcile reads (cached_fields.h):
  // `trim` is the informer's transform, none for Kueue's kinds.
  using Trim = std::function<void(nlohmann::json*)>;
  auto informer = [&](const kube::Resource& resource, bool children, Trim trim = nullptr) {
    controller::Informer::Options o;
    if (children) {
      o.reflector.label_selector = trainingjob::kJobNameLabel;  // has the label
      o.index_labels = {trainingjob::kJobNameLabel};
    }
    o.reflector.transform = std::move(trim);
    informers_.push_back(
        std::make_unique<controller::Informer>(cache_client_.get(), resource, ns, o));
    return informers_.back().get();
  };
  JobCaches caches;
  const Trim trim = trainingjob::TrimCachedObject;
  caches.jobs = informer(kube::kTrainingJobs, false, trim);
  jobs_ = caches.jobs;
  caches.pods = informer(kube::kPods, true, trainingjob::TrimCachedPod);
  caches.services = informer(kube::kServices, true, trim);
  caches.config_maps = informer(kube::kConfigMaps, true, trim);
  caches.persistent_volume_claims = informer(kube::kPersistentVolumeClaims, true, trim);
  if (options_.job.network_policy.enabled) {
    caches.network_policies = informer(kube::kNetworkPolicies, true, trim);
  }
  if (options_.job.kueue) {
    caches.workloads = informer(kube::kWorkloads, true);
    caches.resource_flavors = informer(kube::kResourceFlavors, false);
    caches.workload_priority_classes = informer(kube::kWorkloadPriorityClasses, false);
    caches.priority_classes = informer(kube::kPriorityClasses, false);
  }

  reconciler_ = std::make_unique<JobReconciler>(api_client_.get(), caches, options_.job,
                                                progress_.get(), metrics_.get());
  controller::Controller::Options controller_options;
  controller_options.name = "trainingjob";
  controller_options.workers = options_.workers;
  controller_options.observer = metrics_.get();
  controller_options.sync_timeout = kSyncTimeout;
  GAPTRAIN_RETURN_IF_ERROR(controller::Controller::New(
      controller_options,
      [reconciler = reconciler_.get()](const std::string& key) {
        return reconciler->Reconcile(key);
      },
      &controller_));
  // The operator's own status and ledger writes do not wake it (job_changes.h).
  GAPTRAIN_RETURN_IF_ERROR(controller_->Watch(caches.jobs, controller::OwnKey(),
                                              trainingjob::JobChangedBeyondOwnWrites));
  const controller::KeyMapper owner =
      controller::OwnerKey({"gaptrain.io", "TrainingJob", trainingjob::kJobNameLabel});
  // A child's update that changes nothing its cache keeps (a field the
  // reconcile does not read, managedFields) wakes nothing. Not so for
  // Workloads: the reconcile reads their managedFields (kueue_workload.h).
  for (controller::Informer* child :
       {caches.pods, caches.services, caches.config_maps, caches.persistent_volume_claims,
        caches.network_policies}) {
    if (child != nullptr) {
      GAPTRAIN_RETURN_IF_ERROR(controller_->Watch(child, owner, controller::ContentChanged));
    }
  }
  if (caches.workloads != nullptr) {
    GAPTRAIN_RETURN_IF_ERROR(controller_->Watch(caches.workloads, owner));
  }
  return Status::OK();
}

Status OperatorProcess::ServeEndpoints() {
  GAPTRAIN_RETURN_IF_ERROR(
      HttpServer::Start(options_.metrics_address, options_.metrics_port, &metrics_server_));
  metrics_port_ = metrics_server_->port();
  HttpServer* health = metrics_server_.get();
  if (options_.health_port == 0 || options_.health_port != options_.metrics_port) {
    GAPTRAIN_RETURN_IF_ERROR(
        HttpServer::Start(options_.metrics_address, options_.health_port, &health_server_));
    health = health_server_.get();
  }
  health_port_ = health->port();

  ServeMetrics(metrics_server_.get(), metrics_->registry(),
               [this] {
                 metrics_->SetQueueDepth(controller_->queue()->Len());
                 // Every namespace; the phases only (a copy of every job
                 // per scrape was 40 MB at a thousand jobs).
                 std::vector<std::string> phases;
                 jobs_->Visit("", [&phases](const nlohmann::json& job) {
                   phases.push_back(trainingjob::StringAt(job, {"status", "phase"}));
                 });
                 metrics_->SetJobPhases(phases);
               });
  ServeHealth(health, nullptr);
  health->Handle("/readyz", [this](const HttpRequest&) {
    HttpResponse r;
    const std::string syncing = SyncingInformers();
    if (syncing.empty()) {
      r.body = "ok";
    } else {
      r.status = 503;
      r.body = "informers not synced: " + syncing;
    }
    return r;
  });
  return Status::OK();
}

Status OperatorProcess::StartLeaderElection() {
  if (!options_.leader_elect) {
    std::lock_guard<std::mutex> lock(mu_);
    leading_ = true;
    changed_.notify_all();
    return Status::OK();
  }
  controller::LeaderElectionConfig config;
  config.lease_namespace = options_.leader_election_namespace;  // "": the client's default
  config.lease_name = options_.lease_name;
  config.identity = controller::MakeLeaderIdentity(options_.pod_name);
  config.lease_duration = options_.lease_duration;
  config.renew_deadline = options_.renew_deadline;
  config.retry_period = options_.retry_period;
  config.on_started_leading = [this] {
    std::lock_guard<std::mutex> lock(mu_);
    leading_ = true;
    changed_.notify_all();
  };
  config.on_stopped_leading = [this](controller::LeadershipEnd end) {
    std::lock_guard<std::mutex> lock(mu_);
    leading_ = false;
    if (end == controller::LeadershipEnd::kLost) lost_ = true;
    changed_.notify_all();
  };
  config.on_new_leader = [identity = config.identity](const std::string& holder) {
    if (holder == identity) {
      spdlog::info("leader election: this replica ({}) leads", identity);
    } else {
      spdlog::info("leader election: the leader is {}", holder.empty() ? "(none)" : holder);
    }
  };
  GAPTRAIN_RETURN_IF_ERROR(
      controller::LeaderElector::New(lease_client_.get(), std::move(config), &elector_));
  elector_thread_ = std::thread([this] { elector_->Run(); });
  return Status::OK();
}

void OperatorProcess::Supervise() {
  {
    std::unique_lock<std::mutex> lock(mu_);
    changed_.wait(lock, [this] { return leading_ || stopping_; });
    if (stopping_) return;
  }
  Status s = controller_->Start();
  if (!s.ok()) {
    if (s.code() == Status::Code::kCancelled) return;
    std::string hint;
    for (const auto& informer : informers_) {
      const Status last = informer->stats().reflector.last_error;
      if (!informer->HasSynced() && !last.ok()) {
        hint = "; " + informer->resource().RbacName() + ": " + last.message();
        break;
      }
    }
    Fail(Status(s.code(), s.message() + hint));
    return;
  }
  metrics_->SetLeader(true);
  spdlog::info("reconciling TrainingJobs with {} workers", options_.workers);
  std::unique_lock<std::mutex> lock(mu_);
  changed_.wait(lock, [this] { return lost_ || stopping_; });
  if (stopping_) return;
  lock.unlock();
  // The Lease is gone: another replica may lead already. Stop at once; the
  // reconciles in flight finish (their writes carry resourceVersions).
  controller_->Stop();
  metrics_->SetLeader(false);
  Fail(Status(Status::Code::kAborted, "leader election lost: the Lease " + options_.lease_name +
                       " could not be renewed or another replica holds it"));
}

void OperatorProcess::Fail(const Status& why) {
  std::lock_guard<std::mutex> lock(mu_);
  if (failure_.ok()) failure_ = why;
  changed_.notify_all();
}

bool OperatorProcess::WaitForFailure(std::chrono::milliseconds timeout, Status* why) {
  std::unique_lock<std::mutex> lock(mu_);
  changed_.wait_for(lock, timeout, [this] { return !failure_.ok(); });
  if (failure_.ok()) return false;
  *why = failure_;
  return true;
}

void OperatorProcess::Shutdown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (shut_down_) return;
    shut_down_ = true;
    stopping_ = true;
    changed_.notify_all();
  }
  // Reconciling first, so the next leader never overlaps it; then the
  // Lease (released), the caches and the endpoints.
  if (controller_ != nullptr) controller_->Stop();
  if (supervisor_.joinable()) supervisor_.join();
  if (elector_ != nullptr) elector_->Stop();
  if (elector_thread_.joinable()) elector_thread_.join();
  if (metrics_ != nullptr) metrics_->SetLeader(false);
  for (const auto& informer : informers_) informer->Stop();
  if (health_server_ != nullptr) health_server_->Stop();
  if (metrics_server_ != nullptr) metrics_server_->Stop();
  for (kube::Client* client : {cache_client_.get(), api_client_.get(), lease_client_.get()}) {
    if (client != nullptr) client->Shutdown();
  }
}

std::string OperatorProcess::SyncingInformers() const {
  std::string syncing;
  for (const auto& informer : informers_) {
    if (informer->HasSynced()) continue;
    syncing += (syncing.empty() ? "" : ", ") + informer->resource().RbacName();
  }
  return syncing;
}

}  // namespace gaptrain
