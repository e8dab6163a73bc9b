// The CustomResourceDefinition that lets a cluster store TrainingJobs
// (trainingjobs.gaptrain.io, committed as kTrainingJobCrdPath).
//
// The spec's schema is generated from the parser's field tables
// (services/common/training_job.h): every field with its type, default,
// choices, range and description, so `kubectl apply` accepts the values
// `gaptrain run` accepts. Pod templates and spec.simulation are free-form
// objects. The rules between fields (exactly one of epochs and maxUpdates,
// minReplicas <= replicas, ...) are not in the schema: the operator parses
// each job with ParseTrainingJob and reports its error.
//
// The status schema is defined here; the operator writes status to it
// (docs/trainingjob.md lists it). The scale subresource maps
// spec.workers.replicas, and `kubectl get` shows State, Workers, Epoch,
// Accuracy, Gap and Age from status.
//
// The output is deterministic: the same tables give the same bytes.

#ifndef GAPTRAIN_OPERATOR_CRD_TRAININGJOB_CRD_H_
#define GAPTRAIN_OPERATOR_CRD_TRAININGJOB_CRD_H_

#include <nlohmann/json.hpp>
#include <string>

namespace gaptrain {

// Where the generated CRD is committed, relative to the workspace root.
inline constexpr char kTrainingJobCrdPath[] = "deploy/crd/gaptrain.io_trainingjobs.yaml";
// What rewrites it.
inline constexpr char kRegenerateCrdCommand[] = "scripts/generate-crd.sh";

// The CRD as a JSON value, keys in the order they are written.
nlohmann::ordered_json TrainingJobCrd();

// The CRD as the YAML file committed at kTrainingJobCrdPath.
std::string TrainingJobCrdYaml();

}  // namespace gaptrain

#endif  // GAPTRAIN_OPERATOR_CRD_TRAININGJOB_CRD_H_
