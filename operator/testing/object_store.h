// ObjectStore: the fake API server's storage and the parts of Kubernetes
// that act on stored objects by themselves. It owns:
//   - the objects, keyed by resource, namespace and name, with one global
//     resourceVersion counter (decimal strings) bumped by every write, uid,
//     creationTimestamp and metadata.generation (types that track it: +1
//     when anything outside metadata and status changes, and when deletion
//     starts);
//   - deletion as the real registry does it: graceful deletion of pods a
//     node runs (deletionTimestamp and deletionGracePeriodSeconds set, the
//     object stays until a DELETE with grace 0), finalizers (an object
//     with finalizers stays with a deletionTimestamp until an update empties
//     them), preconditions, and propagation: Background (dependents are
//     collected after the owner is gone), Foreground (the owner keeps the
//     foregroundDeletion finalizer until its blocking dependents are gone)
//     and Orphan (dependents lose their owner references);
//   - the garbage collector, run synchronously after every removal: a
//     dependent none of whose owners exist any more is deleted, one with
//     other owners loses the dangling reference. Objects created with owner
//     references to objects that do not exist are collected too, like the
//     real controller does (Options::collect_dangling_dependents);
//   - watch: per-resource event history of bounded size. A watch from a
//     resourceVersion older than the history gets a 410 Expired event; "" or
//     "0" starts with synthetic ADDED events for the current state. Label and
//     field selectors follow kube-apiserver: an object that starts matching
//     is sent as ADDED, one that stops matching as DELETED;
//   - lists with label/field selectors and limit/continue pagination over a
//     consistent snapshot (kept for the last 64 paginated lists);
//   - waiting for a condition over the store, for tests.
// Thread-safe: one mutex guards everything; callbacks passed in run under
// it and must not call back into the store.

#ifndef GAPTRAIN_OPERATOR_TESTING_OBJECT_STORE_H_
#define GAPTRAIN_OPERATOR_TESTING_OBJECT_STORE_H_

#include <nlohmann/json.hpp>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "operator/testing/api_error.h"
#include "operator/testing/resource_registry.h"
#include "operator/testing/resource_type.h"
#include "operator/testing/selectors.h"

namespace gaptrain {
namespace kube_testing {

// DeleteOptions, from the query string or the request body.
struct DeleteOptions {
  std::optional<int64_t> grace_period_seconds;
  std::string propagation_policy;  // "", Background, Foreground, Orphan
  std::optional<std::string> precondition_uid;
  std::optional<std::string> precondition_resource_version;
};

// One event of a watch stream: type is ADDED, MODIFIED, DELETED, BOOKMARK
// or ERROR; `object` is the object (a Status for ERROR).
struct WatchEvent {
  std::string type;
  nlohmann::json object;
  // The object as sent when it must keep a key order nlohmann::json would
  // sort away (the Status of an ERROR event); else empty.
  std::string encoded_object;

  // {"type":"...","object":{...}} on one line, without the newline.
  std::string Encode() const;
};

// Read access to the store from inside ObjectStore::WaitUntil's predicate.
class StoreView {
 public:
  virtual ~StoreView() = default;
  // Null when absent. `resource_key` is ResourceType::key() ("pods").
  virtual const nlohmann::json* Get(const std::string& resource_key, const std::string& ns,
                                    const std::string& name) const = 0;
  // Objects of a resource in `ns` ("" for all namespaces), in key order.
  virtual std::vector<const nlohmann::json*> List(const std::string& resource_key,
                                                  const std::string& ns) const = 0;
  virtual uint64_t resource_version() const = 0;
};

class ObjectStore {
 public:
  struct Options {
    size_t watch_history_size = 10000;  // events kept per resource
    bool collect_dangling_dependents = true;
    uint32_t random_seed = 1;  // uids and generateName suffixes
    // Wall clock for timestamps.
    std::function<std::chrono::system_clock::time_point()> clock = [] {
      return std::chrono::system_clock::now();
    };
  };

  struct WriteResult {
    nlohmann::json object;  // as stored; for a removal the last state
    bool created = false;
    bool removed = false;
    bool unchanged = false;  // a no-op write: nothing stored, no event
  };

  ObjectStore(const ResourceRegistry* registry, const Options& options);
  ObjectStore(const ObjectStore&) = delete;
  ObjectStore& operator=(const ObjectStore&) = delete;

  // Stores a new object. metadata.name may be empty when generateName is
  // set (a unique name is made up); metadata.namespace must be set for
  // namespaced types. The store fills uid, resourceVersion,
  // creationTimestamp and generation, and drops deletion fields.
  ApiError Create(const ResourceType& type, nlohmann::json object, WriteResult* out);

  // A read-modify-write under the store's lock. `mutate` gets the stored
  // object (null when absent; then the write is a create when
  // `create_if_absent`, else 404) and fills *next, or fails. The server
  // owned metadata of *next is reset from the stored object; a *next equal
  // to the stored object is a no-op. An update that leaves an object being
  // deleted without finalizers removes it.
  using Mutation = std::function<ApiError(const nlohmann::json* current, nlohmann::json* next)>;
  ApiError Update(const ResourceType& type, const std::string& ns, const std::string& name,
                  bool create_if_absent, const Mutation& mutate, WriteResult* out);

  // DELETE; see the file comment. out->object is the object as the delete
  // left it (before the garbage collector ran), out->removed whether the
  // delete removed it.
  ApiError Delete(const ResourceType& type, const std::string& ns, const std::string& name,
                  const DeleteOptions& options, WriteResult* out);

  ApiError Get(const ResourceType& type, const std::string& ns, const std::string& name,
               nlohmann::json* out) const;

  struct ListOptions {
    std::string ns;  // "" for all namespaces
    LabelSelector labels;
    FieldSelector fields;
    int64_t limit = 0;  // 0: everything
    std::string continue_token;
  };
  struct ListResult {
    std::vector<nlohmann::json> items;
    uint64_t resource_version = 0;
    std::string continue_token;  // "" on the last page
    std::optional<int64_t> remaining_item_count;
  };
  // Field selector fields must have been checked by the caller.
  ApiError List(const ResourceType& type, const ListOptions& options, ListResult* out);

  class Watch;
  // `resource_version` "" or "0": current state first; else events after
  // it (a 410 ERROR event when the history no longer has them; 504 when it
  // is in the future).
  ApiError StartWatch(const ResourceType& type, const std::string& ns, LabelSelector labels,
                      FieldSelector fields, const std::string& resource_version,
                      std::unique_ptr<Watch>* out);

  uint64_t resource_version() const;

  // Waits until `predicate` holds (checked now and after every write) or
  // `deadline` passes; returns the last result.
  bool WaitUntil(const std::function<bool(const StoreView&)>& predicate,
                 std::chrono::steady_clock::time_point deadline);

  // Forgets every watch history: later watches from an older
  // resourceVersion get 410.
  void ExpireWatchHistory();
  // Ends every open watch (their Next returns kClosed).
  void CloseAllWatches();
  // Ends every watch for good (later ones too); used by Stop().
  void Shutdown();
  // Wakes every waiting watch so that it rechecks its client.
  void WakeWatchers();

  // "2026-11-23T06:32:57Z" from the store's clock.
  std::string Now() const;

 private:
  friend class Watch;
  struct StoredEvent {
    std::string type;
    uint64_t resource_version;
    nlohmann::json object;
    nlohmann::json previous;  // null for ADDED
  };
  struct History {
    std::deque<StoredEvent> events;
    uint64_t oldest_servable = 0;  // watches from this resourceVersion on work
  };
  struct Snapshot {
    std::string resource_key;
    uint64_t resource_version;
    std::vector<nlohmann::json> items;  // what the remaining pages hold
    bool selected = false;
  };
  class View;

  using ObjectMap = std::map<std::string, nlohmann::json>;  // "ns/name" -> object

  static std::string ObjectKey(const std::string& ns, const std::string& name) {
    return ns + "/" + name;
  }
  ObjectMap& ObjectsOf(const std::string& resource_key) { return objects_[resource_key]; }

  // Writes `object` (new or changed) with a new resourceVersion and
  // records the event. Handles removal of objects whose deletion is
  // complete. Requires mu_.
  void CommitLocked(const ResourceType& type, const nlohmann::json* previous,
                    nlohmann::json object, WriteResult* out);
  void RemoveLocked(const ResourceType& type, nlohmann::json object, WriteResult* out);
  void RecordEventLocked(const std::string& resource_key, const std::string& type,
                         const nlohmann::json& object, const nlohmann::json& previous);
  ApiError CreateLocked(const ResourceType& type, nlohmann::json object, WriteResult* out);
  ApiError DeleteLocked(const ResourceType& type, const std::string& ns, const std::string& name,
                        const DeleteOptions& options, WriteResult* out);
  // The garbage collector's reaction to the removal of `owner`.
  void CollectDependentsLocked(const nlohmann::json& owner, bool foreground);
  // Whether an owner reference resolves to a live object with that uid.
  bool OwnerExistsLocked(const std::string& ns, const nlohmann::json& reference) const;
  void CollectIfOrphanedLocked(const ResourceType& type, const nlohmann::json& object);
  // Drops the foregroundDeletion finalizer of the owners of `removed` whose
  // blocking dependents are gone.
  void ReleaseForegroundOwnersLocked(const nlohmann::json& removed);
  void FinishForegroundDeletionLocked(const std::string& owner_uid);
  // Finds an object by uid; false when none.
  bool FindByUidLocked(const std::string& uid, ResourceTypePtr* type, nlohmann::json** object);
  // Calls `visit` for every stored object of a served type.
  void ForEachObjectLocked(
      const std::function<void(const ResourceTypePtr&, const nlohmann::json&)>& visit);
  std::string NewUidLocked();
  std::string RandomSuffixLocked();
  std::string TimestampLocked(int64_t offset_seconds) const;

  const ResourceRegistry* const registry_;
  const Options options_;

  mutable std::mutex mu_;
  std::condition_variable changed_;
  uint64_t resource_version_ = 0;
  std::map<std::string, ObjectMap> objects_;
  std::map<std::string, History> histories_;
  std::map<uint64_t, Snapshot> snapshots_;
  uint64_t next_snapshot_ = 1;
  uint64_t history_floor_ = 0;  // set by ExpireWatchHistory
  uint64_t watch_epoch_ = 0;
  bool shut_down_ = false;
  std::mt19937_64 random_;
};

// A watch stream over the store; see ObjectStore::StartWatch.
class ObjectStore::Watch {
 public:
  enum class Result { kEvent, kTimeout, kClosed };

  // The next event for this watch, waiting until `deadline`. After an
  // ERROR event every call returns kClosed.
  Result Next(std::chrono::steady_clock::time_point deadline, WatchEvent* event);
  // A BOOKMARK at the store's current resourceVersion when the watch has
  // delivered every earlier event; false otherwise.
  bool Bookmark(WatchEvent* event);

 private:
  friend class ObjectStore;
  Watch(ObjectStore* store, ResourceTypePtr type, std::string ns, LabelSelector labels,
        FieldSelector fields, uint64_t cursor, uint64_t epoch)
      : store_(store), type_(std::move(type)), ns_(std::move(ns)), labels_(std::move(labels)),
        fields_(std::move(fields)), cursor_(cursor), epoch_(epoch) {}
  bool Matches(const nlohmann::json& object) const;
  // The event to send for a stored event; false to skip it. Requires mu_.
  bool Translate(const StoredEvent& stored, WatchEvent* event) const;

  ObjectStore* store_;
  ResourceTypePtr type_;
  std::string ns_;
  LabelSelector labels_;
  FieldSelector fields_;
  uint64_t cursor_;
  uint64_t epoch_;
  std::deque<WatchEvent> initial_;
  bool failed_ = false;
};

}  // namespace kube_testing
}  // namespace gaptrain

#endif  // GAPTRAIN_OPERATOR_TESTING_OBJECT_STORE_H_
