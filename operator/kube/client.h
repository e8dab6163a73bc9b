// Client: typed calls to the Kubernetes API: get, list (every page),
// create, update, delete, JSON merge patch, server-side apply and watch, on
// any Resource (including the status and scale subresources). Objects are
// nlohmann::json exactly as the API server sends them.
//
// What callers may rely on:
//   - Thread-safe; calls are synchronous and each ends by
//     ClientOptions::request_timeout (watches: see WatchStream).
//   - `ns` "" means the config's default namespace; it is ignored for
//     cluster-scoped resources. List and Watch take kAllNamespaces
//     (resource.h) for every namespace at once (an operator installed
//     cluster-wide); the other calls refuse it (INVALID_ARGUMENT). Names and namespaces with characters that
//     cannot be in a Kubernetes name ('/', '?', '%', spaces, ...) are refused
//     with INVALID_ARGUMENT before anything is sent.
//   - Errors are described in api_error.h: the message names the call, the
//     resource and namespace/name, the HTTP code and the server's reason and
//     message; the code makes IsNotFound/IsConflict/IsAlreadyExists/IsGone/
//     IsInvalid/IsRetryable work; an ApiError* receives the details. A 2xx
//     response that is not a JSON object is DATA_LOSS.
//   - `out` parameters may be null when the caller does not need the result.
//   - Calls a Resource does not allow (see AllowedOn in resource.h) are
//     refused with INVALID_ARGUMENT.
//   - What the API server warns of is kept (Warnings()) and handed to
//     ClientOptions::on_warning, once per distinct text.
//   - Shutdown() cancels every call in flight and refuses new ones
//     (CANCELLED). Destroy the Client only after every call has returned.

#ifndef GAPTRAIN_OPERATOR_KUBE_CLIENT_H_
#define GAPTRAIN_OPERATOR_KUBE_CLIENT_H_

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "operator/kube/api_error.h"
#include "operator/kube/cancellation.h"
#include "operator/kube/cluster_config.h"
#include "operator/kube/resource.h"
#include "operator/kube/transport.h"
#include "operator/kube/watch_decoder.h"
#include "services/base/status.h"

namespace gaptrain {
namespace kube {

struct ClientOptions {
  // Server-side apply's fieldManager.
  std::string field_manager = "gaptrain-operator";
  // Bounds every call except a watch's events.
  std::chrono::milliseconds request_timeout{30000};
  std::string user_agent = "gaptrain-operator";
  size_t max_idle_connections = 8;
  size_t max_response_bytes = size_t{128} << 20;
  // Called with each warning the API server sends (a Warning header: a
  // deprecated API or field, a value it ignores), and the call it came
  // with ("create pods default/x"), once per distinct text, as client-go's
  // deduplicating warning handler; from the calling thread.
  std::function<void(const std::string& what, const std::string& warning)> on_warning;
};

struct ListOptions {
  std::string label_selector;  // "gaptrain.io/job-name=mnist"
  std::string field_selector;  // "status.phase=Running"
  int64_t page_size = 500;     // the "limit" of each page; 0 asks for everything at once
  Cancellation* cancel = nullptr;
  // When set, edits each item as its page arrives (after apiVersion and
  // kind are filled in), so a long list never holds more than one page of
  // whole objects (an informer's transform: reflector.h). Must not throw.
  std::function<void(nlohmann::json* item)> transform;
};

struct ObjectList {
  // Items of a list response carry no apiVersion/kind; the Client fills
  // them in from the Resource so that they look like watched objects.
  std::vector<nlohmann::json> items;
  std::string resource_version;  // where a watch of this list continues
};

struct DeleteOptions {
  std::string propagation_policy;  // "", "Foreground", "Background" or "Orphan"
  std::optional<int64_t> grace_period_seconds;
  // Preconditions: the delete fails with 409 Conflict when they do not hold.
  std::string precondition_uid;
  std::string precondition_resource_version;
};

struct WatchOptions {
  std::string resource_version;  // "" starts from the newest state, with ADDED for every object
  std::string label_selector;
  std::string field_selector;
  int timeout_seconds = 300;  // the server ends the watch (normally) after this
  bool allow_bookmarks = true;
  // A watch that receives no byte for this long is closed (DEADLINE_EXCEEDED).
  std::chrono::milliseconds idle_timeout{330000};
  Cancellation* cancel = nullptr;
};

// The events of one watch, read as they arrive. Used by one thread;
// Cancel() from any.
class WatchStream {
 public:
  // Blocks for the next event: true with *event set. False when the watch
  // is over; status() then says why: OK when the server ended it (its
  // timeoutSeconds), DEADLINE_EXCEEDED after idle_timeout without a byte,
  // CANCELLED, UNAVAILABLE when the connection broke or the response was
  // cut short, DATA_LOSS for bytes that are not a watch stream. ERROR
  // events are delivered as events (see WatchErrorStatus).
  bool Next(WatchEvent* event);
  const Status& status() const { return status_; }
  void Cancel() { stream_->Cancel(); }

 private:
  friend class Client;
  WatchStream() = default;

  std::string what_;  // "watch trainingjobs default"
  std::chrono::milliseconds idle_timeout_{0};
  std::unique_ptr<ResponseStream> stream_;
  WatchDecoder decoder_;
  std::deque<WatchEvent> pending_;
  bool ended_ = false;
  Status status_;
};

class Client {
 public:
  static Status New(const ClusterConfig& config, const ClientOptions& options,
                    std::unique_ptr<Client>* client);

  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  const std::string& default_namespace() const { return default_namespace_; }
  const ClientOptions& options() const { return options_; }

  Status Get(const Resource& resource, const std::string& ns, const std::string& name,
             nlohmann::json* out, ApiError* error = nullptr);

  // Follows "continue" to the last page. If the continue token expires
  // (410) part-way, lists again once without paging, as client-go does.
  Status List(const Resource& resource, const std::string& ns, const ListOptions& options,
              ObjectList* out, ApiError* error = nullptr);

  // POST; the name comes from object.metadata.name (or generateName).
  Status Create(const Resource& resource, const std::string& ns, const nlohmann::json& object,
                nlohmann::json* out, ApiError* error = nullptr);

  // PUT of the whole object, named by object.metadata.name. With
  // metadata.resourceVersion set, a concurrent change makes it fail with
  // 409 Conflict (IsConflict). Also PUT of a Scale to Subresource("scale").
  Status Update(const Resource& resource, const std::string& ns, const nlohmann::json& object,
                nlohmann::json* out, ApiError* error = nullptr);

  // PATCH with Content-Type application/merge-patch+json (RFC 7386).
  Status MergePatch(const Resource& resource, const std::string& ns, const std::string& name,
                    const nlohmann::json& patch, nlohmann::json* out, ApiError* error = nullptr);

  // Server-side apply: PATCH with Content-Type application/apply-patch+yaml
  // (the body is JSON, which is YAML) and ?fieldManager=<field_manager>&force=true,
  // named by object.metadata.name. apiVersion and kind are filled in from
  // the Resource when missing. Creates the object if it does not exist.
  Status Apply(const Resource& resource, const std::string& ns, const nlohmann::json& object,
               nlohmann::json* out, ApiError* error = nullptr);

  // DELETE, with a DeleteOptions body when `options` sets anything. *out
  // is the deleted object, or the
  // object with deletionTimestamp set while finalizers run, or a Status.
  Status Delete(const Resource& resource, const std::string& ns, const std::string& name,
                const DeleteOptions& options, nlohmann::json* out = nullptr,
                ApiError* error = nullptr);

  // Starts a watch; returns once the server answered 200 (then read events
  // from *stream) or with the error it answered (e.g. IsGone for 410).
  Status Watch(const Resource& resource, const std::string& ns, const WatchOptions& options,
               std::unique_ptr<WatchStream>* stream, ApiError* error = nullptr);

  // Discovery: GET /apis/GROUP, the APIGroup the server serves under that
  // name (its versions). NOT_FOUND (IsNotFound) when it serves no such
  // group; INVALID_ARGUMENT for a name that cannot be a group.
  Status GetApiGroup(const std::string& group, nlohmann::json* out, ApiError* error = nullptr);

  // Every distinct warning the API server has sent this client, in the
  // order first seen.
  std::vector<std::string> Warnings() const;

  void Shutdown() { transport_->Shutdown(); }

 private:
  Client(std::unique_ptr<Transport> transport, const ClientOptions& options,
         std::string default_namespace);

  // Checks the call and its names, and sets *what ("create pods default/x")
  // and *ns_used.
  Status Prepare(Call call, const Resource& resource, const std::string& ns,
                 const std::string& name, std::string* what, std::string* ns_used) const;
  // Sends `http` and decodes a 2xx JSON object into *out.
  Status Send(const std::string& what, const HttpCall& http, Cancellation* cancel,
              nlohmann::json* out, ApiError* error);
  Status ListOnce(const Resource& resource, const std::string& ns, const std::string& what,
                  const ListOptions& options, int64_t page_size, ObjectList* out,
                  ApiError* error);
  Clock::time_point Deadline() const { return Clock::now() + options_.request_timeout; }

  std::unique_ptr<Transport> transport_;
  const ClientOptions options_;
  const std::string default_namespace_;
  mutable std::mutex warnings_mu_;
  std::vector<std::string> warnings_;  // guarded by warnings_mu_
};

// "a=1&b=x%2Fy": keys sorted, keys and values percent-encoded except for
// RFC 3986's unreserved characters (A-Z a-z 0-9 - _ . ~).
std::string EncodeQuery(const std::map<std::string, std::string>& params);

}  // namespace kube
}  // namespace gaptrain

#endif  // GAPTRAIN_OPERATOR_KUBE_CLIENT_H_
