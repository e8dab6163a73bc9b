#include "operator/trainingjob/desired_children.h"

#include <algorithm>

#include "operator/trainingjob/object_fields.h"
#include "operator/trainingjob/pod_template.h"
#include "services/api/job_fields.h"
#include "services/api/yaml_text.h"
#include "services/base/available_cpus.h"
#include "services/jobplan/service_commands.h"

namespace gaptrain {
namespace trainingjob {
namespace {

using nlohmann::json;

// The longest suffix a DNS-label child adds: NAME-coordinator (a Service,
// whose name must be a DNS-1035 label of at most 63 characters).
constexpr size_t kLongestLabelSuffix = sizeof("-coordinator") - 1;
static_assert(63 - kLongestLabelSuffix == kMaxClusterJobNameLength,
              "kRuleClusterJobName (and the CRD's rule) state this limit");
// A master shard's Service, NAME-master-63 at most (spec.master.shards is
// at most 64), is shorter.
static_assert(sizeof("-master-63") - 1 <= kLongestLabelSuffix,
              "a master shard's Service name must fit the job name's limit");

json Labels(const std::string& job) { return json{{kJobNameLabel, job}}; }

json ObjectMeta(const json& job, const std::string& name, const json& labels, bool owned) {
  json meta{{"name", name}, {"namespace", NamespaceOf(job)}, {"labels", labels}};
  if (owned) meta["ownerReferences"] = json::array({OwnerReference(job)});
  return meta;
}

json FieldRefEnv(const char* name, const char* field) {
  return json{{"name", name}, {"valueFrom", {{"fieldRef", {{"fieldPath", field}}}}}};
}

json Port(const char* name, int port) {
  return json{{"name", name}, {"containerPort", port}, {"protocol", "TCP"}};
}

json Mount(const std::string& volume, const std::string& path, bool read_only) {
  json m{{"name", volume}, {"mountPath", path}};
  if (read_only) m["readOnly"] = true;
  return m;
}

json ClaimVolume(const std::string& volume, const std::string& claim, bool read_only) {
  json source{{"claimName", claim}};
  if (read_only) source["readOnly"] = true;
  return json{{"name", volume}, {"persistentVolumeClaim", source}};
}

json HealthProbe(int port, int64_t period, int64_t failure_threshold) {
  return json{{"httpGet", {{"path", "/healthz"}, {"port", port}}},
              {"periodSeconds", period},
              {"timeoutSeconds", 5},
              {"failureThreshold", failure_threshold}};
}

json Claim(const json& job, const std::string& name, const std::string& size,
           const std::string& storage_class, bool owned) {
  json spec{{"accessModes", json::array({"ReadWriteOnce"})},
            {"resources", {{"requests", {{"storage", size}}}}}};
  if (!storage_class.empty()) spec["storageClassName"] = storage_class;
  return json{{"apiVersion", "v1"},
              {"kind", "PersistentVolumeClaim"},
              {"metadata", ObjectMeta(job, name, Labels(NameOf(job)), owned)},
              {"spec", spec}};
}

// `service` selects the job's pods of `type`; with `index`, only the one of
// that replica index (a master shard's).
json HeadlessService(const json& job, const std::string& service, ReplicaType type,
                     std::optional<uint32_t> index, int grpc_port, int http_port) {
  const std::string name = NameOf(job);
  json selector{{kJobNameLabel, name}, {kReplicaTypeLabel, ReplicaTypeLabelValue(type)}};
  if (index) selector[kReplicaIndexLabel] = std::to_string(*index);
  json ports = json::array(
      {json{{"name", "grpc"}, {"port", grpc_port}, {"targetPort", grpc_port}, {"protocol", "TCP"}},
       json{{"name", "metrics"}, {"port", http_port}, {"targetPort", http_port},
            {"protocol", "TCP"}}});
  return json{{"apiVersion", "v1"},
              {"kind", "Service"},
              {"metadata", ObjectMeta(job, service, selector, true)},
              {"spec",
               {{"clusterIP", "None"},
                {"selector", selector},
                {"publishNotReadyAddresses", true},
                {"ports", ports}}}};
}

// "-SHARD" with several master shards, "" with one: what each shard's own
// names add to the one master's.
std::string ShardSuffix(uint32_t shard, uint32_t shards) {
  return shards > 1 ? "-" + std::to_string(shard) : "";
}

// The export pod's volume of shard `shard`'s claim: gaptrain-checkpoints
// with one shard (the master's name for it), gaptrain-checkpoints-SHARD
// with several, which the one pod mounts side by side.
std::string CheckpointsVolumeName(uint32_t shard, uint32_t shards) {
  return "gaptrain-checkpoints" + ShardSuffix(shard, shards);
}

// The manifest the services read: what the parser accepts, without the
// server's metadata and the status.
std::string JobYaml(const json& job) {
  nlohmann::ordered_json manifest;
  manifest["apiVersion"] = StringAt(job, {"apiVersion"}, "gaptrain.io/v1alpha1");
  manifest["kind"] = StringAt(job, {"kind"}, "TrainingJob");
  manifest["metadata"] = {{"name", NameOf(job)}, {"namespace", NamespaceOf(job)}};
  manifest["spec"] = ObjectAt(job, {"spec"});
  return YamlText(manifest);
}

// PodSecurity "restricted", so that a hardened namespace admits the pods.
// With fixed ids, the uid is explicit although the image names it: the
// kubelet can then check runAsNonRoot for any template's image, and an
// image without a numeric USER still starts. fsGroup makes a fresh claim
// (root's on most provisioners) writable for the master, the coordinator
// and the export; OnRootMismatch spares a restarted master the recursive
// chown of its checkpoints. Where the cluster assigns the ids (OpenShift),
// it assigns fsGroup too, and a fixed one would be refused.
void SetRestrictedSecurity(const OperatorConfig& config, GaptrainPodParts* parts) {
  parts->pod_security_context = {{"runAsNonRoot", true},
                                 {"seccompProfile", {{"type", "RuntimeDefault"}}}};
  if (config.fixed_pod_ids) {
    parts->pod_security_context["runAsUser"] = kImageUser;
    parts->pod_security_context["runAsGroup"] = kImageUser;
    parts->pod_security_context["fsGroup"] = kImageUser;
    parts->pod_security_context["fsGroupChangePolicy"] = "OnRootMismatch";
  }
  parts->container_security_context = {{"allowPrivilegeEscalation", false},
                                       {"capabilities", {{"drop", json::array({"ALL"})}}}};
}

// The preferred node affinity away from spot nodes, for the pods that hold
// or read the job's state (the master, the coordinator, the export) and an
// evaluator that is not preemptible.
json AwayFromSpot(const SpotScheduling& spot) {
  json terms = json::array();
  for (const json& r : spot.spot_node_selector) {
    const json expressions = json::array({NegatedRequirement(r)});
    terms.push_back(
        json{{"weight", 100}, {"preference", {{"matchExpressions", expressions}}}});
  }
  return terms;
}

// The master's template as the export pod's: its image, resources, node
// placement and pod-level fields fit a pod that reads the master's volume;
// what belongs to a long-running master goes: sidecars (the pod would never
// complete), the first container's args (they are the master's flags) and
// its probes (the export serves nothing, and a liveness probe would kill
// it).
json ExportTemplate(const json& master_template) {
  if (!master_template.is_object()) return master_template;
  json t = master_template;
  json* containers = nullptr;
  if (t.contains("spec") && t["spec"].is_object() && t["spec"].contains("containers")) {
    containers = &t["spec"]["containers"];
  }
  if (containers == nullptr || !containers->is_array() || containers->empty()) return t;
  json first = (*containers)[0];
  if (first.is_object()) {
    for (const char* key : {"args", "readinessProbe", "livenessProbe", "startupProbe"}) {
      first.erase(key);
    }
  }
  *containers = json::array({first});
  return t;
}

class PodBuilder {
 public:
  PodBuilder(const json& job, const TrainingJob& spec, const OperatorConfig& config,
             const std::string& image, bool tls, bool status_token)
      : job_(job),
        spec_(spec),
        config_(config),
        image_(image),
        tls_(tls),
        status_token_(status_token),
        name_(NameOf(job)),
        ns_(NamespaceOf(job)) {}

  Status Build(ReplicaType type, int64_t index, json* pod) const {
    const std::string key = TemplateKey(type);
    const json* found = FieldAt(job_, {"spec", key, "template"});
    const json pod_template = found != nullptr ? *found : json(nullptr);
    const std::string template_path = "spec." + key + ".template";
    GAPTRAIN_RETURN_IF_ERROR(CheckPodTemplate(pod_template, template_path));

    GaptrainPodParts parts;
    const uint32_t shards = spec_.master.shards;
    const std::string pod_name = type == ReplicaType::kMaster
                                     ? MasterName(name_, static_cast<uint32_t>(index), shards)
                                     : ReplicaName(name_, type, index);
    json labels = Labels(name_);
    labels[kReplicaTypeLabel] = ReplicaTypeLabelValue(type);
    const bool indexed = type == ReplicaType::kTrainer || type == ReplicaType::kMaster;
    labels[kReplicaIndexLabel] = std::to_string(indexed ? index : 0);
    parts.metadata = ObjectMeta(job_, pod_name, labels, true);
    parts.default_image = image_;
    parts.image_pull_secrets = config_.image_pull_secrets;
    parts.termination_grace_period_seconds =
        TemplateGracePeriod(pod_template).value_or(config_.default_grace_period_seconds);
    // The CPU request, for the thread pools of a container without a
    // limit (services/base/available_cpus.h).
    const json cpu_request = {
        {"name", kCpuRequestEnv},
        {"valueFrom",
         {{"resourceFieldRef", {{"resource", "requests.cpu"}, {"divisor", "1m"}}}}}};
    parts.env = json::array({FieldRefEnv("POD_NAME", "metadata.name"),
                             FieldRefEnv("POD_NAMESPACE", "metadata.namespace"),
                             FieldRefEnv("POD_IP", "status.podIP"), cpu_request,
                             json{{"name", "GAPTRAIN_TOKEN_FILE"}, {"value", kTokenFile}}});
    parts.shared_mounts = json::array(
        {Mount("gaptrain-token", kTokenDir, true), Mount("gaptrain-job", kJobDir, true)});
    parts.volumes = json::array(
        {json{{"name", "gaptrain-token"}, {"secret", {{"secretName", TokenSecretName(name_)}}}},
         json{{"name", "gaptrain-job"}, {"configMap", {{"name", JobConfigMapName(name_)}}}}});
    if (!spec_.data.claim_name.empty()) {
      parts.own_mounts.push_back(Mount("gaptrain-data", spec_.data.path, true));
      parts.volumes.push_back(ClaimVolume("gaptrain-data", spec_.data.claim_name, true));
    }

    if (tls_) {
      parts.shared_mounts.push_back(Mount("gaptrain-tls", kTlsDir, true));
      parts.volumes.push_back(
          json{{"name", "gaptrain-tls"}, {"secret", {{"secretName", TlsSecretName(name_)}}}});
    }
    JobFiles files;
    files.job_file = kJobFile;
    files.token_file = kTokenFile;
    if (tls_) {
      files.tls_cert = std::string(kTlsDir) + "/tls.crt";
      files.tls_key = std::string(kTlsDir) + "/tls.key";
      files.tls_ca = std::string(kTlsDir) + "/ca.crt";
    }
    auto command = [](const char* binary, std::vector<std::string> args) {
      json c = json::array({binary});
      for (std::string& a : args) c.push_back(std::move(a));
      return c;
    };

    int http_port = kWorkerHttpPort;
    const std::string service_suffix = "." + ns_ + ".svc:";
    switch (type) {
      case ReplicaType::kMaster: {
        http_port = kMasterHttpPort;
        MasterPlacement master;
        master.listen = "0.0.0.0:" + std::to_string(kMasterGrpcPort);
        master.http_port = http_port;
        master.checkpoint_dir = kCheckpointDir;
        master.shard = static_cast<uint32_t>(index);
        master.shards = shards;
        parts.command = command("gaptrain-master", MasterArgs(files, master));
        parts.ports = json::array({Port("grpc", kMasterGrpcPort), Port("metrics", http_port)});
        // The shard's own claim where it writes: each shard's checkpoints
        // survive its pod apart from the others' (shards may land on
        // different nodes, and a ReadWriteOnce claim follows one).
        parts.own_mounts.push_back(
            Mount("gaptrain-checkpoints", CheckpointMountPath(master.shard, shards), false));
        parts.volumes.push_back(ClaimVolume(
            "gaptrain-checkpoints", CheckpointsClaimName(name_, master.shard, shards), false));
        break;
      }
      case ReplicaType::kCoordinator: {
        http_port = kCoordinatorHttpPort;
        CoordinatorPlacement coordinator;
        coordinator.listen = "0.0.0.0:" + std::to_string(kCoordinatorGrpcPort);
        coordinator.http_port = http_port;
        coordinator.state_dir = kCoordinatorStateDir;
        // Every shard's address, in shard order (the coordinator's and
        // the workers' shard I is the I-th).
        for (uint32_t shard = 0; shard < shards; ++shard) {
          if (shard > 0) coordinator.master += ",";
          coordinator.master += MasterName(name_, shard, shards) + service_suffix +
                                std::to_string(kMasterGrpcPort);
        }
        if (status_token_) coordinator.status_token_file = kStatusTokenFile;
        parts.command = command("gaptrain-coordinator", CoordinatorArgs(files, coordinator));
        parts.ports =
            json::array({Port("grpc", kCoordinatorGrpcPort), Port("metrics", http_port)});
        parts.own_mounts.push_back(Mount("gaptrain-state", kCoordinatorStateDir, false));
        parts.volumes.push_back(
            ClaimVolume("gaptrain-state", CoordinatorStateClaimName(name_), false));
        break;
      }
      case ReplicaType::kEvaluator:
      case ReplicaType::kTrainer: {
        WorkerPlacement worker;
        worker.role = ReplicaTypeLabelValue(type);
        worker.coordinator = ReplicaName(name_, ReplicaType::kCoordinator) + service_suffix +
                             std::to_string(kCoordinatorGrpcPort);
        worker.http_port = http_port;
        worker.host_name = "$(POD_NAME)";
        // Five seconds under the pod's, within what the worker accepts (a
        // day): a template's longer grace period must not stop it starting.
        worker.grace_seconds = static_cast<double>(
            std::clamp<int64_t>(parts.termination_grace_period_seconds - 5, 1, 86400));
        parts.command = command("gaptrain-worker", WorkerArgs(files, worker));
        // The same settings for a user's trainer command, which the
        // template's first container may set (run as given, no flags
        // added): the Python SDK reads them (docs/worker.md). After
        // POD_NAME, so that $(POD_NAME) expands.
        parts.keep_command = true;
        for (const auto& [name, value] : WorkerEnvironment(files, worker)) {
          parts.own_env.push_back(json{{"name", name}, {"value", value}});
        }
        parts.ports = json::array({Port("metrics", http_port)});
        break;
      }
    }
    // Each role where its spec puts it: trainers, and the evaluator when
    // its section says so, on spot nodes; the job's state (the master, the
    // coordinator) and an evaluator that is not preemptible off nodes that
    // may vanish, where there is a choice.
    const bool preemptible = type == ReplicaType::kTrainer     ? spec_.workers.preemptible
                             : type == ReplicaType::kEvaluator ? spec_.evaluator.preemptible
                                                               : false;
    if (preemptible) {
      parts.tolerations = config_.spot.tolerations;
      parts.required_node_requirements = config_.spot.spot_node_selector;
    } else if (type != ReplicaType::kTrainer) {
      parts.preferred_node_terms = AwayFromSpot(config_.spot);
    }
    SetRestrictedSecurity(config_, &parts);
    parts.readiness_probe = HealthProbe(http_port, 5, 3);
    parts.liveness_probe = HealthProbe(http_port, 10, config_.liveness_failure_threshold);
    return MergePodTemplate(pod_template, template_path, ObjectAt(job_, {"metadata", "labels"}),
                            parts, pod);
  }

 private:
  const json& job_;
  const TrainingJob& spec_;
  const OperatorConfig& config_;
  const std::string& image_;
  const bool tls_;
  const bool status_token_;
  const std::string name_;
  const std::string ns_;
};

// Whether spec.<role>.template's first container sets a command of its own.
bool TemplateSetsCommand(const json& job, const char* role) {
  const json* at = &job;
  for (const char* key : {"spec", role, "template", "spec", "containers"}) {
    if (!at->is_object() || !at->contains(key)) return false;
    at = &(*at)[key];
  }
  if (!at->is_array() || at->empty() || !(*at)[0].is_object()) return false;
  const json& command = (*at)[0].value("command", json());
  return command.is_array() && !command.empty();
}

}  // namespace

const char* TemplateKey(ReplicaType type) {
  switch (type) {
    case ReplicaType::kMaster: return "master";
    case ReplicaType::kCoordinator: return "coordinator";
    case ReplicaType::kEvaluator: return "evaluator";
    case ReplicaType::kTrainer: return "workers";
  }
  return "workers";
}

std::string TokenSecretName(const std::string& job) { return job + "-token"; }
std::string TlsSecretName(const std::string& job) { return job + "-tls"; }

std::vector<std::string> JobTlsNames(const json& job, uint32_t master_shards) {
  const std::string ns = NamespaceOf(job);
  std::vector<std::string> services;
  for (uint32_t shard = 0; shard < std::max<uint32_t>(master_shards, 1); ++shard) {
    services.push_back(MasterName(NameOf(job), shard, master_shards));
  }
  services.push_back(ReplicaName(NameOf(job), ReplicaType::kCoordinator));
  std::vector<std::string> names;
  for (const std::string& service : services) {
    for (const std::string& suffix :
         {std::string(), "." + ns, "." + ns + ".svc", "." + ns + ".svc.cluster.local"}) {
      names.push_back(service + suffix);
    }
  }
  return names;
}
std::string NetworkPolicyName(const std::string& job) { return job + "-ingress"; }
std::string ExportPodName(const std::string& job) { return job + "-export"; }
std::string JobConfigMapName(const std::string& job) { return job + "-job"; }
std::string CheckpointsClaimName(const std::string& job, uint32_t shard, uint32_t shards) {
  return job + "-checkpoints" + ShardSuffix(shard, shards);
}
std::string MasterName(const std::string& job, uint32_t shard, uint32_t shards) {
  return ReplicaName(job, ReplicaType::kMaster) + ShardSuffix(shard, shards);
}
std::string CheckpointMountPath(uint32_t shard, uint32_t shards) {
  const std::string dir = kCheckpointDir;
  return shards > 1 ? dir + "/shard-" + std::to_string(shard) : dir;
}
std::string CoordinatorStateClaimName(const std::string& job) {
  return job + "-coordinator-state";
}

std::string ReplicaName(const std::string& job, ReplicaType type, int64_t index) {
  if (type == ReplicaType::kTrainer) return job + "-trainer-" + std::to_string(index);
  return job + "-" + ReplicaTypeLabelValue(type);
}

json OwnerReference(const json& job) {
  return json{{"apiVersion", StringAt(job, {"apiVersion"}, "gaptrain.io/v1alpha1")},
              {"kind", StringAt(job, {"kind"}, "TrainingJob")},
              {"name", NameOf(job)},
              {"uid", UidOf(job)},
              {"controller", true},
              {"blockOwnerDeletion", true}};
}

json JobNetworkPolicy(const json& job, const NetworkPolicyConfig& config) {
  const std::string name = NameOf(job);
  const auto tcp = [](std::initializer_list<int> numbers) {
    json ports = json::array();
    for (int port : numbers) ports.push_back(json{{"protocol", "TCP"}, {"port", port}});
    return ports;
  };
  const auto in_namespace = [](const std::string& ns) {
    return json{{"matchLabels", {{kNamespaceNameLabel, ns}}}};
  };
  const json job_pods = {{"matchLabels", Labels(name)}};
  json ingress = json::array(
      {json{{"from", json::array({json{{"podSelector", job_pods}}})},
            {"ports", tcp({kMasterGrpcPort, kCoordinatorGrpcPort})}},
       json{{"from", json::array({json{
                         {"namespaceSelector", in_namespace(config.operator_namespace)},
                         {"podSelector",
                          {{"matchLabels", {{kOperatorPodLabel, kOperatorPodLabelValue}}}}}}})},
            {"ports", tcp({kMasterHttpPort, kCoordinatorHttpPort})}}});
  if (!config.prometheus_namespace.empty()) {
    ingress.push_back(
        json{{"from", json::array({json{
                          {"namespaceSelector", in_namespace(config.prometheus_namespace)}}})},
             {"ports", tcp({kMasterHttpPort, kCoordinatorHttpPort, kWorkerHttpPort})}});
  }
  return json{{"apiVersion", "networking.k8s.io/v1"},
              {"kind", "NetworkPolicy"},
              {"metadata", ObjectMeta(job, NetworkPolicyName(name), Labels(name), true)},
              {"spec",
               {{"podSelector", job_pods},
                {"policyTypes", json::array({"Ingress"})},
                {"ingress", ingress}}}};
}

std::string TokenText(const std::array<uint8_t, 32>& token_bytes) {
  static const char kHex[] = "0123456789abcdef";
  std::string text;
  for (uint8_t b : token_bytes) {
    text.push_back(kHex[b >> 4]);
    text.push_back(kHex[b & 15]);
  }
  return text;
}

Status BuildDesiredChildren(const json& job, const TrainingJob& spec,
                            const OperatorConfig& config, const std::string& image,
                            const JobCredentials& credentials, DesiredChildren* out) {
  const JobTls* tls = credentials.tls;
  const std::string name = NameOf(job);
  // Both messages are the CRD's too (its CEL rules refuse such a job first).
  if (name.empty() || !(name[0] >= 'a' && name[0] <= 'z') ||
      name.size() > kMaxClusterJobNameLength) {
    return Status::InvalidArgument(kRuleClusterJobName.Text() + ", got '" + name + "'");
  }
  if (UidOf(job).empty()) return Status::InvalidArgument("metadata.uid: is required");
  if (spec.model.from_trainer) {
    // Every replica that holds a model runs the user's code (the SDK).
    for (const char* role : {"workers", "evaluator"}) {
      if (!TemplateSetsCommand(job, role)) {
        return Status::InvalidArgument(
            std::string("spec.model.fromTrainer: spec.") + role +
            ".template sets no command (the trainers declare the model, so the trainers and "
            "the evaluator run the Python SDK; gaptrain-worker has no model to run)");
      }
    }
  }
  const TargetSpec target = JobTarget(spec.training);
  if (target.IsSet() && !IsEvaluatorMetric(target.metric) &&
      !TemplateSetsCommand(job, "evaluator")) {
    return Status::InvalidArgument(std::string(kRuleTargetMetricNeedsUsersEvaluator) + ", got '" +
                                   target.metric + "'");
  }
  if (!spec.data.claim_name.empty() && (spec.data.path.empty() || spec.data.path[0] != '/')) {
    return Status::InvalidArgument(kRuleClaimPathAbsolute.Text() + ", got '" + spec.data.path +
                                   "'");
  }

  DesiredChildren d;
  d.secret = json{{"apiVersion", "v1"},
                  {"kind", "Secret"},
                  {"metadata", ObjectMeta(job, TokenSecretName(name), Labels(name), true)},
                  {"type", "Opaque"},
                  {"stringData", {{"token", TokenText(credentials.token_bytes)}}}};
  if (!credentials.status_token.empty()) {
    d.secret["stringData"]["status-token"] = credentials.status_token;
  }
  if (tls != nullptr) {
    d.tls_secret = json{{"apiVersion", "v1"},
                        {"kind", "Secret"},
                        {"metadata", ObjectMeta(job, TlsSecretName(name), Labels(name), true)},
                        {"type", "kubernetes.io/tls"},
                        {"stringData",
                         {{"tls.crt", tls->cert_pem},
                          {"tls.key", tls->key_pem},
                          {"ca.crt", tls->cert_pem}}}};
  }
  d.config_map = json{{"apiVersion", "v1"},
                      {"kind", "ConfigMap"},
                      {"metadata", ObjectMeta(job, JobConfigMapName(name), Labels(name), true)},
                      {"data", {{"job.yaml", JobYaml(job)}}}};
  const bool owned_volumes = spec.run_policy.volume_retention_policy == "Delete";
  const uint32_t shards = spec.master.shards;
  for (uint32_t shard = 0; shard < shards; ++shard) {
    d.persistent_volume_claims.push_back(
        Claim(job, CheckpointsClaimName(name, shard, shards), spec.master.checkpoint.volume_size,
              spec.master.checkpoint.storage_class_name, owned_volumes));
  }
  d.persistent_volume_claims.push_back(
      Claim(job, CoordinatorStateClaimName(name), spec.coordinator.state_volume_size,
            spec.coordinator.storage_class_name, owned_volumes));
  for (uint32_t shard = 0; shard < shards; ++shard) {
    // One shard's Service selects every master pod, as before sharding (a
    // running job's Service is not rewritten); several select theirs only.
    d.services.push_back(HeadlessService(
        job, MasterName(name, shard, shards), ReplicaType::kMaster,
        shards > 1 ? std::optional<uint32_t>(shard) : std::nullopt, kMasterGrpcPort,
        kMasterHttpPort));
  }
  d.services.push_back(HeadlessService(job, ReplicaName(name, ReplicaType::kCoordinator),
                                       ReplicaType::kCoordinator, std::nullopt,
                                       kCoordinatorGrpcPort, kCoordinatorHttpPort));

  if (config.network_policy.enabled) {
    d.network_policy = JobNetworkPolicy(job, config.network_policy);
  }

  const PodBuilder builder(job, spec, config, image, tls != nullptr,
                          !credentials.status_token.empty());
  for (uint32_t shard = 0; shard < shards; ++shard) {
    json pod;
    GAPTRAIN_RETURN_IF_ERROR(builder.Build(ReplicaType::kMaster, shard, &pod));
    d.pods.push_back(std::move(pod));
  }
  for (ReplicaType type : {ReplicaType::kCoordinator, ReplicaType::kEvaluator}) {
    json pod;
    GAPTRAIN_RETURN_IF_ERROR(builder.Build(type, 0, &pod));
    d.pods.push_back(std::move(pod));
  }
  for (uint32_t i = 0; i < spec.workers.replicas; ++i) {
    json pod;
    GAPTRAIN_RETURN_IF_ERROR(builder.Build(ReplicaType::kTrainer, i, &pod));
    d.pods.push_back(std::move(pod));
  }
  *out = std::move(d);
  return Status::OK();
}

std::string OutputTarget(const OutputSpec& output) {
  return output.claim_name + ":" + output.path;
}

Status BuildExportPod(const json& job, const TrainingJob& spec, const OperatorConfig& config,
                      const std::string& image, std::optional<double> test_accuracy,
                      json* pod) {
  const std::string name = NameOf(job);
  const OutputSpec& output = spec.output;
  if (output.claim_name.empty() || output.path.empty()) {
    return Status::InvalidArgument(kRuleOutputClaimAndPath.Text());
  }
  const json* found = FieldAt(job, {"spec", "master", "template"});
  const json pod_template = ExportTemplate(found != nullptr ? *found : json(nullptr));
  const std::string template_path = "spec.master.template";
  GAPTRAIN_RETURN_IF_ERROR(CheckPodTemplate(pod_template, template_path));

  GaptrainPodParts parts;
  json labels = Labels(name);
  labels[kReplicaTypeLabel] = kExportReplicaType;
  parts.metadata = ObjectMeta(job, ExportPodName(name), labels, true);
  parts.default_image = image;
  parts.image_pull_secrets = config.image_pull_secrets;
  parts.termination_grace_period_seconds =
      TemplateGracePeriod(pod_template).value_or(config.default_grace_period_seconds);
  const std::string model = std::string(kOutputDir) + "/" + output.path;
  parts.command = {"gaptrain", "export", "--checkpoint-dir", kCheckpointDir, "-o", model,
                   "--mkdir", "--card", model + ".json", "--job", kJobFile};
  if (test_accuracy && *test_accuracy >= 0 && *test_accuracy <= 1) {
    parts.command.push_back("--test-accuracy");
    parts.command.push_back(FormatNumber(*test_accuracy));
  }
  // The job file names the model in the card; the checkpoints are only
  // read (the master has stopped; a read-only claim cannot be damaged).
  // Each shard's claim where its master wrote it (kCheckpointDir/shard-I
  // with several), which is where `gaptrain export` looks for the shards.
  parts.shared_mounts = json::array({Mount("gaptrain-job", kJobDir, true)});
  parts.volumes = json::array(
      {json{{"name", "gaptrain-job"}, {"configMap", {{"name", JobConfigMapName(name)}}}}});
  const uint32_t shards = spec.master.shards;
  for (uint32_t shard = 0; shard < shards; ++shard) {
    const std::string volume = CheckpointsVolumeName(shard, shards);
    parts.own_mounts.push_back(Mount(volume, CheckpointMountPath(shard, shards), true));
    parts.volumes.push_back(ClaimVolume(volume, CheckpointsClaimName(name, shard, shards), true));
  }
  parts.own_mounts.push_back(Mount("gaptrain-output", kOutputDir, false));
  parts.volumes.push_back(ClaimVolume("gaptrain-output", output.claim_name, false));
  parts.preferred_node_terms = AwayFromSpot(config.spot);
  SetRestrictedSecurity(config, &parts);
  GAPTRAIN_RETURN_IF_ERROR(MergePodTemplate(pod_template, template_path,
                                            ObjectAt(job, {"metadata", "labels"}), parts, pod));
  // After the merge, which takes the template's annotations as they are.
  (*pod)["metadata"]["annotations"][kOutputAnnotation] = OutputTarget(output);
  // A failed export's last lines become its termination message, which the
  // operator copies into status.output: the reason without `kubectl logs`.
  json& container = (*pod)["spec"]["containers"][0];
  if (!container.contains("terminationMessagePolicy")) {
    container["terminationMessagePolicy"] = "FallbackToLogsOnError";
  }
  return Status::OK();
}

}  // namespace trainingjob
}  // namespace gaptrain
