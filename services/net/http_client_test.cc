// Tests what HttpConnection promises beyond the servers' tests: connecting
// ends by its deadline even when the peer never answers, and a refused
// connection is UNAVAILABLE at once.

#include "services/net/http_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <vector>

namespace gaptrain {
namespace {

using Clock = std::chrono::steady_clock;

// A loopback socket listening with a backlog of zero that never accepts:
// once its accept queue is full, further SYNs are dropped and connects
// hang, as to a host that has vanished.
class SilentListener {
 public:
  SilentListener() {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    EXPECT_EQ(::listen(fd_, 0), 0);
    socklen_t length = sizeof(addr);
    EXPECT_EQ(::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &length), 0);
    port_ = ntohs(addr.sin_port);
  }
  ~SilentListener() { ::close(fd_); }
  uint16_t port() const { return port_; }

 private:
  int fd_ = -1;
  uint16_t port_ = 0;
};

TEST(HttpClientTest, ConnectEndsByItsDeadlineWhenThePeerNeverAnswers) {
  SilentListener listener;
  // Fill the accept queue; the connection that times out is the proof.
  std::vector<std::unique_ptr<HttpConnection>> queued;
  Status last;
  for (int i = 0; i < 8 && last.code() != Status::Code::kDeadlineExceeded; ++i) {
    std::unique_ptr<HttpConnection> c;
    const Clock::time_point start = Clock::now();
    last = HttpConnection::Connect("127.0.0.1", listener.port(), 0.3, &c);
    const auto took = Clock::now() - start;
    if (last.ok()) {
      queued.push_back(std::move(c));
      continue;
    }
    ASSERT_EQ(last.code(), Status::Code::kDeadlineExceeded) << last.ToString();
    EXPECT_GE(took, std::chrono::milliseconds(250));
    EXPECT_LT(took, std::chrono::seconds(3));
    EXPECT_NE(last.message().find("connect to 127.0.0.1:"), std::string::npos) << last.message();
  }
  EXPECT_EQ(last.code(), Status::Code::kDeadlineExceeded) << last.ToString();
}

TEST(HttpClientTest, ARefusedConnectionIsUnavailable) {
  uint16_t port = 0;
  {
    SilentListener closed;  // a port that was just free: nobody listens once closed
    port = closed.port();
  }
  std::unique_ptr<HttpConnection> c;
  const Status s = HttpConnection::Connect("127.0.0.1", port, 5, &c);
  EXPECT_EQ(s.code(), Status::Code::kUnavailable) << s.ToString();
  HttpClientResponse response;
  EXPECT_EQ(HttpGet("not-an-address", 80, "/", 1, &response).code(),
            Status::Code::kInvalidArgument);
}

}  // namespace
}  // namespace gaptrain
