// HttpServer: a small HTTP/1.1 server for a service's operational endpoints
// (/metrics, /healthz, /status). It is not a general web server: it serves
// GET and HEAD on exact paths registered with Handle(), on one thread of its
// own, and is meant to sit beside a service's real (gRPC) port.
//
// What callers may rely on:
//   - Start() binds and listens before it returns, so port() is usable at
//     once (port 0 picks an ephemeral port). Errors come back as a Status;
//     nothing throws across this API.
//   - Handlers run on the server's thread, one request at a time, after
//     Start() and before Stop() returns. A handler that throws yields 500.
//   - GET and HEAD are served (HEAD sends the headers of the GET response
//     without the body); any other method gets 405 with "Allow: GET, HEAD".
//     A path nobody registered gets 404. The query string ("?a=b") is not
//     part of the path; handlers see it in HttpRequest::query.
//   - Keep-alive and pipelined requests on one connection are served in
//     order. A request whose header section exceeds max_header_bytes gets
//     431, a larger body 413, a malformed request 400; each closes the
//     connection. A connection that sends no complete request within
//     read_timeout (idle keep-alive connections included) is closed.
//   - Stop() is idempotent, closes the listening socket and every
//     connection, and joins the thread. The destructor calls it. Stop() must
//     not be called from inside a handler.

#ifndef GAPTRAIN_SERVICES_NET_HTTP_SERVER_H_
#define GAPTRAIN_SERVICES_NET_HTTP_SERVER_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "services/base/status.h"

namespace gaptrain {

struct HttpRequest {
  std::string method;  // "GET" or "HEAD"
  std::string path;    // "/metrics"
  std::string query;   // the text after '?', undecoded; "" when absent
  std::string authorization;  // the Authorization header; "" when absent
};

struct HttpResponse {
  int status = 200;  // 100..599; anything else is answered with 500
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
  std::string www_authenticate;  // a 401's WWW-Authenticate header; "" for none
};

class HttpServer {
 public:
  using Handler = std::function<HttpResponse(const HttpRequest& request)>;

  struct Options {
    // Limit on the request line plus headers; larger requests get 431.
    size_t max_header_bytes = 8 * 1024;
    // Limit on a request body (GET bodies are read and ignored); 413 above.
    size_t max_body_bytes = 64 * 1024;
    // Time allowed to receive one complete request, and to send a response.
    std::chrono::milliseconds read_timeout{10000};
  };

  // Binds `address` (an IP literal such as "127.0.0.1", "0.0.0.0", "::1",
  // or a host name that resolves locally, e.g. "localhost") and `port`
  // (0: ephemeral), starts the server thread, and sets *server. Errors:
  // INVALID_ARGUMENT for an address that does not parse or resolve, or
  // options out of range (read_timeout must be positive),
  // UNAVAILABLE when the address and port cannot be bound (in use, not a
  // local address), INTERNAL for anything else.
  static Status Start(const std::string& address, uint16_t port,
                      std::unique_ptr<HttpServer>* server);
  static Status Start(const std::string& address, uint16_t port,
                      const Options& options,
                      std::unique_ptr<HttpServer>* server);

  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;
  ~HttpServer();

  // The bound port (the chosen one when Start was given 0). Stays valid
  // after Stop().
  uint16_t port() const { return port_; }

  // Serves `path` (exact match, e.g. "/metrics") with `handler`, replacing
  // any earlier handler for it. Safe to call from any thread, before or
  // after Start; later requests see the new handler.
  void Handle(const std::string& path, Handler handler);

  // Stops serving; see the file comment. Safe to call more than once.
  void Stop();

 private:
  class Impl;
  class Session;
  friend class Session;

  HttpServer(const Options& options);

  // The handler for `path`, or an empty function.
  Handler Find(const std::string& path) const;

  const Options options_;
  uint16_t port_ = 0;

  mutable std::mutex handlers_mu_;
  std::map<std::string, Handler> handlers_;

  std::mutex stop_mu_;          // serialises Stop()
  std::unique_ptr<Impl> impl_;  // io_context and acceptor; null once stopped
  std::thread thread_;
};

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_NET_HTTP_SERVER_H_
