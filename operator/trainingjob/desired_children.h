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
//
// Every child is labelled gaptrain.io/job-name=NAME and has a controller
// ownerReference to the job (PVCs only with volumeRetentionPolicy Delete).
// Pods merge the replica's template (pod_template.h) with gaptrain's
// container, env, volumes, probes, ports and labels; spot tolerations and
// affinity follow spot_scheduling.h.
//
// Errors (INVALID_ARGUMENT, naming the field) are what the API server
// would refuse later: a job name too long for its Services' DNS names, a
// template of the wrong shape, a data claim with a relative path.

#ifndef GAPTRAIN_OPERATOR_TRAININGJOB_DESIRED_CHILDREN_H_
#define GAPTRAIN_OPERATOR_TRAININGJOB_DESIRED_CHILDREN_H_

#include <array>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "operator/trainingjob/operator_config.h"
#include "operator/trainingjob/pod_state.h"
#include "services/common/status.h"
#include "services/common/training_job.h"

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
constexpr char kJobDir[] = "/etc/gaptrain";
constexpr char kJobFile[] = "/etc/gaptrain/job.yaml";
constexpr char kCheckpointDir[] = "/var/lib/gaptrain/checkpoints";
constexpr char kCoordinatorStateDir[] = "/var/lib/gaptrain/coordinator";

// Children's names.
std::string TokenSecretName(const std::string& job);       // NAME-token
std::string JobConfigMapName(const std::string& job);      // NAME-job
std::string CheckpointsClaimName(const std::string& job);  // NAME-checkpoints
std::string CoordinatorStateClaimName(const std::string& job);  // NAME-coordinator-state
// NAME-master, NAME-coordinator, NAME-evaluator, NAME-trainer-INDEX; also
// the master's and coordinator's Service.
std::string ReplicaName(const std::string& job, ReplicaType type, int64_t index = 0);

// What every child of the job carries.
nlohmann::json OwnerReference(const nlohmann::json& job);

struct DesiredChildren {
  nlohmann::json secret;
  nlohmann::json config_map;
  std::vector<nlohmann::json> persistent_volume_claims;  // checkpoints, coordinator state
  std::vector<nlohmann::json> services;                  // master, coordinator
  // master, coordinator, evaluator, then trainers by index.
  std::vector<nlohmann::json> pods;
};

// `job` is the TrainingJob object (its metadata and templates are read
// from it: templates keep their JSON types there), `spec` its parse.
Status BuildDesiredChildren(const nlohmann::json& job, const TrainingJob& spec,
                            const OperatorConfig& config,
                            const std::array<uint8_t, 32>& token_bytes, DesiredChildren* out);

// The token the Secret holds: 64 lower-case hex digits.
std::string TokenText(const std::array<uint8_t, 32>& token_bytes);

}  // namespace trainingjob
}  // namespace gaptrain

#endif  // GAPTRAIN_OPERATOR_TRAININGJOB_DESIRED_CHILDREN_H_
