// What the operator's caches keep of the objects they hold: the fields the
// reconcile and the progress reader read, no more (issue 43: a thousand
// jobs held whole took half a gigabyte, three quarters of it the pods'
// specs and every object's managedFields). Informer transforms
// (kube::Reflector::Options::transform), as controller-runtime operators
// strip managedFields and keep typed objects.
//
// What callers may rely on:
//   - Both functions are idempotent, never throw, and leave anything that
//     is not a JSON object (or has no such fields) as it was.
//   - TrimCachedObject drops metadata.managedFields and the
//     kubectl.kubernetes.io/last-applied-configuration annotation (a
//     client-side apply's copy of the whole object); everything else,
//     spec, status, labels, other annotations and owners, stays. For
//     every kind the reconcile compares with what it wants (ConfigMaps,
//     claims, Services, NetworkPolicies) and for TrainingJobs (whose
//     writes are merge patches, never updates, so nothing dropped here is
//     written back). Not for Kueue's Workloads, whose managedFields the
//     reconcile reads.
//   - TrimCachedPod does that and keeps of the pod's spec only what is
//     read: nodeName, each container's name and image, and the volumes
//     that are Secrets (name and secretName); metadata and status whole.

#ifndef GAPTRAIN_OPERATOR_TRAININGJOB_CACHED_FIELDS_H_
#define GAPTRAIN_OPERATOR_TRAININGJOB_CACHED_FIELDS_H_

#include <nlohmann/json.hpp>

namespace gaptrain {
namespace trainingjob {

// The annotation kubectl's client-side apply writes.
inline constexpr char kLastAppliedAnnotation[] = "kubectl.kubernetes.io/last-applied-configuration";

void TrimCachedObject(nlohmann::json* object);
void TrimCachedPod(nlohmann::json* pod);

}  // namespace trainingjob
}  // namespace gaptrain

#endif  // GAPTRAIN_OPERATOR_TRAININGJOB_CACHED_FIELDS_H_
