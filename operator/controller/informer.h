// Informer: a local, always-current copy of one kind of API object in one
// namespace (optionally only those matching a label selector), as
// client-go's shared informer keeps: a Reflector lists and watches on the
// informer's own thread into a cache keyed "namespace/name" (object_key.h),
// and registered handlers hear of every change. Reconcilers read the cache
// instead of the API server; handlers turn changes into work-queue keys.
//
// What callers may rely on:
//   - Handlers are registered before Start() and called on the informer's
//     thread, one event at a time, in the server's order, after the cache
//     holds the change (so a key enqueued by a handler is never reconciled
//     against an older cache), and without any informer lock held (they may
//     call Get/List). They must not block: they enqueue and return.
//   - A watch event calls on_add, on_update (old, new) or on_delete. A
//     (re-)list, e.g. after a 410 or a broken watch, is compared with the
//     cache, as client-go's DeltaFIFO does: on_add for new keys, on_update
//     for keys whose resourceVersion changed, and on_delete with
//     final_state_unknown=true (a tombstone carrying the last cached state)
//     for keys that vanished while the watch was down.
//   - HasSynced() is true once the first list is in the cache and its
//     handlers have run; it never goes back to false.
//   - Get/List return copies of the cached objects (as the server sent them;
//     a namespaced object without metadata.namespace gets the informer's).
//     List results are sorted by key. ListByLabel uses an index for the
//     label keys named in Options::index_labels (a job's children are found
//     without a scan) and scans for any other key.
//   - Objects that have no key (object_key.h) are skipped and counted in
//     stats().skipped.
//   - Options::reflector.transform, when set, edits each object as it is
//     listed or watched, before it is cached or handed to handlers
//     (client-go's SetTransform): a cache that keeps only the fields its
//     readers use. Get/List and the handlers see transformed objects only.
//   - Stop() is prompt (the list or watch in flight is cancelled) and
//     idempotent; the destructor calls it. Thread-safe otherwise.
//   - `ns` kube::kAllNamespaces watches every namespace (one list and one
//     watch of /api/v1/pods, as an operator installed cluster-wide does);
//     objects then need their metadata.namespace (others are skipped).

#ifndef GAPTRAIN_OPERATOR_CONTROLLER_INFORMER_H_
#define GAPTRAIN_OPERATOR_CONTROLLER_INFORMER_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "operator/kube/client.h"
#include "operator/kube/reflector.h"
#include "operator/kube/resource.h"
#include "services/base/status.h"

namespace gaptrain {
namespace controller {

// What an informer calls on each change. Any of them may be empty.
struct EventHandlers {
  std::function<void(const nlohmann::json& object)> on_add;
  std::function<void(const nlohmann::json& old_object, const nlohmann::json& new_object)> on_update;
  // final_state_unknown: the object was found missing at a re-list, so
  // `object` is the last state the cache had, not the deleted object.
  std::function<void(const nlohmann::json& object, bool final_state_unknown)> on_delete;
  // Once, after the first list's on_add calls (when HasSynced() turns true).
  std::function<void()> on_synced;
};

class Informer {
 public:
  struct Options {
    // Selectors (label_selector "gaptrain.io/job-name" selects the objects
    // that have the label), watch timeouts, the retry backoff and the
    // transform of each object.
    kube::Reflector::Options reflector;
    // Label keys to index for ListByLabel, e.g. {"gaptrain.io/job-name"}.
    std::vector<std::string> index_labels;
  };

  struct Stats {
    kube::Reflector::Stats reflector;
    size_t objects = 0;    // in the cache now
    uint64_t skipped = 0;  // objects without a key
    Status last_skipped;   // why the latest one was skipped
  };

  // `client` must outlive the Informer. `ns` "" is the client's default
  // namespace, kube::kAllNamespaces every namespace (ignored for
  // cluster-scoped resources).
  Informer(kube::Client* client, const kube::Resource& resource, std::string ns, Options options);
  ~Informer();

  Informer(const Informer&) = delete;
  Informer& operator=(const Informer&) = delete;

  // FAILED_PRECONDITION once Start() was called.
  Status AddEventHandlers(EventHandlers handlers);

  // Starts listing and watching on the informer's thread. Once;
  // FAILED_PRECONDITION after a Start() or Stop().
  Status Start();
  void Stop();

  bool HasSynced() const;
  // Waits (real time) until HasSynced(); false after `timeout` or once the
  // informer is stopped.
  bool WaitForSync(std::chrono::milliseconds timeout) const;

  // True with *object set when the cache holds it.
  bool Get(const std::string& ns, const std::string& name, nlohmann::json* object) const;
  bool GetByKey(const std::string& key, nlohmann::json* object) const;
  // Objects in namespace `ns` ("" means every namespace in the cache).
  std::vector<nlohmann::json> List(const std::string& ns) const;
  // Objects in `ns` ("" every) whose label `key` has `value`.
  std::vector<nlohmann::json> ListByLabel(const std::string& ns, const std::string& key,
                                          const std::string& value) const;
  std::vector<std::string> ListKeys() const;
  // Calls `visit` with each cached object in `ns` ("" every), in key
  // order, without copying them: under the informer's lock, so `visit`
  // must be quick and must not call this informer.
  void Visit(const std::string& ns,
             const std::function<void(const nlohmann::json& object)>& visit) const;

  const kube::Resource& resource() const { return resource_; }
  // The namespace watched ("" for cluster-scoped resources,
  // kube::kAllNamespaces for every namespace).
  const std::string& watched_namespace() const { return ns_; }
  Stats stats() const;

 private:
  using ObjectPtr = std::shared_ptr<const nlohmann::json>;
  // One handler call to make once the cache is updated.
  struct Notification {
    enum class Type { kAdd, kUpdate, kDelete } type;
    ObjectPtr old_object;  // kUpdate
    ObjectPtr object;
    bool final_state_unknown = false;  // kDelete
  };
  // (namespace, label value) -> keys.
  using LabelIndex = std::map<std::pair<std::string, std::string>, std::set<std::string>>;

  // Feeds the cache from the Reflector.
  class Feed : public kube::ReflectorHandler {
   public:
    explicit Feed(Informer* informer) : informer_(informer) {}
    void OnReplace(std::vector<nlohmann::json> items, const std::string& rv) override;
    void OnAdd(const nlohmann::json& object) override { informer_->Upsert(object); }
    void OnUpdate(const nlohmann::json& object) override { informer_->Upsert(object); }
    void OnDelete(const nlohmann::json& object) override { informer_->Remove(object); }

   private:
    Informer* const informer_;
  };

  void Replace(std::vector<nlohmann::json> items);
  void Upsert(const nlohmann::json& object);
  void Remove(const nlohmann::json& object);
  // The object as cached (namespace filled in) and its key; false (counted)
  // when it has none.
  bool Prepare(nlohmann::json object, std::string* key, ObjectPtr* prepared);
  void IndexLocked(const std::string& key, const nlohmann::json& object, bool add);
  void Notify(const std::vector<Notification>& notifications);
  std::vector<nlohmann::json> CopiesLocked(const std::set<std::string>& keys) const;

  kube::Client* const client_;
  const kube::Resource resource_;
  const std::string ns_;
  const Options options_;
  Feed feed_;
  kube::Reflector reflector_;
  std::thread thread_;

  mutable std::mutex mu_;
  mutable std::condition_variable synced_changed_;
  bool started_ = false;
  bool stopped_ = false;
  bool synced_ = false;
  std::vector<EventHandlers> handlers_;  // fixed once started
  std::map<std::string, ObjectPtr> objects_;
  std::map<std::string, LabelIndex> indexes_;  // label key -> index
  uint64_t skipped_ = 0;
  Status last_skipped_;
};

}  // namespace controller
}  // namespace gaptrain

#endif  // GAPTRAIN_OPERATOR_CONTROLLER_INFORMER_H_
