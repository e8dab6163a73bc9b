// Enqueueing: which work-queue keys a change to an object should trigger,
// as controller-runtime's handler.EnqueueRequestForObject and
// EnqueueRequestForOwner decide. A controller watches its own kind with
// OwnKey() and its children with OwnerKey(...), so a change to a pod
// reconciles the TrainingJob that owns it.
//
// What callers may rely on:
//   - A KeyMapper never throws and returns no key for objects it cannot
//     map (no metadata.name, no owner).
//   - EnqueueHandlers(queue, mapper) adds the keys of the added object, of
//     both the old and new object on an update (an ownership change
//     reconciles both owners), and of the deleted object (for a tombstone,
//     its last known state).
//   - An UpdateFilter, when given, drops the updates it returns false for
//     (controller-runtime's predicates: a controller that writes its own
//     object's status need not be woken by that write). Adds and deletes
//     always enqueue.

#ifndef GAPTRAIN_OPERATOR_CONTROLLER_ENQUEUE_H_
#define GAPTRAIN_OPERATOR_CONTROLLER_ENQUEUE_H_

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "operator/controller/informer.h"
#include "operator/controller/work_queue.h"

namespace gaptrain {
namespace controller {

using KeyMapper = std::function<std::vector<std::string>(const nlohmann::json& object)>;

// The object's own key, "namespace/name".
KeyMapper OwnKey();

struct OwnerMatch {
  std::string group;  // "gaptrain.io" (the ownerReference's apiVersion, any version)
  std::string kind;   // "TrainingJob"
  // When set, an object without such a controller ownerReference is mapped
  // by this label's value instead ("gaptrain.io/job-name").
  std::string label;
};

// The key of the owner in the object's namespace: from the ownerReference
// with controller: true whose group and kind match, else from the label.
KeyMapper OwnerKey(OwnerMatch match);

// Whether an update from `old_object` to `new_object` should enqueue.
using UpdateFilter =
    std::function<bool(const nlohmann::json& old_object, const nlohmann::json& new_object)>;

EventHandlers EnqueueHandlers(WorkQueue* queue, KeyMapper mapper, UpdateFilter filter = nullptr);

// An UpdateFilter: whether the objects differ in anything besides the
// server's bookkeeping (metadata.resourceVersion and managedFields). With
// an Informer whose transform keeps only what the reconcile reads, an
// update that changes nothing it reads enqueues nothing. Objects that are
// not JSON objects count as changed when unequal.
bool ContentChanged(const nlohmann::json& old_object, const nlohmann::json& new_object);

}  // namespace controller
}  // namespace gaptrain

#endif  // GAPTRAIN_OPERATOR_CONTROLLER_ENQUEUE_H_
