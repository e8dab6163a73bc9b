// YamlToJson: converts one YAML document (the body of a server-side apply,
// "application/apply-patch+yaml", or a CRD manifest) to JSON the way
// kube-apiserver's YAML decoder (sigs.k8s.io/yaml over go-yaml v2) does:
// plain scalars become null, booleans (YAML 1.1: true/false/yes/no/on/off),
// integers or floats when they look like one, strings otherwise; quoted
// scalars are always strings. JSON is YAML, so JSON bodies convert too.
//
// Errors (INVALID_ARGUMENT, naming the line) for malformed YAML, more than
// one document, duplicate keys, and keys that are not scalars.

#ifndef GAPTRAIN_SERVICES_TESTING_YAML_TO_JSON_H_
#define GAPTRAIN_SERVICES_TESTING_YAML_TO_JSON_H_

#include <nlohmann/json.hpp>

#include <string>

#include "services/base/status.h"

namespace gaptrain {
namespace kube_testing {

Status YamlToJson(const std::string& yaml_text, nlohmann::json* out);

}  // namespace kube_testing
}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_TESTING_YAML_TO_JSON_H_
