// The CustomResourceDefinition that lets a cluster store TrainingJobs
// (trainingjobs.gaptrain.io, committed as kTrainingJobCrdPath).
//
// The spec's schema is generated from the parser's field tables
// (services/api/training_job.h): every field with its type, default,
// choices, range and description, so `kubectl apply` accepts the values
// `gaptrain run` accepts. Pod templates and spec.simulation are free-form
// objects. The rules between fields (exactly one of epochs and maxUpdates,
// minReplicas <= replicas, ...) and the operator's own checks of a job (a
// name short enough for its Services, an absolute data path under a claim)
// are CEL rules (x-kubernetes-validations), each with the message the parser
// or the operator gives (services/api/training_job.h's JobRules), so the
// API server refuses at `kubectl apply` what the operator would fail. What
// depends on the training set (CheckJobAgainstData) stays the operator's.
//
// The status schema is defined here; the operator writes status to it
// (docs/trainingjob.md lists it). The scale subresource maps
// spec.workers.replicas, and `kubectl get` shows State, Workers, Epoch,
// Accuracy, Gap, Updates/s and Age from status (the strings the operator
// writes to status.display for people; status.progress has the numbers).
//
// The output is deterministic: the same tables give the same bytes.

#ifndef GAPTRAIN_OPERATOR_CRD_TRAININGJOB_CRD_H_
#define GAPTRAIN_OPERATOR_CRD_TRAININGJOB_CRD_H_

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace gaptrain {

// Where the generated CRD is committed, relative to the workspace root.
inline constexpr char kTrainingJobCrdPath[] = "deploy/crd/gaptrain.io_trainingjobs.yaml";
// What rewrites it.
inline constexpr char kRegenerateCrdCommand[] = "scripts/generate-crd.sh";

// The oldest Kubernetes release the CRD supports ("1.32"): the first whose
// API server serves selectableFields by default (GA in 1.32) besides
// everything else the CRD uses (CEL rules with messageExpression and
// fieldPath). An older API server drops what it does not know without an
// error, so this is checked by installing the CRD on that release
// (trainingjob_crd_minimum_test), whose kube-apiserver
// scripts/test-cluster.sh builds into the envtest assets' minimum/.
inline constexpr char kMinimumKubernetesVersion[] = "1.32";

// A rule between fields as the CRD states it: a CEL expression over the
// schema node at `at` ("" is the root, else a dotted path such as
// "spec.workers"), true when the object is valid, and the message the API
// server answers otherwise, the parser's or the operator's own words
// (JobRule::Text()).
struct CrdValidationRule {
  std::string at;
  std::string rule;
  std::string message;
  // When set, a CEL string expression the API server answers instead of
  // `message`, with the value the operator adds to it (", got 'NAME'");
  // `message` stays the answer should the expression fail.
  std::string message_expression;
  // The field the rule is about, below `at` (".minReplicas"), which the API
  // server's error names; "" names `at` itself.
  std::string field_path;
};

// The fields `kubectl get tj --field-selector` may select on (the CRD's
// selectableFields): the job's phase and the spec fields a cluster's jobs
// are told apart by.
std::vector<std::string> TrainingJobSelectableFields();

// Every rule the CRD states, in the order they are written.
std::vector<CrdValidationRule> TrainingJobValidationRules();

// The CRD as a JSON value, keys in the order they are written.
nlohmann::ordered_json TrainingJobCrd();

// The CRD as the YAML file committed at kTrainingJobCrdPath.
std::string TrainingJobCrdYaml();

}  // namespace gaptrain

#endif  // GAPTRAIN_OPERATOR_CRD_TRAININGJOB_CRD_H_
