// Reflector: keeps a handler in step with one resource on the API server,
// as client-go's reflector does: list every page, hand over the full set,
// then watch from the list's resourceVersion and hand over each change.
//
// What callers may rely on:
//   - The handler is called from the thread running Run(), one call at a
//     time, in the server's order: OnReplace after every (re-)list with the
//     complete set and its resourceVersion, then OnAdd/OnUpdate/OnDelete.
//     BOOKMARK events move the resourceVersion without a call.
//   - A watch the server ends normally, or one idle for longer than
//     idle_timeout, is resumed from the newest resourceVersion seen
//     (BOOKMARKs included) without a delay. A 410 (an ERROR event or the
//     watch request answered 410) re-lists at once. Any other failure
//     (connection refused or cut, HTTP errors, malformed streams, a watch
//     that ends within a second without events) waits for the next Backoff
//     delay, then resumes the watch (or retries the list). Backoff resets
//     after a successful list or a delivered event.
//   - Stop() (any thread, idempotent) makes Run() return promptly: the
//     list or watch in flight and the backoff wait are cancelled.

#ifndef GAPTRAIN_OPERATOR_KUBE_REFLECTOR_H_
#define GAPTRAIN_OPERATOR_KUBE_REFLECTOR_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "operator/kube/cancellation.h"
#include "operator/kube/client.h"
#include "operator/kube/resource.h"
#include "services/base/backoff.h"
#include "services/base/status.h"

namespace gaptrain {
namespace kube {

// What a Reflector feeds (an informer's cache). Calls must not block long
// and must not call Reflector::Run.
class ReflectorHandler {
 public:
  virtual ~ReflectorHandler() = default;
  // Everything there is, as of `resource_version`; forget anything else.
  virtual void OnReplace(std::vector<nlohmann::json> items, const std::string& resource_version) = 0;
  virtual void OnAdd(const nlohmann::json& object) = 0;
  virtual void OnUpdate(const nlohmann::json& object) = 0;
  virtual void OnDelete(const nlohmann::json& object) = 0;
};

class Reflector {
 public:
  struct Options {
    std::string label_selector;
    std::string field_selector;
    int64_t page_size = 500;
    int watch_timeout_seconds = 300;
    std::chrono::milliseconds idle_timeout{330000};
    // client-go's reflector backs off from 800 ms to 30 s. Must pass
    // Backoff::Validate.
    Backoff::Options backoff{std::chrono::milliseconds(800), std::chrono::milliseconds(30000),
                             2.0, 0.5};
    uint64_t backoff_seed = 1;  // tests fix it to see the same delays
    // When set, edits every listed item (as its page arrives) and every
    // watched object before the handler sees it, e.g. drops the fields no
    // reader uses (client-go's SetTransform). Must not throw, and must keep
    // metadata.name, namespace and resourceVersion.
    std::function<void(nlohmann::json* object)> transform;
  };

  struct Stats {
    uint64_t lists = 0;         // successful lists (OnReplace calls)
    uint64_t watches = 0;       // watches the server accepted
    uint64_t events = 0;        // ADDED/MODIFIED/DELETED/BOOKMARK received
    uint64_t expired = 0;       // 410s that forced a re-list
    uint64_t idle_timeouts = 0;
    uint64_t failures = 0;      // failures followed by a backoff wait
    std::chrono::milliseconds last_backoff{0};
    Status last_error;          // the most recent failure
  };

  // `client` and `handler` must outlive the Reflector. `ns` "" is the
  // client's default namespace, kAllNamespaces every namespace.
  Reflector(Client* client, const Resource& resource, std::string ns, const Options& options,
            ReflectorHandler* handler);

  // Lists and watches until Stop(). Call once, on a thread of the caller's.
  void Run();
  void Stop();

  // The newest resourceVersion seen ("" before the first list).
  std::string resource_version() const;
  // True once the first list was delivered.
  bool has_synced() const;
  Stats stats() const;

 private:
  enum class WatchEnd { kResume, kRelist, kFailed };

  // One list; false on failure (recorded).
  bool ListAll();
  // One watch from resource_version_, delivered to the handler.
  WatchEnd WatchOnce();
  void Failed(const Status& status);
  // Waits for the next backoff delay or Stop().
  void WaitBackoff();
  void SetResourceVersion(const std::string& rv);

  Client* const client_;
  const Resource resource_;
  const std::string ns_;
  const Options options_;
  ReflectorHandler* const handler_;
  Backoff backoff_;
  Cancellation stop_;

  mutable std::mutex mu_;
  std::condition_variable stopped_;
  std::string resource_version_;
  bool synced_ = false;
  Stats stats_;
};

}  // namespace kube
}  // namespace gaptrain

#endif  // GAPTRAIN_OPERATOR_KUBE_REFLECTOR_H_
