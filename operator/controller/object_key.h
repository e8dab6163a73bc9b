// Object keys: how the controller machinery names one API object in its
// caches and work queues, as client-go's MetaNamespaceKeyFunc does:
// "namespace/name", or "name" for a cluster-scoped object.
//
// What callers may rely on:
//   - ObjectKey fails (INVALID_ARGUMENT naming the field) for anything that
//     is not a JSON object with a non-empty string metadata.name, or whose
//     metadata.namespace is present but not a string; a missing namespace
//     gives the bare name.
//   - SplitKey(MakeKey(ns, name)) gives back ns and name for any valid
//     Kubernetes names (they never contain '/').

#ifndef GAPTRAIN_OPERATOR_CONTROLLER_OBJECT_KEY_H_
#define GAPTRAIN_OPERATOR_CONTROLLER_OBJECT_KEY_H_

#include <nlohmann/json.hpp>
#include <string>

#include "services/base/status.h"

namespace gaptrain {
namespace controller {

// "ns/name", or "name" when ns is "".
std::string MakeKey(const std::string& ns, const std::string& name);

Status ObjectKey(const nlohmann::json& object, std::string* key);

// "ns/name" -> (ns, name); "name" -> ("", name). INVALID_ARGUMENT for "",
// an empty part, or more than one '/'.
Status SplitKey(const std::string& key, std::string* ns, std::string* name);

// metadata.namespace, metadata.name and metadata.resourceVersion, or ""
// when absent or not strings.
std::string ObjectNamespace(const nlohmann::json& object);
std::string ObjectName(const nlohmann::json& object);
std::string ObjectResourceVersion(const nlohmann::json& object);
// metadata.labels[key], or "" when absent or not a string; *present (when
// given) says whether the label is there.
std::string ObjectLabel(const nlohmann::json& object, const std::string& key,
                        bool* present = nullptr);

}  // namespace controller
}  // namespace gaptrain

#endif  // GAPTRAIN_OPERATOR_CONTROLLER_OBJECT_KEY_H_
