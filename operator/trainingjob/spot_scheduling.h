// SpotScheduling: how the operator puts preemptible pods on spot nodes and
// keeps the master and the coordinator off them. A cluster's spot nodes
// are described once, as node selector requirements that match them, plus
// the tolerations their taints need; presets cover the managed clouds:
//
//   gke   node label cloud.google.com/gke-spot=true (and its optional
//         NoSchedule taint)
//   eks   node label eks.amazonaws.com/capacityType=SPOT
//   aks   node label kubernetes.azure.com/scalesetpriority=spot and its
//         NoSchedule taint
//   none  nothing: preemptible pods get no tolerations or affinity
//
// What callers may rely on:
//   - Trainers and the evaluator of a job with spec.workers.preemptible get
//     `tolerations` and a *required* node affinity to the spot nodes (all
//     of `spot_node_selector`), the way the clouds document it.
//   - The master and the coordinator get a *preferred* node affinity away
//     from spot nodes (one preferred term per requirement, negated), so
//     they land on on-demand nodes when there are any.
//   - ParseSpotScheduling validates a custom description fully; errors
//     name the field ("--spot-preset: tolerations[0].effect: ...").

#ifndef GAPTRAIN_OPERATOR_TRAININGJOB_SPOT_SCHEDULING_H_
#define GAPTRAIN_OPERATOR_TRAININGJOB_SPOT_SCHEDULING_H_

#include <nlohmann/json.hpp>
#include <string>

#include "services/base/status.h"

namespace gaptrain {
namespace trainingjob {

struct SpotScheduling {
  std::string name = "none";  // the preset, or "custom"
  // core/v1 Tolerations added to preemptible pods.
  nlohmann::json tolerations = nlohmann::json::array();
  // core/v1 NodeSelectorRequirements that together match the spot nodes;
  // operators In, NotIn, Exists, DoesNotExist (the ones that can be negated).
  nlohmann::json spot_node_selector = nlohmann::json::array();

  bool empty() const { return tolerations.empty() && spot_node_selector.empty(); }
};

// "gke", "eks", "aks" or "none".
Status SpotPreset(const std::string& name, SpotScheduling* out);

// The value of the operator's --spot-preset flag (or its ConfigMap key): a
// preset name, or a JSON object
//   {"tolerations": [...], "spotNodeSelector": [{"key": ..., "operator": ..., "values": [...]}]}
// `source` names the value in errors.
Status ParseSpotScheduling(const std::string& value, const std::string& source,
                           SpotScheduling* out);

// The requirement that matches the nodes `requirement` does not match
// ({In, x} -> {NotIn, x}, {Exists} -> {DoesNotExist}, ...).
nlohmann::json NegatedRequirement(const nlohmann::json& requirement);

}  // namespace trainingjob
}  // namespace gaptrain

#endif  // GAPTRAIN_OPERATOR_TRAININGJOB_SPOT_SCHEDULING_H_
