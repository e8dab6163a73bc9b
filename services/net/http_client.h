// HttpConnection: a blocking HTTP/1.1 client over one plain socket. Tools
// use HttpGet to read /metrics and /status; tests use the connection to
// send whatever bytes they like (well-formed requests or garbage) and parse
// responses with Beast's parser, so a test can check a server byte for
// byte, over keep-alive connections, without trusting the server's own
// code. Connecting and every read have a deadline: an address that never
// answers or a silent server yields DEADLINE_EXCEEDED, never a hung test
// (or a hung operator polling a pod on a vanished node). Hosts are IPv4
// literals or "localhost".

#ifndef GAPTRAIN_SERVICES_NET_HTTP_CLIENT_H_
#define GAPTRAIN_SERVICES_NET_HTTP_CLIENT_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "services/base/status.h"

namespace gaptrain {

struct HttpClientResponse {
  int status = 0;
  std::map<std::string, std::string> headers;  // names in lower case
  std::string body;

  // The value of header `name` (any case), or "" when absent.
  std::string Header(const std::string& name) const;
};

class HttpConnection {
 public:
  // Connects to host:port within `timeout_seconds` (DEADLINE_EXCEEDED
  // after it, UNAVAILABLE when refused). `timeout_seconds` also bounds each
  // later Read* call.
  static Status Connect(const std::string& host, uint16_t port,
                        double timeout_seconds,
                        std::unique_ptr<HttpConnection>* connection);

  HttpConnection(const HttpConnection&) = delete;
  HttpConnection& operator=(const HttpConnection&) = delete;
  ~HttpConnection();

  // Sends `bytes` as they are.
  Status Send(const std::string& bytes);

  // Reads one complete response. Pass head_request = true when answering a
  // HEAD (the response then has headers only). Bytes after the response
  // stay buffered for the next call (pipelining).
  Status ReadResponse(HttpClientResponse* response, bool head_request = false);

  // Sends "GET target HTTP/1.1" (keep-alive) and reads the response.
  Status Get(const std::string& target, HttpClientResponse* response);

  // Reads until the server closes the connection (EOF or reset): OK then,
  // DEADLINE_EXCEEDED if it stays open. What arrived first is appended to
  // *received when given.
  Status WaitForClose(std::string* received = nullptr);

 private:
  HttpConnection(int fd, std::string host_port, double timeout_seconds);

  int fd_;
  std::string host_port_;
  double timeout_seconds_;
  std::string pending_;  // received, not yet parsed
};

// One GET on a fresh connection ("Connection: close"), with
// "Authorization: Bearer <bearer_token>" when one is given.
Status HttpGet(const std::string& host, uint16_t port,
               const std::string& target, double timeout_seconds,
               HttpClientResponse* response, const std::string& bearer_token = "");

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_NET_HTTP_CLIENT_H_
