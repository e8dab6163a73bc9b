#include "services/net/http_server.h"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>

#include "services/net/http_client.h"

namespace gaptrain {
namespace {

constexpr double kClientTimeout = 5.0;  // seconds; only hit when a test fails

HttpResponse Ok(const HttpRequest&) {
  return HttpResponse{200, "text/plain; charset=utf-8", "ok"};
}

std::unique_ptr<HttpServer> StartServer(
    const HttpServer::Options& options = HttpServer::Options()) {
  std::unique_ptr<HttpServer> server;
  Status s = HttpServer::Start("127.0.0.1", 0, options, &server);
  EXPECT_TRUE(s.ok()) << s.ToString();
  if (server != nullptr) server->Handle("/healthz", Ok);
  return server;
}

std::unique_ptr<HttpConnection> Connect(const HttpServer& server) {
  std::unique_ptr<HttpConnection> c;
  Status s = HttpConnection::Connect("127.0.0.1", server.port(),
                                         kClientTimeout, &c);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return c;
}

// GET /healthz on a fresh connection answers 200 "ok".
void ExpectHealthy(const HttpServer& server) {
  HttpClientResponse r;
  Status s =
      HttpGet("127.0.0.1", server.port(), "/healthz", kClientTimeout, &r);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "ok");
}

TEST(HttpServerTest, StartsOnEphemeralPortAndServesHealthz) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  EXPECT_NE(server->port(), 0);
  HttpClientResponse r;
  Status s =
      HttpGet("127.0.0.1", server->port(), "/healthz", kClientTimeout, &r);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "ok");
  EXPECT_EQ(r.Header("Content-Type"), "text/plain; charset=utf-8");
  EXPECT_EQ(r.Header("Content-Length"), "2");
}

TEST(HttpServerTest, UnknownPathIs404) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  HttpClientResponse r;
  Status s = HttpGet("127.0.0.1", server->port(), "/nope", kClientTimeout, &r);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(r.status, 404);
  // Paths match exactly.
  s = HttpGet("127.0.0.1", server->port(), "/healthz/", kClientTimeout, &r);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(r.status, 404);
}

TEST(HttpServerTest, PostAndOtherMethodsAre405) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  auto c = Connect(*server);
  ASSERT_NE(c, nullptr);
  ASSERT_TRUE(c->Send("POST /healthz HTTP/1.1\r\nHost: x\r\n"
                      "Content-Length: 3\r\n\r\na=1")
                  .ok());
  HttpClientResponse r;
  Status s = c->ReadResponse(&r);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(r.status, 405);
  EXPECT_EQ(r.Header("Allow"), "GET, HEAD");
  // The body was consumed: the connection still serves the next request.
  ASSERT_TRUE(c->Send("DELETE /healthz HTTP/1.1\r\nHost: x\r\n\r\n").ok());
  s = c->ReadResponse(&r);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(r.status, 405);
  s = c->Get("/healthz", &r);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(r.status, 200);
}

TEST(HttpServerTest, HeadSendsHeadersWithoutBody) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  auto c = Connect(*server);
  ASSERT_NE(c, nullptr);
  ASSERT_TRUE(c->Send("HEAD /healthz HTTP/1.1\r\nHost: x\r\n\r\n").ok());
  HttpClientResponse r;
  Status s = c->ReadResponse(&r, /*head_request=*/true);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.Header("Content-Length"), "2");
  EXPECT_EQ(r.body, "");
  // Had the server sent "ok" after the headers, this response would not
  // parse as one starting with a status line.
  s = c->Get("/healthz", &r);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "ok");
}

TEST(HttpServerTest, KeepAliveServesTwoRequestsOnOneConnection) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  auto c = Connect(*server);
  ASSERT_NE(c, nullptr);
  for (int i = 0; i < 2; ++i) {
    HttpClientResponse r;
    Status s = c->Get("/healthz", &r);
    ASSERT_TRUE(s.ok()) << "request " << i << ": " << s.ToString();
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(r.body, "ok");
    EXPECT_NE(r.Header("Connection"), "close");
  }
}

TEST(HttpServerTest, PipelinedRequestsAreAnsweredInOrder) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  server->Handle("/a", [](const HttpRequest&) {
    return HttpResponse{200, "text/plain", "A"};
  });
  server->Handle("/b", [](const HttpRequest&) {
    return HttpResponse{200, "text/plain", "B"};
  });
  auto c = Connect(*server);
  ASSERT_NE(c, nullptr);
  ASSERT_TRUE(c->Send("GET /a HTTP/1.1\r\nHost: x\r\n\r\n"
                      "GET /nope HTTP/1.1\r\nHost: x\r\n\r\n"
                      "GET /b HTTP/1.1\r\nHost: x\r\n\r\n")
                  .ok());
  HttpClientResponse r;
  ASSERT_TRUE(c->ReadResponse(&r).ok());
  EXPECT_EQ(r.body, "A");
  ASSERT_TRUE(c->ReadResponse(&r).ok());
  EXPECT_EQ(r.status, 404);
  ASSERT_TRUE(c->ReadResponse(&r).ok());
  EXPECT_EQ(r.body, "B");
}

TEST(HttpServerTest, ConnectionCloseIsHonoured) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  auto c = Connect(*server);
  ASSERT_NE(c, nullptr);
  ASSERT_TRUE(c->Send("GET /healthz HTTP/1.1\r\nHost: x\r\n"
                      "Connection: close\r\n\r\n")
                  .ok());
  HttpClientResponse r;
  ASSERT_TRUE(c->ReadResponse(&r).ok());
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.Header("Connection"), "close");
  Status s = c->WaitForClose();
  EXPECT_TRUE(s.ok()) << s.ToString();
}

TEST(HttpServerTest, HandlerSeesPathAndQuery) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  server->Handle("/echo", [](const HttpRequest& req) {
    return HttpResponse{200, "text/plain",
                        req.method + " " + req.path + " " + req.query};
  });
  HttpClientResponse r;
  Status s = HttpGet("127.0.0.1", server->port(), "/echo?a=1&b=%20",
                     kClientTimeout, &r);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "GET /echo a=1&b=%20");
}

TEST(HttpServerTest, HandleAfterStartReplacesHandler) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  ExpectHealthy(*server);
  server->Handle("/healthz", [](const HttpRequest&) {
    return HttpResponse{503, "text/plain", "unhealthy"};
  });
  HttpClientResponse r;
  ASSERT_TRUE(
      HttpGet("127.0.0.1", server->port(), "/healthz", kClientTimeout, &r)
          .ok());
  EXPECT_EQ(r.status, 503);
  EXPECT_EQ(r.body, "unhealthy");
}

TEST(HttpServerTest, HandlerErrorsBecome500AndServerKeepsServing) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  server->Handle("/throw", [](const HttpRequest&) -> HttpResponse {
    throw std::runtime_error("boom");
  });
  server->Handle("/bad-status", [](const HttpRequest&) {
    return HttpResponse{1234, "text/plain", ""};
  });
  HttpClientResponse r;
  ASSERT_TRUE(
      HttpGet("127.0.0.1", server->port(), "/throw", kClientTimeout, &r).ok());
  EXPECT_EQ(r.status, 500);
  EXPECT_NE(r.body.find("boom"), std::string::npos) << r.body;
  ASSERT_TRUE(
      HttpGet("127.0.0.1", server->port(), "/bad-status", kClientTimeout, &r)
          .ok());
  EXPECT_EQ(r.status, 500);
  ExpectHealthy(*server);
}

TEST(HttpServerTest, MalformedRequestGets400AndClose) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  auto c = Connect(*server);
  ASSERT_NE(c, nullptr);
  ASSERT_TRUE(c->Send("NOT AN HTTP REQUEST\r\n\r\n").ok());
  std::string received;
  Status s = c->WaitForClose(&received);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(received.rfind("HTTP/1.1 400", 0), 0u) << received;
  ExpectHealthy(*server);
}

TEST(HttpServerTest, GarbageBytesDoNotCrashTheServer) {
  HttpServer::Options options;
  options.read_timeout = std::chrono::milliseconds(300);
  auto server = StartServer(options);
  ASSERT_NE(server, nullptr);

  std::mt19937 rng(20240601);  // fixed seed: the same bytes every run
  std::vector<std::string> inputs = {
      std::string(1, '\0'),
      std::string(64, '\0'),
      "\r\n\r\n\r\n\r\n",
      "GET",
      "GET / HTTP/1.1\r\n",  // never finished
      "GET / HTTP/9.9\r\n\r\n",
      "GET /healthz HTTP/1.1\r\nContent-Length: -5\r\n\r\n",
      "GET /healthz HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
      "GET /healthz HTTP/1.1\r\nHost x\r\n\r\n",
      "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03",  // a TLS hello
      std::string(100000, 'G'),
  };
  for (int i = 0; i < 20; ++i) {
    std::string bytes(1 + rng() % 2000, '\0');
    for (char& b : bytes) b = static_cast<char>(rng() & 0xff);
    inputs.push_back(bytes);
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    auto c = Connect(*server);
    ASSERT_NE(c, nullptr);
    (void)c->Send(inputs[i]);  // the server may close mid-send
    std::string received;
    Status s = c->WaitForClose(&received);
    EXPECT_TRUE(s.ok()) << "input " << i << ": " << s.ToString();
    if (!received.empty()) {
      EXPECT_EQ(received.rfind("HTTP/1.1 4", 0), 0u)
          << "input " << i << ": " << received;
    }
  }
  ExpectHealthy(*server);
}

TEST(HttpServerTest, OversizedHeaderGets431) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  auto c = Connect(*server);
  ASSERT_NE(c, nullptr);
  ASSERT_TRUE(c->Send("GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " +
                      std::string(9000, 'a') + "\r\n\r\n")
                  .ok());
  HttpClientResponse r;
  Status s = c->ReadResponse(&r);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(r.status, 431);
  EXPECT_TRUE(c->WaitForClose().ok());

  // Just under the limit is fine.
  auto c2 = Connect(*server);
  ASSERT_NE(c2, nullptr);
  ASSERT_TRUE(c2->Send("GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " +
                       std::string(7000, 'a') + "\r\n\r\n")
                  .ok());
  s = c2->ReadResponse(&r);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(r.status, 200);
}

TEST(HttpServerTest, OversizedBodyGets413) {
  HttpServer::Options options;
  options.max_body_bytes = 100;
  auto server = StartServer(options);
  ASSERT_NE(server, nullptr);
  auto c = Connect(*server);
  ASSERT_NE(c, nullptr);
  ASSERT_TRUE(c->Send("GET /healthz HTTP/1.1\r\nHost: x\r\n"
                      "Content-Length: 1000\r\n\r\n" +
                      std::string(1000, 'b'))
                  .ok());
  HttpClientResponse r;
  Status s = c->ReadResponse(&r);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(r.status, 413);
}

TEST(HttpServerTest, SlowClientIsDisconnectedAfterReadTimeout) {
  HttpServer::Options options;
  options.read_timeout = std::chrono::milliseconds(200);
  auto server = StartServer(options);
  ASSERT_NE(server, nullptr);

  // Half a request, then silence.
  auto slow = Connect(*server);
  ASSERT_NE(slow, nullptr);
  ASSERT_TRUE(slow->Send("GET /healthz HTTP/1.1\r\nHost: x\r\n").ok());
  Status s = slow->WaitForClose();  // client gives up after 5 s
  EXPECT_TRUE(s.ok()) << s.ToString();

  // An idle keep-alive connection is closed too.
  auto idle = Connect(*server);
  ASSERT_NE(idle, nullptr);
  HttpClientResponse r;
  ASSERT_TRUE(idle->Get("/healthz", &r).ok());
  s = idle->WaitForClose();
  EXPECT_TRUE(s.ok()) << s.ToString();

  ExpectHealthy(*server);
}

TEST(HttpServerTest, StopIsIdempotentAndClosesEverything) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  const uint16_t port = server->port();
  auto c = Connect(*server);
  ASSERT_NE(c, nullptr);
  HttpClientResponse r;
  ASSERT_TRUE(c->Get("/healthz", &r).ok());

  server->Stop();
  server->Stop();
  EXPECT_EQ(server->port(), port);
  // The open connection was closed, and nothing listens any more.
  EXPECT_TRUE(c->WaitForClose().ok());
  std::unique_ptr<HttpConnection> late;
  Status s =
      HttpConnection::Connect("127.0.0.1", port, kClientTimeout, &late);
  EXPECT_FALSE(s.ok());
  server.reset();  // the destructor's Stop is a no-op now
}

TEST(HttpServerTest, SecondServerOnSameFixedPortFails) {
  auto first = StartServer();
  ASSERT_NE(first, nullptr);
  const uint16_t port = first->port();

  std::unique_ptr<HttpServer> second;
  Status s = HttpServer::Start("127.0.0.1", port, &second);
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), Status::Code::kUnavailable) << s.ToString();
  EXPECT_NE(s.message().find("127.0.0.1:" + std::to_string(port)),
            std::string::npos)
      << s.ToString();
  EXPECT_EQ(second, nullptr);
  ExpectHealthy(*first);

  // Once the first one stops, the port is free again.
  first->Stop();
  s = HttpServer::Start("127.0.0.1", port, &second);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(second->port(), port);
}

TEST(HttpServerTest, AddressThatIsNotLocalIsUnavailable) {
  std::unique_ptr<HttpServer> server;
  // 192.0.2.0/24 is TEST-NET-1: never a local address.
  Status s = HttpServer::Start("192.0.2.1", 0, &server);
  EXPECT_EQ(s.code(), Status::Code::kUnavailable) << s.ToString();
  EXPECT_EQ(server, nullptr);
}

TEST(HttpServerTest, BadOptionsAreInvalidArgument) {
  HttpServer::Options options;
  options.read_timeout = std::chrono::milliseconds(0);
  std::unique_ptr<HttpServer> server;
  Status s = HttpServer::Start("127.0.0.1", 0, options, &server);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << s.ToString();
  EXPECT_EQ(server, nullptr);
}

}  // namespace
}  // namespace gaptrain
