// TableView: the meta.k8s.io/v1 Table that `kubectl get` asks for
// (Accept: application/json;as=Table;v=v1;g=meta.k8s.io), for custom
// resources: a Name column and the CRD's additionalPrinterColumns (Age when
// it declares none), cells read with their simple JSONPath (".a.b",
// "[n]", "[a:b]" with negative indexes) and converted as kube-apiserver
// does (dates become ages such as "5m"), and each row's object as
// PartialObjectMetadata (or the whole object, or none, per includeObject).

#ifndef GAPTRAIN_OPERATOR_TESTING_TABLE_VIEW_H_
#define GAPTRAIN_OPERATOR_TESTING_TABLE_VIEW_H_

#include <nlohmann/json.hpp>

#include <chrono>
#include <string>
#include <vector>

#include "operator/testing/resource_type.h"

namespace gaptrain {
namespace kube_testing {

// `include_object` is "Metadata" (the default), "Object" or "None".
nlohmann::ordered_json TableView(const ResourceType& type, const std::vector<nlohmann::json>& objects,
                                 const std::string& resource_version,
                                 const std::string& continue_token,
                                 const std::string& include_object,
                                 std::chrono::system_clock::time_point now);

// The values a simple JSONPath selects in `object`.
std::vector<nlohmann::json> EvaluateJsonPath(const nlohmann::json& object, const std::string& path);

// Kubernetes' HumanDuration: "0s", "59s", "2m3s", "10m", "3h5m", "2d", ...
std::string HumanDuration(std::chrono::seconds age);

}  // namespace kube_testing
}  // namespace gaptrain

#endif  // GAPTRAIN_OPERATOR_TESTING_TABLE_VIEW_H_
