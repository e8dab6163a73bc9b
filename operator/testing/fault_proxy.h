// FaultProxy: stands between a client under test and a real kube-apiserver
// (operator/envtest), passing every request through unchanged, except for
// the faults a real server cannot be made to produce on demand: an error
// answer (a 5xx, a 429), a connection reset mid-stream, a watch the server
// ends, a watch whose resourceVersion has expired. It also keeps a log of
// the requests it saw. Everything else the client meets is the real
// server's behaviour. Tests only.
//
//   FaultProxy::Options options;
//   options.upstream_url = cluster->url();       // https://127.0.0.1:PORT
//   options.upstream_ca_pem = cluster->ca_pem();
//   std::unique_ptr<FaultProxy> proxy;
//   ASSERT_TRUE(FaultProxy::Start(options, &proxy).ok());
//   // The client talks plain HTTP to the proxy, with the same token:
//   config.server = proxy->url();                // http://127.0.0.1:PORT
//   proxy->InjectFault({"GET", "/api/v1/namespaces/default/pods*", 2, 503});
//
// What callers may rely on:
//   - The proxy listens on 127.0.0.1 (plain HTTP/1.1, keep-alive) and opens
//     one TLS connection to the upstream per client connection, verifying
//     the upstream's certificate against upstream_ca_pem. Requests and
//     responses pass byte for byte in meaning: method, target, headers
//     (Authorization included; Host rewritten), bodies; a streamed
//     response (a watch) is relayed as it arrives, chunk by chunk.
//   - A request matching an injected fault is answered by the proxy, not
//     sent upstream: HTTP `code` with a metav1.Status JSON body whose
//     message is the fault's (reason: InternalError for 500,
//     ServiceUnavailable for 503, TooManyRequests for 429 with a
//     Retry-After: 1 header, else "InternalError"), and counts down the
//     fault. Faults are matched in the order injected.
//   - ExpireNextWatches(n): the next n watch requests (?watch=1 or
//     ?watch=true) are answered by the proxy with 200 and one ERROR event
//     carrying a 410 Expired Status, then the end of the stream, byte for
//     byte as kube-apiserver sends it (../shared/k8s/recorded/
//     watch-too-old.http), as happens when the resourceVersion is older
//     than the server's watch window.
//   - CloseAllWatches(): every watch relayed now ends cleanly (the
//     terminating chunk), as when the server's timeoutSeconds ran out.
//     DropAllConnections(): every client connection now open is reset
//     (watches included) without a response's end.
//   - RequestLog() lists each request the proxy received, in order, with
//     the status it was answered (200 for a watch that started; 0 when the
//     connection broke before an answer).
//   - Stop() (and the destructor) closes every connection and joins every
//     thread. Thread-safe.

#ifndef GAPTRAIN_OPERATOR_TESTING_FAULT_PROXY_H_
#define GAPTRAIN_OPERATOR_TESTING_FAULT_PROXY_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "services/base/status.h"

namespace gaptrain {
namespace kube_testing {

// Makes the next `count` requests that match fail with `code`.
struct ProxyFault {
  std::string method;  // "" for any
  // Matches the request path (without the query): exactly, or as a prefix
  // when it ends with '*' ("/api/v1/namespaces/default/pods*").
  std::string path;
  int count = 1;
  int code = 500;
  std::string message = "injected fault";
};

struct ProxiedRequest {
  std::string method;  // "GET"
  std::string path;    // "/api/v1/namespaces/default/pods"
  std::string query;   // "labelSelector=a%3Db", undecoded
  bool watch = false;  // ?watch=1 or ?watch=true
  int code = 0;        // the answer's status; 0 when none was sent
  bool injected = false;  // answered by the proxy (a fault), not upstream
};

class FaultProxy {
 public:
  struct Options {
    std::string upstream_url;     // "https://127.0.0.1:PORT"
    std::string upstream_ca_pem;  // trusted for the upstream's certificate
  };

  static Status Start(const Options& options, std::unique_ptr<FaultProxy>* proxy);
  ~FaultProxy();
  FaultProxy(const FaultProxy&) = delete;
  FaultProxy& operator=(const FaultProxy&) = delete;

  void Stop();

  // "http://127.0.0.1:PORT".
  std::string url() const;

  void InjectFault(const ProxyFault& fault);
  void ClearFaults();
  void ExpireNextWatches(int count);
  void CloseAllWatches();
  void DropAllConnections();

  std::vector<ProxiedRequest> RequestLog() const;
  void ClearRequestLog();

 private:
  struct State;
  explicit FaultProxy(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace kube_testing
}  // namespace gaptrain

#endif  // GAPTRAIN_OPERATOR_TESTING_FAULT_PROXY_H_
