// DesiredChildren: the objects a TrainingJob NAME in namespace NS should
// own, as the operator's design lists them (operator/trainingjob/README.md).
// A pure function of the job, the operator's configuration and the token's
// random bytes.
//
//   Secret     NAME-token              token: hex of 32 random bytes
//   ConfigMap  NAME-job                job.yaml: the manifest as the services read it
//   PVC        NAME-checkpoints        the master's checkpoints (ReadWriteOnce)
//   PVC        NAME-coordinator-state  the coordinator's state (ReadWriteOnce)
//   Service    NAME-master             headless; grpc 7070, metrics 9090
//   Service    NAME-coordinator        headless; grpc 7071, metrics 9091
//   Pod        NAME-master, NAME-coordinator, NAME-evaluator,
//              NAME-trainer-0 .. NAME-trainer-(replicas-1)
//   With spec.master.shards S > 1 the master is S masters, shard I having
//   its own Pod and Service NAME-master-I and claim NAME-checkpoints-I
//   (MasterName, CheckpointsClaimName), in shard order where NAME-master
//   stands above; one shard names them as above.
//   Pod        NAME-export, only once the job has succeeded and only with
//              spec.output (BuildExportPod; the reconcile decides when)
//   NetworkPolicy NAME-ingress         with OperatorConfig::network_policy
//              enabled: into the job's pods only the job's own traffic
//              (JobNetworkPolicy below)
//
// Every child is labelled gaptrain.io/job-name=NAME and has a controller
// ownerReference to the job (PVCs only with volumeRetentionPolicy Delete).
// Pods merge the replica's template (pod_template.h) with gaptrain's
// container (the job's image, recorded_image.h, where the template names
// none), env, volumes, probes, ports, the operator's image pull secrets
// after the template's, and labels (a worker template whose
// first container sets `command` runs it as given, its settings in the
// GAPTRAIN_* env, which gaptrain-worker's containers get too); spot tolerations and
// affinity follow spot_scheduling.h. Pods meet PodSecurity "restricted"
// unless their template asks otherwise: they run as the image's user
// (kImageUser, non-root), its group owns their volumes (fsGroup, so the
// master and the coordinator can write a fresh claim), RuntimeDefault
// seccomp, and no container may gain privileges or keep a capability.
// With OperatorConfig::fixed_pod_ids false they name no ids (the cluster
// assigns them) and keep the rest.
//
// Errors (INVALID_ARGUMENT, naming the field) are what the API server
// would refuse later: a job name too long for its Services' DNS names, a
// template of the wrong shape, a data claim with a relative path.

#ifndef GAPTRAIN_OPERATOR_TRAININGJOB_DESIRED_CHILDREN_H_
#define GAPTRAIN_OPERATOR_TRAININGJOB_DESIRED_CHILDREN_H_

#include <array>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "operator/trainingjob/job_tls.h"
#include "operator/trainingjob/operator_config.h"
#include "operator/trainingjob/pod_state.h"
#include "services/api/training_job.h"
#include "services/base/status.h"

namespace gaptrain {
namespace trainingjob {

// Ports and paths inside the pods.
constexpr int kMasterGrpcPort = 7070;
constexpr int kMasterHttpPort = 9090;
constexpr int kCoordinatorGrpcPort = 7071;
constexpr int kCoordinatorHttpPort = 9091;
constexpr int kWorkerHttpPort = 9092;
constexpr char kTokenDir[] = "/var/run/gaptrain";
constexpr char kTokenFile[] = "/var/run/gaptrain/token";
// The token the coordinator's /status asks for (--status-token-file), from
// the same Secret; the operator keeps it in the job's annotation
// kStatusTokenAnnotation, where it reads it back (it reads no Secret).
constexpr char kStatusTokenFile[] = "/var/run/gaptrain/status-token";
constexpr char kStatusTokenAnnotation[] = "gaptrain.io/status-token";
constexpr char kJobDir[] = "/etc/gaptrain";
// In-cluster TLS (JobTls): the job's certificate, key and CA (the
// certificate itself) from the Secret NAME-tls.
constexpr char kTlsDir[] = "/var/run/gaptrain-tls";
constexpr char kJobFile[] = "/etc/gaptrain/job.yaml";
constexpr char kCheckpointDir[] = "/var/lib/gaptrain/checkpoints";
constexpr char kCoordinatorStateDir[] = "/var/lib/gaptrain/coordinator";
// Where the export pod mounts spec.output's claim.
constexpr char kOutputDir[] = "/var/lib/gaptrain/output";
// The export pod's gaptrain.io/replica-type: not a ReplicaType (it is no
// part of the training and is counted in no replicaStatuses).
constexpr char kExportReplicaType[] = "export";
// The export pod's annotation: the destination it writes ("CLAIM:PATH"), so
// that a changed spec.output is seen as a new export.
constexpr char kOutputAnnotation[] = "gaptrain.io/output";
// The user and group gaptrain of the image (image/rootfs-setup.sh), which
// owns the directories above the volumes are mounted on.
constexpr int64_t kImageUser = 65532;

// Children's names.
std::string TokenSecretName(const std::string& job);       // NAME-token
std::string TlsSecretName(const std::string& job);         // NAME-tls
std::string JobConfigMapName(const std::string& job);      // NAME-job
// NAME-checkpoints; with several master shards NAME-checkpoints-SHARD.
std::string CheckpointsClaimName(const std::string& job, uint32_t shard = 0,
                                 uint32_t shards = 1);
std::string CoordinatorStateClaimName(const std::string& job);  // NAME-coordinator-state
std::string ExportPodName(const std::string& job);         // NAME-export
std::string NetworkPolicyName(const std::string& job);     // NAME-ingress
// NAME-master, NAME-coordinator, NAME-evaluator, NAME-trainer-INDEX; also
// the master's and coordinator's Service. The master's is its name with one
// shard: MasterName names any shard.
std::string ReplicaName(const std::string& job, ReplicaType type, int64_t index = 0);
// Master shard `shard` of `shards` (spec.master.shards), its Pod's and its
// Service's name: NAME-master with one shard (a job from before sharding
// keeps its names), NAME-master-SHARD with several. Its pod's
// gaptrain.io/replica-index is SHARD.
std::string MasterName(const std::string& job, uint32_t shard, uint32_t shards);
// Where a master shard's claim is mounted: kCheckpointDir with one shard;
// with several kCheckpointDir/shard-SHARD, the directory gaptrain-master
// --shard SHARD writes under --checkpoint-dir kCheckpointDir
// (services/master/master_process.cc), and where `gaptrain export
// --checkpoint-dir kCheckpointDir` reads each shard.
std::string CheckpointMountPath(uint32_t shard, uint32_t shards);

// What every child of the job carries.
nlohmann::json OwnerReference(const nlohmann::json& job);

// The key of the replica's section in spec, which holds its template:
// "master", "coordinator", "evaluator", "workers".
const char* TemplateKey(ReplicaType type);

// The DNS names the job's masters (each of `master_shards`) and its
// coordinator are dialled by (their Services', short and qualified).
std::vector<std::string> JobTlsNames(const nlohmann::json& job, uint32_t master_shards);

struct DesiredChildren {
  nlohmann::json secret;
  // With TLS: NAME-tls (kubernetes.io/tls, and ca.crt, the certificate
  // itself), created as the token is: create-only, with the pods.
  std::optional<nlohmann::json> tls_secret;
  nlohmann::json config_map;
  // checkpoints (each master shard's, in shard order), coordinator state
  std::vector<nlohmann::json> persistent_volume_claims;
  std::vector<nlohmann::json> services;  // master (each shard's), coordinator
  // master (each shard's), coordinator, evaluator, then trainers by index.
  std::vector<nlohmann::json> pods;
  // JobNetworkPolicy; absent when OperatorConfig::network_policy is off.
  std::optional<nlohmann::json> network_policy;
};

// The job's NetworkPolicy (networking.k8s.io/v1), NAME-ingress: it selects
// the job's pods (gaptrain.io/job-name=NAME) and isolates their ingress
// only, admitting
//   - from the job's own pods: the master's and the coordinator's gRPC
//     ports (7070, 7071), which the coordinator and the workers call;
//   - from the operator's pods (kOperatorPodLabel in
//     config.operator_namespace, operator_config.h): the master's and the
//     coordinator's HTTP
//     ports (9090 /metrics, 9091 /status), which it reads progress from;
//   - with config.prometheus_namespace, from every pod there: each job
//     pod's HTTP port (9090, 9091, 9092), for /metrics.
// Egress is left open: trainers read data from stores the operator does
// not know (object storage, NFS), and look names up in the cluster's DNS.
// Labelled and owned as every child. A pure function; rules in this order.
nlohmann::json JobNetworkPolicy(const nlohmann::json& job, const NetworkPolicyConfig& config);

// `job` is the TrainingJob object (its metadata and templates are read
// from it: templates keep their JSON types there), `spec` its parse.
// What a job's Secrets hold.
struct JobCredentials {
  std::array<uint8_t, 32> token_bytes{};  // the job token's (TokenText)
  // With TLS, gRPC in the job is TLS: the master and the coordinator serve
  // the certificate (--tls-cert, --tls-key), their callers trust it
  // (--master-ca, --coordinator-ca; $GAPTRAIN_MASTER_CA and
  // $GAPTRAIN_COORDINATOR_CA for a user's trainer command), every pod but
  // the export mounting NAME-tls at kTlsDir. Null: plaintext.
  const JobTls* tls = nullptr;
  // Not empty: the token Secret's key status-token, and the coordinator's
  // /status asks for it (--status-token-file kStatusTokenFile). Empty: a
  // job from before, whose /status stays open.
  std::string status_token;
};

// `image` is gaptrain's container's where the template names none: the
// job's (JobPodImage), not necessarily the operator's config.image.
Status BuildDesiredChildren(const nlohmann::json& job, const TrainingJob& spec,
                            const OperatorConfig& config, const std::string& image,
                            const JobCredentials& credentials, DesiredChildren* out);

// "CLAIM:PATH": the value of kOutputAnnotation for `output`.
std::string OutputTarget(const OutputSpec& output);

// The pod that writes the trained model to spec.output once the job has
// succeeded: `gaptrain export` of the newest valid checkpoint in the
// checkpoint claim (mounted read-only at kCheckpointDir: the master has
// stopped, with a final checkpoint) to kOutputDir/PATH on the output claim,
// creating PATH's directories, with the model card PATH.json beside it
// (the job's name, model and dataset from job.yaml, and `test_accuracy`,
// the evaluator's final one, when known). With several master shards each
// shard's claim is mounted read-only at CheckpointMountPath, and `gaptrain
// export --checkpoint-dir kCheckpointDir` reads the shards there. Its template is the master's,
// less the master's args, probes and sidecars; restartPolicy Never,
// PodSecurity "restricted" as every job pod, no token (it talks to no
// service), the master's affinity away from spot nodes, labelled
// gaptrain.io/replica-type=export and annotated kOutputAnnotation.
// `image` as for BuildDesiredChildren.
// INVALID_ARGUMENT without spec.output or for a malformed master template.
Status BuildExportPod(const nlohmann::json& job, const TrainingJob& spec,
                      const OperatorConfig& config, const std::string& image,
                      std::optional<double> test_accuracy, nlohmann::json* pod);

// The token the Secret holds: 64 lower-case hex digits.
std::string TokenText(const std::array<uint8_t, 32>& token_bytes);

}  // namespace trainingjob
}  // namespace gaptrain

#endif  // GAPTRAIN_OPERATOR_TRAININGJOB_DESIRED_CHILDREN_H_
