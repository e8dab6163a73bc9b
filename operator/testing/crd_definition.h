// CustomResourceDefinition objects (apiextensions.k8s.io/v1) as the fake
// API server serves them: validation with the real server's causes, the
// resource types a CRD serves (one per served version: names, scope,
// status and scale subresources, schema, printer columns), its defaults,
// and the status an accepted CRD reports (NamesAccepted, Established).
//
// Creating a CRD through the API, or passing one to FakeApiServer's
// options, is what makes its custom resources servable.

#ifndef GAPTRAIN_OPERATOR_TESTING_CRD_DEFINITION_H_
#define GAPTRAIN_OPERATOR_TESTING_CRD_DEFINITION_H_

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "operator/testing/api_error.h"
#include "operator/testing/resource_type.h"

namespace gaptrain {
namespace kube_testing {

// The resource type of CRDs themselves (cluster-scoped, apiextensions.k8s.io/v1).
ResourceType CustomResourceDefinitionType();

// Checks `crd` (defaults applied) and, when valid, appends the types it
// serves to *served. Problems are appended to *causes instead.
void ParseCrd(const nlohmann::json& crd, std::vector<ResourceType>* served,
              std::vector<StatusCause>* causes);

// spec.names.singular and listKind, spec.conversion.
void ApplyCrdDefaults(nlohmann::json* crd);

// The status of an accepted CRD: acceptedNames, conditions, storedVersions.
void SetAcceptedCrdStatus(const std::string& now, nlohmann::json* crd);

}  // namespace kube_testing
}  // namespace gaptrain

#endif  // GAPTRAIN_OPERATOR_TESTING_CRD_DEFINITION_H_
