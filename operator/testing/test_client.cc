#include "operator/testing/test_client.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace gaptrain {
namespace kube_testing {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

constexpr double kTimeoutSeconds = 10;

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

std::string TestResponse::Header(const std::string& name) const {
  auto it = headers.find(Lower(name));
  return it == headers.end() ? std::string() : it->second;
}

TestClient::TestClient(uint16_t port, std::string token) : port_(port), token_(std::move(token)) {}

TestResponse TestClient::Send(const std::string& method, const std::string& target,
                              const std::string& body, const std::string& content_type,
                              const std::vector<std::pair<std::string, std::string>>& headers) {
  std::string request = method + " " + target + " HTTP/1.1\r\nHost: 127.0.0.1:" +
                        std::to_string(port_) + "\r\nAccept: application/json\r\n";
  if (!token_.empty()) request += "Authorization: Bearer " + token_ + "\r\n";
  if (!body.empty() || method == "POST" || method == "PUT" || method == "PATCH") {
    request += "Content-Type: " + content_type + "\r\nContent-Length: " +
               std::to_string(body.size()) + "\r\n";
  }
  for (const auto& [name, value] : headers) request += name + ": " + value + "\r\n";
  request += "\r\n" + body;
  TestResponse response;
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (connection_ == nullptr) {
      Status s = HttpConnection::Connect("127.0.0.1", port_, kTimeoutSeconds, &connection_);
      if (!s.ok()) {
        ADD_FAILURE() << s.ToString();
        return response;
      }
    }
    HttpClientResponse raw;
    Status s = connection_->Send(request);
    if (s.ok()) s = connection_->ReadResponse(&raw);
    if (!s.ok()) {
      connection_.reset();  // the server may have closed a kept-alive connection
      if (attempt == 0 && s.code() != Status::Code::kDeadlineExceeded) continue;
      ADD_FAILURE() << method << " " << target << ": " << s.ToString();
      return response;
    }
    response.status = raw.status;
    response.headers = raw.headers;
    response.body = raw.body;
    response.json = json::parse(raw.body, nullptr, false);
    if (response.json.is_discarded()) response.json = nullptr;
    if (Lower(raw.Header("connection")) == "close") connection_.reset();
    return response;
  }
  return response;
}

Status WatchReader::Open(uint16_t port, const std::string& token, const std::string& target,
                         std::chrono::milliseconds timeout, std::unique_ptr<WatchReader>* out) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  ::inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status::Internal(std::strerror(errno));
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return Status::Unavailable(std::string("connect: ") + std::strerror(errno));
  }
  std::unique_ptr<WatchReader> reader(new WatchReader(fd));
  std::string request = "GET " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\n";
  if (!token.empty()) request += "Authorization: Bearer " + token + "\r\n";
  request += "Accept: application/json\r\nConnection: close\r\n\r\n";
  if (::send(fd, request.data(), request.size(), MSG_NOSIGNAL) !=
      static_cast<ssize_t>(request.size())) {
    return Status::Unavailable("send failed");
  }
  const Clock::time_point deadline = Clock::now() + timeout;
  size_t head_end;
  while ((head_end = reader->raw_.find("\r\n\r\n")) == std::string::npos) {
    bool eof = false;
    GAPTRAIN_RETURN_IF_ERROR(reader->Fill(deadline, &eof));
    if (eof) return Status::Unavailable("the server closed before the response head");
  }
  const std::string head = reader->raw_.substr(0, head_end);
  reader->pending_ = reader->raw_.substr(head_end + 4);
  // "HTTP/1.1 200 OK"
  reader->status_ = std::atoi(head.substr(head.find(' ') + 1).c_str());
  size_t start = head.find("\r\n");
  while (start != std::string::npos) {
    const size_t end = head.find("\r\n", start + 2);
    const std::string line = head.substr(start + 2, end == std::string::npos ? end : end - start - 2);
    const size_t colon = line.find(':');
    if (colon != std::string::npos) {
      std::string value = line.substr(colon + 1);
      while (!value.empty() && value[0] == ' ') value.erase(0, 1);
      reader->headers_[Lower(line.substr(0, colon))] = value;
    }
    start = end;
  }
  *out = std::move(reader);
  return Status::OK();
}

WatchReader::~WatchReader() { ::close(fd_); }

std::string WatchReader::Header(const std::string& name) const {
  auto it = headers_.find(Lower(name));
  return it == headers_.end() ? std::string() : it->second;
}

Status WatchReader::Fill(Clock::time_point deadline, bool* eof) {
  *eof = false;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return Status(Status::Code::kDeadlineExceeded, "no data in time");
    pollfd p{fd_, POLLIN, 0};
    const int rc = ::poll(&p, 1, static_cast<int>(left.count()));
    if (rc < 0 && errno == EINTR) continue;
    if (rc <= 0) continue;
    char buf[16384];
    const ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      *eof = true;
      return Status::OK();
    }
    raw_.append(buf, static_cast<size_t>(n));
    pending_.append(buf, static_cast<size_t>(n));
    return Status::OK();
  }
}

Status WatchReader::Next(std::chrono::milliseconds timeout, json* event) {
  const Clock::time_point deadline = Clock::now() + timeout;
  for (;;) {
    const size_t buffered = line_.find('\n');
    if (buffered != std::string::npos) {
      *event = json::parse(line_.substr(0, buffered), nullptr, false);
      line_.erase(0, buffered + 1);
      if (event->is_discarded()) return Status::DataLoss("an event is not JSON");
      return Status::OK();
    }
    if (ended_) return Status::OutOfRange("the watch stream has ended");
    // Parse whole chunks out of pending_.
    const size_t size_end = pending_.find("\r\n");
    if (size_end != std::string::npos) {
      const size_t size = std::strtoul(pending_.substr(0, size_end).c_str(), nullptr, 16);
      if (size == 0 && pending_.size() >= size_end + 4) {
        ended_ = true;
        ended_cleanly_ = true;
        return Status::OutOfRange("the watch stream has ended");
      }
      if (size > 0 && pending_.size() >= size_end + 2 + size + 2) {
        line_ += pending_.substr(size_end + 2, size);
        pending_.erase(0, size_end + 2 + size + 2);
        continue;
      }
    }
    bool eof = false;
    GAPTRAIN_RETURN_IF_ERROR(Fill(deadline, &eof));
    if (eof) {
      ended_ = true;
      return Status::OutOfRange("the server closed the connection");
    }
  }
}

Status WatchReader::ReadToEnd(std::chrono::milliseconds timeout, std::vector<json>* events) {
  const Clock::time_point deadline = Clock::now() + timeout;
  for (;;) {
    json event;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    Status s = Next(std::max(left, std::chrono::milliseconds(1)), &event);
    if (s.code() == Status::Code::kOutOfRange) return Status::OK();
    GAPTRAIN_RETURN_IF_ERROR(s);
    events->push_back(std::move(event));
  }
}

}  // namespace kube_testing
}  // namespace gaptrain
