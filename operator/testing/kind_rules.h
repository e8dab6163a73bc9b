// Kind rules: what kube-apiserver v1.26 does to objects of a particular kind
// beyond the generic registry: decoding (schema pruning of custom
// resources, base64 of Secret data), defaults, the fields it fills in on
// create (a pod's Pending status and QoS class, a service's cluster IP),
// validation of metadata and of each kind, what a field selector may
// select, and how server-side apply treats the kind's lists and maps.
//
// Covered kinds: Pod, Service, Secret, ConfigMap, PersistentVolumeClaim,
// ServiceAccount, events.k8s.io Event, Lease, CustomResourceDefinition and
// custom resources. The rules are the ones an operator is likely to meet,
// not all of Kubernetes; see README.md for what is left out.

#ifndef GAPTRAIN_OPERATOR_TESTING_KIND_RULES_H_
#define GAPTRAIN_OPERATOR_TESTING_KIND_RULES_H_

#include <nlohmann/json.hpp>

#include <functional>
#include <string>
#include <vector>

#include "operator/testing/api_error.h"
#include "operator/testing/managed_fields.h"
#include "operator/testing/resource_type.h"

namespace gaptrain {
namespace kube_testing {

// Decoding a request body: custom resources lose fields their schema does
// not declare (each appended to *warnings as "unknown field \"spec.x\""),
// and data that cannot be decoded is a 400 (Secret data not in base64).
// Then the kind's defaults are applied. Runs on every create and update.
ApiError DecodeObject(const ResourceType& type, nlohmann::json* object,
                      std::vector<std::string>* warnings);

// Only the defaults (DecodeObject's last step); idempotent.
void ApplyKindDefaults(const ResourceType& type, nlohmann::json* object);

// Fields the server fills in on create: a pod's status (Pending, QoS
// class), a service's cluster IP (from `allocate_cluster_ip`) and status,
// a claim's Pending status; custom resources and others with a status
// subresource start without status.
void PrepareForCreate(const ResourceType& type, nlohmann::json* object,
                      const std::function<std::string()>& allocate_cluster_ip);

// Fields an update keeps from the stored object when the client leaves them
// out (a service's allocated cluster IPs).
void PrepareForUpdate(const ResourceType& type, const nlohmann::json& old_object,
                      nlohmann::json* object);

// Validation of metadata and the kind's own rules; `old_object` is null on
// create. Appends the 422 causes.
void ValidateObject(const ResourceType& type, const nlohmann::json* old_object,
                    const nlohmann::json& object, std::vector<StatusCause>* causes);

// The object's value of a field selector field; false when the kind does
// not support selecting on `field` (the request then gets 400).
bool SelectableField(const ResourceType& type, const nlohmann::json& object,
                     const std::string& field, std::string* value);

// How server-side apply merges the value at `names` (property names from
// the root) of an object of this kind.
FieldShape ShapeOf(const ResourceType& type, const std::vector<std::string>& names);

// The object a create is compared against for managed fields: typed kinds
// start with their zero value (a Pod has "spec": {} before it is created).
nlohmann::json EmptyObject(const ResourceType& type);

// Copies the metadata the server owns (name, namespace, uid,
// creationTimestamp, deletionTimestamp, deletionGracePeriodSeconds,
// generation, resourceVersion) from the stored object into an update of it,
// whatever the client sent; drops selfLink.
void KeepServerOwnedMetadata(const nlohmann::json& stored, nlohmann::json* object);

// The QoS class Kubernetes gives a pod spec: BestEffort, Burstable or
// Guaranteed.
std::string PodQosClass(const nlohmann::json& pod_spec);

}  // namespace kube_testing
}  // namespace gaptrain

#endif  // GAPTRAIN_OPERATOR_TESTING_KIND_RULES_H_
