// ScriptedServer: an HTTP/1.1 server for the client's tests that answers
// each request with the next scripted reply and records what it received.
// It knows nothing about Kubernetes; it replays (status, headers, body), or
// exact bytes such as a recorded watch response, optionally after a delay,
// cut short, or never. Plain TCP or TLS (optionally requiring a client
// certificate signed by a given CA). One thread per connection; blocking
// sockets; Stop() (or the destructor) wakes and joins them all. Starting
// one ignores SIGPIPE in the whole (test) process.

#ifndef GAPTRAIN_OPERATOR_TESTING_SCRIPTED_SERVER_H_
#define GAPTRAIN_OPERATOR_TESTING_SCRIPTED_SERVER_H_

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "services/base/status.h"

namespace gaptrain {
namespace kube {

struct ReceivedRequest {
  std::string method;
  std::string target;  // as sent: "/api/v1/pods?limit=2"
  std::string path;    // before '?'
  std::map<std::string, std::string> query;    // decoded
  std::map<std::string, std::string> headers;  // names in lower case
  std::string body;
  std::string client_common_name;  // from the client certificate, if any
  std::string server_name;         // TLS SNI, if the client sent one
  int connection = 0;              // 1 for the first connection accepted, ...
};

struct ScriptedReply {
  int status = 200;
  std::string content_type = "application/json";
  std::string body = "{}";
  // When set: these bytes are the whole response, status line included.
  std::string raw;
  // Send only this many bytes of the response, then close the connection.
  size_t cut_after = std::string::npos;
  std::chrono::milliseconds delay{0};  // before answering
  // Send `raw` (if any) and then nothing more, keeping the connection open
  // until the client or the server closes it.
  bool hang = false;
  bool close = false;   // answer with "Connection: close", then close
  // Close after answering without saying so, as a server dropping an idle
  // keep-alive connection does.
  bool vanish = false;
};

class ScriptedServer {
 public:
  struct Options {
    // TLS when cert_file is set.
    std::string cert_file;
    std::string key_file;
    // Require a client certificate signed by this CA (PEM file).
    std::string client_ca_file;
  };
  using Handler = std::function<ScriptedReply(const ReceivedRequest&)>;

  static Status Start(const Options& options, std::unique_ptr<ScriptedServer>* server);
  ~ScriptedServer();

  // "http://127.0.0.1:PORT" or "https://127.0.0.1:PORT".
  std::string url() const;
  uint16_t port() const { return port_; }

  // Replies are used in order; when none is queued the handler answers;
  // without one, 500.
  void Push(ScriptedReply reply);
  void SetHandler(Handler handler);

  std::vector<ReceivedRequest> requests() const;
  // Waits until `count` requests arrived; false after `timeout`.
  bool WaitForRequests(size_t count, std::chrono::milliseconds timeout) const;
  int connections() const;
  int failed_handshakes() const;

  void Stop();

 private:
  ScriptedServer() = default;
  void AcceptLoop();
  void Serve(int fd, int connection);
  ScriptedReply NextReply(const ReceivedRequest& request);

  Options options_;
  void* ssl_ctx_ = nullptr;  // SSL_CTX*
  int listen_fd_ = -1;
  uint16_t port_ = 0;
  std::thread accept_thread_;

  mutable std::mutex mu_;
  mutable std::condition_variable changed_;
  bool stopping_ = false;
  std::deque<ScriptedReply> queue_;
  Handler handler_;
  std::vector<ReceivedRequest> requests_;
  std::vector<int> open_fds_;
  std::vector<std::thread> threads_;
  int connections_ = 0;
  int failed_handshakes_ = 0;
};

// Percent-decodes a query string into a map ("a=1&b=x%2Fy").
std::map<std::string, std::string> DecodeQuery(const std::string& query);

}  // namespace kube
}  // namespace gaptrain

#endif  // GAPTRAIN_OPERATOR_TESTING_SCRIPTED_SERVER_H_
