// The environment and command line of a pod's container, resolved as the
// kubelet resolves them before it asks the runtime to start the container.
//
// What callers may rely on:
//   - ExpandVariableReferences is kubelet's expansion: "$(NAME)" becomes the
//     variable's value when NAME is defined and stays as written when it is
//     not; "$$" is a literal "$"; any other "$" is kept.
//   - ResolveContainerEnv applies `envFrom` (config maps and secrets, with
//     their prefix; keys that are not valid variable names are skipped),
//     then `env` in order (a later entry replaces an earlier one of the
//     same name). A `value` is expanded against the variables defined
//     before it. `valueFrom` reads fieldRef (metadata.name, .namespace,
//     .uid, .labels['k'], .annotations['k'], spec.nodeName,
//     spec.serviceAccountName, status.hostIP, status.podIP, status.podIPs)
//     from `pod`, secretKeyRef/configMapKeyRef from `snapshot`, and
//     resourceFieldRef (limits.cpu, requests.cpu, limits.memory,
//     requests.memory of the named container, else this one) as the
//     kubelet does: the quantity divided by `divisor` (default 1), rounded
//     up, as an integer; an unset limit is the node's allocatable
//     (`node_allocatable`: {"cpu": "32", "memory": "128Gi"}), an unset
//     request 0.
//   - A missing secret, config map or key that is not `optional` is
//     NOT_FOUND, with the kubelet's message ('secret "x" not found',
//     "couldn't find key k in Secret ns/x"); the kubelet retries those.
//     Malformed entries are INVALID_ARGUMENT naming the field.
//   - ResolveCommand expands `command` + `args` against the final
//     environment. A container without a command is INVALID_ARGUMENT: the
//     test node has no images, hence no entrypoints.

#ifndef GAPTRAIN_OPERATOR_TESTING_CONTAINER_ENV_H_
#define GAPTRAIN_OPERATOR_TESTING_CONTAINER_ENV_H_

#include <nlohmann/json.hpp>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "operator/testing/cluster_snapshot.h"
#include "services/base/status.h"

namespace gaptrain {
namespace kube_testing {

using EnvironmentList = std::vector<std::pair<std::string, std::string>>;

std::string ExpandVariableReferences(const std::string& input,
                                     const std::map<std::string, std::string>& variables);

// `pod` must already hold what the fieldRefs read (spec.nodeName,
// status.podIP, status.hostIP) when the caller knows it before the API does.
Status ResolveContainerEnv(const nlohmann::json& pod, const nlohmann::json& container,
                           const ClusterSnapshot& snapshot, EnvironmentList* env,
                           const nlohmann::json& node_allocatable = nlohmann::json::object());

// A resource quantity ("500m", "2", "1.5Gi", "1e3") as a number of units
// (cores, bytes); false when `text` is not one.
bool ParseQuantity(const std::string& text, long double* value);

// command followed by args, each expanded against `env`.
Status ResolveCommand(const nlohmann::json& container, const EnvironmentList& env,
                      std::vector<std::string>* argv);

}  // namespace kube_testing
}  // namespace gaptrain

#endif  // GAPTRAIN_OPERATOR_TESTING_CONTAINER_ENV_H_
