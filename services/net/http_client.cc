#include "services/net/http_client.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/buffer.hpp>
#include <boost/beast/http.hpp>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <utility>

namespace gaptrain {

namespace http = boost::beast::http;
using Clock = std::chrono::steady_clock;

namespace {

std::string Lower(std::string s) {
  for (char& c : s)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string Errno(const char* what) {
  return std::string(what) + ": " + std::strerror(errno);
}

// Waits until `fd` is ready for `events` (POLLIN, POLLOUT): OK then,
// DEADLINE_EXCEEDED ("<what> before the deadline") once `deadline` passes.
Status WaitReady(int fd, short events, Clock::time_point deadline, const std::string& what) {
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - Clock::now());
    if (left.count() <= 0) {
      return Status(Status::Code::kDeadlineExceeded, what + " before the deadline");
    }
    pollfd p{fd, events, 0};
    const int rc = ::poll(&p, 1, static_cast<int>(left.count()));
    if (rc < 0 && errno == EINTR) continue;
    if (rc < 0) return Status::Internal(Errno("poll"));
    if (rc > 0) return Status::OK();
  }
}

// Waits for data until `deadline`, then reads what is there. Sets *eof when
// the peer closed (a reset counts as closed).
Status ReadSome(int fd, Clock::time_point deadline, const std::string& peer,
                std::string* out, bool* eof) {
  *eof = false;
  for (;;) {
    GAPTRAIN_RETURN_IF_ERROR(WaitReady(fd, POLLIN, deadline, "no data from " + peer));
    char buf[16384];
    const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n < 0 && errno == ECONNRESET) {
      *eof = true;
      return Status::OK();
    }
    if (n < 0) return Status::Unavailable(Errno(("recv from " + peer).c_str()));
    if (n == 0) {
      *eof = true;
      return Status::OK();
    }
    out->append(buf, static_cast<size_t>(n));
    return Status::OK();
  }
}

// Connects the non-blocking socket `fd` within `timeout_seconds`.
Status ConnectWithin(int fd, const sockaddr_in& addr, const std::string& host_port,
                     double timeout_seconds) {
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) == 0) {
    return Status::OK();
  }
  if (errno != EINPROGRESS && errno != EINTR) {
    return Status::Unavailable(Errno(("connect to " + host_port).c_str()));
  }
  const Clock::time_point deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(
                         std::chrono::duration<double>(timeout_seconds));
  GAPTRAIN_RETURN_IF_ERROR(
      WaitReady(fd, POLLOUT, deadline, "connect to " + host_port + ": no answer"));
  int error = 0;
  socklen_t length = sizeof(error);
  if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length) != 0) {
    return Status::Internal(Errno("getsockopt"));
  }
  if (error == 0) return Status::OK();
  errno = error;
  return Status::Unavailable(Errno(("connect to " + host_port).c_str()));
}

}  // namespace

std::string HttpClientResponse::Header(const std::string& name) const {
  auto it = headers.find(Lower(name));
  return it == headers.end() ? std::string() : it->second;
}

HttpConnection::HttpConnection(int fd, std::string host_port,
                                       double timeout_seconds)
    : fd_(fd),
      host_port_(std::move(host_port)),
      timeout_seconds_(timeout_seconds) {}

HttpConnection::~HttpConnection() { ::close(fd_); }

Status HttpConnection::Connect(
    const std::string& host, uint16_t port, double timeout_seconds,
    std::unique_ptr<HttpConnection>* connection) {
  const std::string host_port = host + ":" + std::to_string(port);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  const std::string ip = host == "localhost" ? "127.0.0.1" : host;
  if (::inet_pton(AF_INET, ip.c_str(), &addr.sin_addr) != 1) {
    return Status::InvalidArgument("not an IPv4 address: '" + host + "'");
  }
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return Status::Internal(Errno("socket"));
  // Non-blocking, so an address that never answers (a pod whose node is
  // gone) costs timeout_seconds, not the kernel's SYN retries (minutes).
  Status s = ConnectWithin(fd, addr, host_port, timeout_seconds);
  if (s.ok() && ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK) != 0) {
    s = Status::Internal(Errno("fcntl"));
  }
  if (!s.ok()) {
    ::close(fd);
    return s;
  }
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  connection->reset(new HttpConnection(fd, host_port, timeout_seconds));
  return Status::OK();
}

Status HttpConnection::Send(const std::string& bytes) {
  size_t sent = 0;
  while (sent < bytes.size()) {
    const ssize_t n =
        ::send(fd_, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0)
      return Status::Unavailable(Errno(("send to " + host_port_).c_str()));
    sent += static_cast<size_t>(n);
  }
  return Status::OK();
}

Status HttpConnection::ReadResponse(HttpClientResponse* response,
                                        bool head_request) {
  const Clock::time_point deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(
                         std::chrono::duration<double>(timeout_seconds_));
  http::response_parser<http::string_body> parser;
  parser.eager(true);
  parser.body_limit(64u << 20);
  parser.header_limit(1u << 20);
  if (head_request) parser.skip(true);

  for (;;) {
    if (!pending_.empty()) {
      boost::beast::error_code ec;
      const size_t used =
          parser.put(boost::asio::buffer(pending_.data(), pending_.size()), ec);
      pending_.erase(0, used);
      if (ec && ec != http::error::need_more) {
        return Status::DataLoss("malformed HTTP response from " + host_port_ +
                                ": " + ec.message());
      }
      if (parser.is_done()) break;
      if (!ec && used > 0) continue;
    }
    bool eof = false;
    GAPTRAIN_RETURN_IF_ERROR(
        ReadSome(fd_, deadline, host_port_, &pending_, &eof));
    if (eof) {
      // put_eof() asserts that something arrived; a server that closes
      // without a byte is just an error here.
      boost::beast::error_code ec;
      if (parser.got_some()) parser.put_eof(ec);
      if (parser.got_some() && !ec && parser.is_done()) break;
      return Status::Unavailable(host_port_ +
                                 " closed the connection before a complete "
                                 "response");
    }
  }

  const auto& res = parser.get();
  response->status = static_cast<int>(res.result_int());
  response->headers.clear();
  for (const auto& field : res) {
    response->headers[Lower(std::string(field.name_string()))] =
        std::string(field.value());
  }
  response->body = res.body();
  return Status::OK();
}

Status HttpConnection::Get(const std::string& target,
                               HttpClientResponse* response) {
  GAPTRAIN_RETURN_IF_ERROR(
      Send("GET " + target + " HTTP/1.1\r\nHost: " + host_port_ + "\r\n\r\n"));
  return ReadResponse(response);
}

Status HttpConnection::WaitForClose(std::string* received) {
  const Clock::time_point deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(
                         std::chrono::duration<double>(timeout_seconds_));
  std::string got = pending_;
  pending_.clear();
  for (;;) {
    bool eof = false;
    Status s = ReadSome(fd_, deadline, host_port_, &got, &eof);
    if (received != nullptr) {
      received->append(got);
      got.clear();
    }
    if (!s.ok()) {
      if (s.code() == Status::Code::kDeadlineExceeded) {
        return Status(Status::Code::kDeadlineExceeded,
                      host_port_ + " kept the connection open");
      }
      return s;
    }
    if (eof) return Status::OK();
  }
}

Status HttpGet(const std::string& host, uint16_t port,
               const std::string& target, double timeout_seconds,
               HttpClientResponse* response, const std::string& bearer_token) {
  std::unique_ptr<HttpConnection> c;
  GAPTRAIN_RETURN_IF_ERROR(
      HttpConnection::Connect(host, port, timeout_seconds, &c));
  const std::string authorization =
      bearer_token.empty() ? "" : "Authorization: Bearer " + bearer_token + "\r\n";
  GAPTRAIN_RETURN_IF_ERROR(
      c->Send("GET " + target + " HTTP/1.1\r\nHost: " + host + ":" +
              std::to_string(port) + "\r\n" + authorization +
              "Connection: close\r\n\r\n"));
  return c->ReadResponse(response);
}

}  // namespace gaptrain
