// FakeApiServer: an in-memory Kubernetes API server for tests, speaking
// kube-apiserver v1.26's wire format over HTTP/1.1 (plain, or HTTPS with a
// given certificate) on an ephemeral loopback port. Only tests may use it
// (Bazel testonly).
//
//   FakeApiServer::Options options;
//   options.bearer_token = "test-token";
//   options.custom_resource_definitions = {crd_yaml};
//   std::unique_ptr<FakeApiServer> server;
//   ASSERT_TRUE(FakeApiServer::Start(options, &server).ok());
//   // point the client at server->url() (or write server->Kubeconfig())
//
// What it serves, and how faithfully, is in README.md; in short: core/v1
// pods, services, secrets, configmaps, persistentvolumeclaims,
// serviceaccounts; events.k8s.io/v1 events; coordination.k8s.io/v1 leases;
// apiextensions.k8s.io/v1 customresourcedefinitions and the custom
// resources they define (with status and scale subresources); discovery.
//
// Connections: one thread each, keep-alive, any number at once (watches are
// long-lived). Request bodies above max_body_bytes get 413, malformed HTTP
// 400, malformed JSON a 400 Status. Stop() (and the destructor) closes the
// listening socket and every connection and ends every watch promptly.
//
// The C++ hooks below act on the store directly (no authentication, no
// fault injection, not in the request log) and are thread-safe.

#ifndef GAPTRAIN_OPERATOR_TESTING_FAKE_API_SERVER_H_
#define GAPTRAIN_OPERATOR_TESTING_FAKE_API_SERVER_H_

#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "operator/testing/api_handler.h"
#include "operator/testing/object_store.h"
#include "operator/testing/resource_registry.h"
#include "services/common/status.h"

namespace boost {
namespace asio {
namespace ssl {
class context;
}  // namespace ssl
}  // namespace asio
}  // namespace boost

namespace gaptrain {
namespace kube_testing {

class FakeApiServer {
 public:
  struct Options {
    std::string address = "127.0.0.1";
    uint16_t port = 0;  // 0: ephemeral
    // Requests must carry "Authorization: Bearer <token>" unless empty.
    std::string bearer_token;
    // CRD manifests (YAML or JSON) created before the server starts
    // serving, e.g. ../shared/k8s/example-crd-accepted.yaml.
    std::vector<std::string> custom_resource_definitions;
    size_t max_body_bytes = 3 * 1024 * 1024;  // kube-apiserver's limit
    size_t watch_history_size = 10000;        // events kept per resource
    std::chrono::milliseconds bookmark_interval{60000};
    // Watches without timeoutSeconds end after this.
    std::chrono::milliseconds default_watch_timeout{30 * 60 * 1000};
    // The garbage collector also deletes objects whose owners never existed.
    bool collect_dangling_dependents = true;
    uint32_t random_seed = 1;  // uids and generateName suffixes
    // HTTPS with this PEM certificate chain and key when both are set (the
    // kubeconfig then names the certificate as the CA: use a self-signed one).
    std::string tls_cert_file;
    std::string tls_key_file;
  };

  // Binds, installs the CRDs and starts serving. INVALID_ARGUMENT for a bad
  // address or CRD (the message holds the API's Status message),
  // UNAVAILABLE when the port cannot be bound.
  static Status Start(const Options& options, std::unique_ptr<FakeApiServer>* server);

  FakeApiServer(const FakeApiServer&) = delete;
  FakeApiServer& operator=(const FakeApiServer&) = delete;
  ~FakeApiServer();

  // Idempotent; see the file comment. The hooks keep working afterwards.
  void Stop();

  uint16_t port() const { return port_; }
  // "http://127.0.0.1:PORT" ("https://" with TLS).
  std::string url() const;
  // A kubeconfig for this server (cluster, user with the token, context
  // with `namespace_name`), as YAML.
  std::string Kubeconfig(const std::string& namespace_name = "default") const;

  // ---- Objects. `resource` names a resource type as kubectl does:
  // "pods", "trainingjobs.gaptrain.io", or an unambiguous plural or short
  // name ("trainingjobs", "tj"). `ns` is ignored for cluster-scoped types.

  Status Get(const std::string& resource, const std::string& ns, const std::string& name,
             nlohmann::json* object) const;
  // `label_selector` as in a list request ("" for all); `ns` "" for all.
  Status List(const std::string& resource, const std::string& ns,
              const std::string& label_selector, std::vector<nlohmann::json>* objects);
  // Creates `object` as a POST by field manager "fake-apiserver-test" would:
  // its apiVersion and kind pick the resource; defaults, validation and
  // status handling apply (a status on a kind with a status subresource is
  // dropped; set it with Update). *created may be null.
  Status Create(const nlohmann::json& object, nlohmann::json* created = nullptr);
  // Changes a stored object in place, as a controller or kubelet writing
  // directly to storage would: `mutate` may change anything (spec, status,
  // labels, finalizers, spec.nodeName) but the server-owned metadata (uid,
  // timestamps, resourceVersion). The kind's defaults are applied; the
  // store assigns the resourceVersion and generation, sends the watch
  // event, and removes an object whose deletion is complete (finalizers
  // emptied). No validation, and managedFields are left as they are.
  // *updated may be null.
  Status Update(const std::string& resource, const std::string& ns, const std::string& name,
                const std::function<void(nlohmann::json*)>& mutate,
                nlohmann::json* updated = nullptr);
  // A DELETE with these options (grace period, propagation policy
  // "Background", "Foreground", "Orphan" or "" for the default, and a uid
  // precondition: 409 Conflict when the object has another uid).
  Status Delete(const std::string& resource, const std::string& ns, const std::string& name,
                std::optional<int64_t> grace_period_seconds = std::nullopt,
                const std::string& propagation_policy = "",
                const std::string& precondition_uid = "");

  // The global resourceVersion: unchanged means nothing was written.
  uint64_t resource_version() const;
  // The store's clock as the API writes timestamps ("2026-11-23T06:32:57Z").
  std::string Now() const;

  // ---- Waiting. Each returns whether the condition held before `timeout`;
  // predicates run under the store's lock and must not call the server.
  bool WaitFor(const std::function<bool(const StoreView&)>& predicate,
               std::chrono::milliseconds timeout);
  // `predicate` gets the object, or null while it does not exist.
  bool WaitForObject(const std::string& resource, const std::string& ns, const std::string& name,
                     const std::function<bool(const nlohmann::json*)>& predicate,
                     std::chrono::milliseconds timeout);

  // A watch on the store, as an API watch would see it (for a test
  // "kubelet" that reacts to pods). `resource_version` "" or "0" starts
  // with ADDED events for what exists. The watch must not outlive the server.
  Status Watch(const std::string& resource, const std::string& ns,
               const std::string& label_selector, const std::string& field_selector,
               const std::string& resource_version, std::unique_ptr<ObjectStore::Watch>* watch);

  // ---- Requests served over HTTP.
  std::vector<RequestRecord> RequestLog() const;
  void ClearRequestLog();
  // Requests with `verb` ("" any) on `resource` (plural, "" any) and
  // `subresource` ("*" any, "" the main resource).
  size_t CountRequests(const std::string& verb, const std::string& resource,
                       const std::string& subresource = "*") const;
  // create, update, patch, delete and deletecollection requests.
  size_t CountWriteRequests() const;

  // ---- Faults.
  void InjectFault(const Fault& fault);
  void ClearFaults();
  // Ends every open watch stream cleanly (the terminating chunk), as a
  // server-side timeout does.
  void CloseAllWatches();
  // Resets every open connection (watches included) mid-stream.
  void DropAllConnections();
  // Forgets the watch history: a watch from an older resourceVersion then
  // gets 200 and a 410 Expired ERROR event, and must re-list.
  void ExpireWatchHistory();

 private:
  struct Connection;
  explicit FakeApiServer(const Options& options);

  Status Listen();
  void AcceptLoop();
  void Serve(const std::shared_ptr<Connection>& connection);
  // The request/response loop over a plain or TLS stream.
  template <class Stream>
  void ServeStream(Stream& stream);
  // Joins the threads of connections that have finished.
  void ReapConnections();
  ResourceTypePtr FindType(const std::string& resource, Status* error) const;

  const Options options_;
  std::unique_ptr<boost::asio::ssl::context> tls_;  // null: plain HTTP
  ResourceRegistry registry_;
  ObjectStore store_;
  ApiHandler handler_;

  uint16_t port_ = 0;
  int listen_fd_ = -1;
  std::thread accept_thread_;
  std::atomic<bool> stopping_{false};

  std::mutex stop_mu_;  // serialises Stop()
  std::mutex connections_mu_;
  std::map<uint64_t, std::shared_ptr<Connection>> connections_;
  uint64_t next_connection_ = 1;
};

// A kubeconfig (YAML) with one cluster at `server_url` (trusting the PEM
// `ca_file` when not empty), one user with `token` (none when empty) and one
// context using `namespace_name`.
std::string KubeconfigFor(const std::string& server_url, const std::string& token,
                          const std::string& namespace_name, const std::string& ca_file = "");

}  // namespace kube_testing
}  // namespace gaptrain

#endif  // GAPTRAIN_OPERATOR_TESTING_FAKE_API_SERVER_H_
