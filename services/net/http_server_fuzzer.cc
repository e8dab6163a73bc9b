// Fuzz target: the HTTP/1.1 request handling of HttpServer (http_server.h),
// end to end: each input is sent as the bytes of one connection to a real
// server on 127.0.0.1, which then sees the client half-close. Requests may
// be pipelined, malformed, oversized or cut off anywhere. Contract:
//   - the server answers with well-formed responses whose status is one the
//     header promises (200, 404, 405 for a method other than GET/HEAD, 400
//     malformed, 413 body too large, 431 header too large, 500 for a
//     handler that throws or returns a bad status), or closes silently
//     when the request was cut off;
//   - it closes the connection once the input is used up, never hangs;
//   - it keeps serving: a fresh GET /metrics after every input gets 200.
// ASan watches the server's thread as well as this one.

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>

#include "services/net/http_server.h"
#include "services/testing/fuzz_contract.h"

namespace gaptrain {
namespace {

// Small limits so that short inputs reach the 413 and 431 paths.
HttpServer& Server() {
  static HttpServer* server = [] {
    HttpServer::Options options;
    options.max_header_bytes = 512;
    options.max_body_bytes = 256;
    options.read_timeout = std::chrono::milliseconds(5000);
    std::unique_ptr<HttpServer> started;
    Status status = HttpServer::Start("127.0.0.1", 0, options, &started);
    FuzzExpect(status.ok(), "cannot start the server: " + status.ToString());
    started->Handle("/metrics", [](const HttpRequest&) {
      HttpResponse r;
      r.body = "up 1\n";
      return r;
    });
    started->Handle("/status", [](const HttpRequest& request) {
      FuzzExpect(request.method == "GET" || request.method == "HEAD",
                 "a handler saw method " + request.method);
      FuzzExpect(request.path == "/status", "a handler saw path " + request.path);
      HttpResponse r;
      r.content_type = "application/json";
      r.body = "{\"query\": " + std::to_string(request.query.size()) + "}";
      return r;
    });
    started->Handle("/bad-status", [](const HttpRequest&) {
      HttpResponse r;
      r.status = 1000;
      return r;
    });
    started->Handle("/throws", [](const HttpRequest&) -> HttpResponse {
      throw std::runtime_error("handler failure");
    });
    return started.release();  // lives as long as the fuzzing process
  }();
  return *server;
}

// Sends `bytes` on a new connection, half-closes, and returns all that
// comes back until the server closes.
std::string Exchange(const std::string& bytes) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  FuzzExpect(fd >= 0, std::string("socket: ") + std::strerror(errno));
  // Reset instead of TIME_WAIT: thousands of connections a second.
  const linger abort_on_close{1, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &abort_on_close, sizeof abort_on_close);
  const timeval patience{10, 0};  // twice the read timeout: a hang, not a slow answer
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &patience, sizeof patience);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(Server().port());
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  FuzzExpect(::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0,
             std::string("connect: ") + std::strerror(errno));
  size_t sent = 0;
  while (sent < bytes.size()) {
    // The server may close early (400, 413, 431): the rest is not needed.
    const ssize_t n = ::send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;  // libFuzzer's timers interrupt calls
    if (n <= 0) break;
    sent += static_cast<size_t>(n);
  }
  ::shutdown(fd, SHUT_WR);
  std::string reply;
  char buffer[4096];
  for (;;) {
    const ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
    if (n > 0) {
      reply.append(buffer, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    FuzzExpect(n == 0 || errno == ECONNRESET,
               std::string("the server neither answered nor closed: ") + std::strerror(errno));
    break;
  }
  ::close(fd);
  return reply;
}

// The status of the first response in `reply`.
int FirstStatus(const std::string& reply) {
  // "HTTP/1.1 200 OK\r\n": the version is echoed from the request.
  FuzzExpect(reply.rfind("HTTP/", 0) == 0, "a response that is not HTTP: " + reply.substr(0, 40));
  const size_t space = reply.find(' ');
  FuzzExpect(space != std::string::npos && space + 4 <= reply.size(), "no status code");
  const std::string code = reply.substr(space + 1, 3);
  for (char c : code) FuzzExpect(c >= '0' && c <= '9', "status code " + code);
  return std::stoi(code);
}

}  // namespace
}  // namespace gaptrain

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gaptrain;
  const std::string reply = Exchange(std::string(reinterpret_cast<const char*>(data), size));
  if (!reply.empty()) {
    const int status = FirstStatus(reply);
    FuzzExpect(status == 200 || status == 400 || status == 404 || status == 405 ||
                   status == 413 || status == 431 || status == 500,
               "unexpected status " + std::to_string(status));
    FuzzExpect(reply.find("\r\n\r\n") != std::string::npos, "a response without a header end");
  }
  const std::string alive =
      Exchange("GET /metrics HTTP/1.1\r\nHost: fuzz\r\nConnection: close\r\n\r\n");
  FuzzExpect(alive.rfind("HTTP/1.1 200 ", 0) == 0, "the server stopped serving: " + alive);
  return 0;
}
