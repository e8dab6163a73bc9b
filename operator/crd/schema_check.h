// For tests: what the API server would say about an object, for the subset
// of OpenAPI v3 that trainingjob_crd emits, so a test can check manifests
// against the generated CRD without a cluster.
//
// CheckAgainstSchema knows type, enum, default (ignored), minimum, maximum,
// exclusiveMinimum/exclusiveMaximum (booleans), minLength, maxLength,
// pattern, required, properties, additionalProperties, items, maxItems,
// format and the x-kubernetes-* list and preserve-unknown-fields markers.
// It does not evaluate x-kubernetes-validations (CEL): the tests that need
// them run against a real API server (trainingjob_crd_api_test). Any other
// keyword in the schema is reported, so the checker cannot silently skip
// what the generator starts to emit. Unlike the API server, which prunes
// unknown fields silently, it reports them, except under the root's
// `metadata`, which the server validates as ObjectMeta (the schema only
// restricts its name). A null value counts as absent, as the server
// prunes it.
//
// Values are typed as JSON and YAML 1.2 read them: quoted scalars are
// strings, plain ones are booleans (true/false), integers, numbers or
// strings by their spelling.

#ifndef GAPTRAIN_OPERATOR_CRD_SCHEMA_CHECK_H_
#define GAPTRAIN_OPERATOR_CRD_SCHEMA_CHECK_H_

#include <yaml-cpp/yaml.h>

#include <string>
#include <vector>

namespace gaptrain {

// One message per violation, each starting with the value's path under
// `path` ("spec.workers.replicas: ...", "[2]" for list items); empty when
// `value` conforms.
std::vector<std::string> CheckAgainstSchema(const YAML::Node& schema, const YAML::Node& value,
                                            const std::string& path = "");

// Where `schema` (an openAPIV3Schema) is not structural as Kubernetes
// requires: a node without `type` (unless it preserves unknown fields), or
// root metadata that restricts more than name and generateName. Messages
// start with the schema node's path ("properties.spec.properties.model").
std::vector<std::string> StructuralProblems(const YAML::Node& schema);

// The JSON type of a scalar as described above: "string", "boolean",
// "integer", "number" or "null"; "object" and "array" for collections.
std::string JsonTypeOf(const YAML::Node& value);

}  // namespace gaptrain

#endif  // GAPTRAIN_OPERATOR_CRD_SCHEMA_CHECK_H_
