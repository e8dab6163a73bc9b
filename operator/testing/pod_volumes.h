// The volumes of a pod on the test node (LocalNode), made as the kubelet
// makes them, and the bind mounts that put them at the container's
// volumeMounts.
//
// What callers may rely on:
//   - secret and configMap volumes become files (all keys, or `items` with
//     their paths and modes; defaultMode else 0644) in a fresh directory
//     under `pod_dir`, mounted read-only. A missing object or key is
//     NOT_FOUND unless the volume is `optional` (the kubelet retries).
//   - projected volumes (what the ServiceAccount admission adds to every
//     pod as kube-api-access-*) put their sources' files in one such
//     directory: secret, configMap, downwardAPI (metadata.name, .namespace,
//     .uid, .labels, .annotations) and serviceAccountToken, whose token
//     `tokens` issues (as the kubelet asks the TokenRequest API).
//   - persistentVolumeClaim volumes are ClaimDirectory(claims_dir, claim):
//     one host directory per claim (by uid), which outlives pods. The claim
//     must exist and be Bound (NOT_FOUND / UNAVAILABLE otherwise).
//   - emptyDir is a directory under `pod_dir` (it goes with the pod);
//     hostPath is the host's path (types "", Directory, DirectoryOrCreate,
//     File, FileOrCreate).
//   - subPath selects a path inside the volume (created as a directory if
//     missing, except in secret and configMap volumes).
//   - The mounts come parents first (by mountPath depth), so a volume
//     mounted inside another one's path lands inside it.
//   - Other volume types, subPathExpr, and malformed fields are
//     INVALID_ARGUMENT naming the field.

#ifndef GAPTRAIN_OPERATOR_TESTING_POD_VOLUMES_H_
#define GAPTRAIN_OPERATOR_TESTING_POD_VOLUMES_H_

#include <nlohmann/json.hpp>

#include <functional>
#include <string>
#include <vector>

#include "operator/testing/cluster_snapshot.h"
#include "operator/testing/container_process.h"
#include "services/base/status.h"

namespace gaptrain {
namespace kube_testing {

// claims_dir/NAMESPACE/NAME-UID.
std::string ClaimDirectory(const std::string& claims_dir, const nlohmann::json& claim);

// A token of the pod's ServiceAccount for `audience` ("": the API
// server's), valid for `expiration_seconds`.
using TokenSource = std::function<Status(const nlohmann::json& pod, const std::string& audience,
                                         int64_t expiration_seconds, std::string* token)>;

Status PreparePodVolumes(const nlohmann::json& pod, const nlohmann::json& container,
                         const ClusterSnapshot& snapshot, const std::string& pod_dir,
                         const std::string& claims_dir, const TokenSource& tokens,
                         std::vector<BindMount>* mounts);

}  // namespace kube_testing
}  // namespace gaptrain

#endif  // GAPTRAIN_OPERATOR_TESTING_POD_VOLUMES_H_
