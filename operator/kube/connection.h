// Connection: one HTTP/1.1 connection to the API server, over TLS or plain
// TCP, moved as bytes; the Transport frames requests and responses on it.
//
// What callers may rely on:
//   - TLS verifies the server's chain against the configured CAs (or the
//     system's) and its name against the URL's host (or tls_server_name):
//     a DNS name or an IP address in subjectAltName. SNI is sent for DNS
//     names. TLS 1.2 or newer. insecure_skip_tls_verify skips both checks.
//   - Every operation ends by its deadline: DEADLINE_EXCEEDED naming what
//     was waited for; the connection is then closed.
//   - Cancel() may be called from any thread: the operation in progress,
//     and every later one, fails with CANCELLED.
//   - Otherwise one thread at a time.

#ifndef GAPTRAIN_OPERATOR_KUBE_CONNECTION_H_
#define GAPTRAIN_OPERATOR_KUBE_CONNECTION_H_

#include <atomic>
#include <chrono>
#include <memory>
#include <string>

#include "operator/kube/cluster_config.h"
#include "services/base/status.h"

namespace gaptrain {
namespace kube {

using Clock = std::chrono::steady_clock;

// The server's address and the TLS settings its connections share.
class Endpoint;

// Builds the Endpoint for `config`: parses the URL, loads CAs and the client
// certificate. Errors name config.source and the item.
Status NewEndpoint(const ClusterConfig& config, std::shared_ptr<const Endpoint>* endpoint);

// "host:port" of the endpoint (bracketed IPv6), for messages and Host.
std::string EndpointHostPort(const Endpoint& endpoint);
// The URL's path prefix ("" or "/prefix").
const std::string& EndpointBasePath(const Endpoint& endpoint);

class Connection {
 public:
  explicit Connection(std::shared_ptr<const Endpoint> endpoint);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Resolves, connects and (for https) completes the TLS handshake.
  Status Connect(Clock::time_point deadline);
  bool connected() const { return connected_; }

  Status Write(const std::string& bytes, Clock::time_point deadline);

  // Waits for bytes and appends what arrived to *out; *eof when the server
  // closed the connection instead.
  Status ReadSome(Clock::time_point deadline, std::string* out, bool* eof);

  // True when the connection is open with nothing unread: fit for the next
  // request (a server that closed an idle keep-alive connection makes its
  // socket readable).
  bool Reusable();

  void Cancel();
  bool cancelled() const { return cancelled_.load(); }

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
  std::atomic<bool> cancelled_{false};
  bool connected_ = false;
  bool broken_ = false;
};

}  // namespace kube
}  // namespace gaptrain

#endif  // GAPTRAIN_OPERATOR_KUBE_CONNECTION_H_
