// Transport: HTTP/1.1 requests to the API server over a small pool of
// keep-alive connections, with the bearer token, a deadline per request,
// and cancellation.
//
// What callers may rely on:
//   - Thread-safe: each call in flight has a connection of its own; idle
//     connections (up to max_idle_connections) are reused. A connection the
//     server closed while idle is noticed and dropped before reuse; a GET
//     that fails on a reused connection before any response byte is sent
//     once more on a fresh one.
//   - RoundTrip returns OK for any complete HTTP response (the caller reads
//     the status); errors mean no complete response: UNAVAILABLE (connect
//     failed, connection cut, response truncated), DEADLINE_EXCEEDED,
//     CANCELLED, DATA_LOSS (not HTTP, or larger than max_response_bytes),
//     UNAUTHENTICATED (token file unreadable).
//   - Shutdown() cancels every call in flight, streams included, and makes
//     later calls fail with CANCELLED. Calls given a Cancellation are also
//     cancelled by it.

#ifndef GAPTRAIN_OPERATOR_KUBE_TRANSPORT_H_
#define GAPTRAIN_OPERATOR_KUBE_TRANSPORT_H_

#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "operator/kube/bearer_token.h"
#include "operator/kube/cancellation.h"
#include "operator/kube/cluster_config.h"
#include "operator/kube/connection.h"
#include "services/base/status.h"

namespace gaptrain {
namespace kube {

struct HttpCall {
  std::string method;  // "GET", "POST", ...
  std::string target;  // path and query, without the server's base path
  std::string content_type;  // "" when there is no body
  std::string body;
};

struct HttpReply {
  int status = 0;
  std::string content_type;
  std::string body;
  // The text of each Warning header ("299 - \"text\""): what the API server
  // warns of (a deprecated API, a field it ignores), in order.
  std::vector<std::string> warnings;
};

// The quoted text of a Warning header value (RFC 7234: `299 - "text"`,
// maybe followed by a date), unescaped; the whole value when it quotes
// nothing.
std::string WarningText(const std::string& header_value);

// The response of a request read as it arrives (a watch). Owns its
// connection; cancelled by Cancel(), the Transport's Shutdown() or the
// Cancellation it was opened with.
class ResponseStream {
 public:
  ~ResponseStream();
  Status ReadSome(Clock::time_point deadline, std::string* out, bool* eof) {
    return connection_->ReadSome(deadline, out, eof);
  }
  void Cancel() { connection_->Cancel(); }

 private:
  friend class Transport;
  ResponseStream() = default;
  std::unique_ptr<Connection> connection_;
  std::unique_ptr<CancelScope> scope_;
};

class Transport {
 public:
  struct Options {
    std::string user_agent = "gaptrain-operator";
    size_t max_idle_connections = 8;
    size_t max_response_bytes = size_t{128} << 20;
  };

  static Status New(const ClusterConfig& config, const Options& options,
                    std::unique_ptr<Transport>* transport);

  Transport(const Transport&) = delete;
  Transport& operator=(const Transport&) = delete;

  Status RoundTrip(const HttpCall& call, Clock::time_point deadline, Cancellation* cancel,
                   HttpReply* reply);

  // Sends `call` on a connection of its own and returns it for reading the
  // response incrementally (the status line and headers too).
  Status OpenStream(const HttpCall& call, Clock::time_point deadline, Cancellation* cancel,
                    std::unique_ptr<ResponseStream>* stream);

  void Shutdown();
  bool shut_down() const { return shutdown_.cancelled(); }

  // "host:port" of the server.
  const std::string& host_port() const { return host_port_; }

 private:
  Transport(std::shared_ptr<const Endpoint> endpoint, const ClusterConfig& config,
            const Options& options);

  // The request's bytes, with Host, User-Agent, Accept and Authorization.
  Status Serialize(const HttpCall& call, std::string* bytes);
  // One attempt on `connection`; *any_bytes tells whether the server
  // answered anything.
  Status Exchange(Connection* connection, const std::string& request, Clock::time_point deadline,
                  HttpReply* reply, bool* keep_alive, bool* any_bytes);
  std::unique_ptr<Connection> TakeIdle();
  void PutIdle(std::unique_ptr<Connection> connection);

  const std::shared_ptr<const Endpoint> endpoint_;
  const Options options_;
  const std::string host_port_;
  BearerToken token_;
  Cancellation shutdown_;

  std::mutex mu_;
  std::vector<std::unique_ptr<Connection>> idle_;
};

}  // namespace kube
}  // namespace gaptrain

#endif  // GAPTRAIN_OPERATOR_KUBE_TRANSPORT_H_
