#include "services/net/http_server.h"

#include <fcntl.h>

#include <array>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cstdio>
#include <exception>
#include <optional>
#include <utility>

namespace gaptrain {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = boost::beast::http;
using tcp = boost::asio::ip::tcp;

namespace {

// How long a closing connection waits for the client to finish sending
// (so that unread bytes do not turn our last response into a reset).
constexpr std::chrono::milliseconds kLingerTime{1000};
constexpr size_t kLingerMaxBytes = 64 * 1024;

std::string HostPort(const std::string& host, uint16_t port) {
  if (host.find(':') != std::string::npos) {
    return "[" + host + "]:" + std::to_string(port);
  }
  return host + ":" + std::to_string(port);
}

// Children the process forks must not inherit our sockets (a child holding
// the listening socket would keep the port bound after Stop).
template <class Socket>
void SetCloseOnExec(Socket& socket) {
  const int fd = socket.native_handle();
  const int flags = ::fcntl(fd, F_GETFD);
  if (flags >= 0) ::fcntl(fd, F_SETFD, flags | FD_CLOEXEC);
}

HttpResponse PlainResponse(int status, std::string body) {
  HttpResponse r;
  r.status = status;
  r.body = std::move(body);
  return r;
}

}  // namespace

class HttpServer::Impl {
 public:
  explicit Impl(HttpServer* server) : server_(server) {}

  void Accept();

  asio::io_context ioc_{1};
  tcp::acceptor acceptor_{ioc_};
  asio::steady_timer accept_retry_{ioc_};

 private:
  HttpServer* const server_;
};

// One connection: read a request, write its response, repeat while the
// client keeps the connection alive. Owned by the shared_ptrs its pending
// operations hold; destroying the io_context destroys it.
class HttpServer::Session : public std::enable_shared_from_this<Session> {
 public:
  Session(HttpServer* server, tcp::socket socket)
      : server_(server), stream_(std::move(socket)) {}

  void Start() { ReadRequest(); }

 private:
  const Options& options() const { return server_->options_; }

  void ReadRequest();
  void OnRead(beast::error_code ec);
  HttpResponse Dispatch(const http::request<http::string_body>& req,
                        bool* method_not_allowed);
  // Sends a response to a request that could not be parsed, then closes.
  void SendError(int status, const std::string& body);
  void Write(bool close);
  void OnWrite(bool close, beast::error_code ec);
  // Half-closes, reads (and drops) what the client still sends for a short
  // while, then closes.
  void Linger();
  void Drain();

  HttpServer* const server_;
  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  http::response<http::string_body> response_;
  std::array<char, 4096> drain_buffer_;
  size_t drained_ = 0;
};

void HttpServer::Impl::Accept() {
  acceptor_.async_accept([this](beast::error_code ec, tcp::socket socket) {
    if (ec == asio::error::operation_aborted || !acceptor_.is_open()) return;
    if (ec) {
      // E.g. out of file descriptors: try again shortly rather than spin.
      accept_retry_.expires_after(std::chrono::milliseconds(50));
      accept_retry_.async_wait([this](beast::error_code wait_ec) {
        if (!wait_ec) Accept();
      });
      return;
    }
    SetCloseOnExec(socket);
    beast::error_code ignored;
    socket.set_option(tcp::no_delay(true), ignored);
    std::make_shared<Session>(server_, std::move(socket))->Start();
    Accept();
  });
}

void HttpServer::Session::ReadRequest() {
  parser_.emplace();
  parser_->header_limit(static_cast<std::uint32_t>(options().max_header_bytes));
  parser_->body_limit(options().max_body_bytes);
  stream_.expires_after(options().read_timeout);
  http::async_read(stream_, buffer_, *parser_,
                   [self = shared_from_this()](beast::error_code ec, size_t) {
                     self->OnRead(ec);
                   });
}

void HttpServer::Session::OnRead(beast::error_code ec) {
  if (ec == http::error::end_of_stream) return Linger();  // client is done
  if (ec == http::error::header_limit || ec == http::error::buffer_overflow) {
    return SendError(431, "request header too large\n");
  }
  if (ec == http::error::body_limit) {
    return SendError(413, "request body too large\n");
  }
  if (ec && ec != http::error::partial_message &&
      ec.category() == beast::error_code(http::error::bad_method).category()) {
    return SendError(400, "bad request\n");
  }
  if (ec) {
    // Timeout, reset, or the client left mid-request: nobody to answer.
    beast::error_code ignored;
    stream_.socket().close(ignored);
    return;
  }

  const http::request<http::string_body>& req = parser_->get();
  bool method_not_allowed = false;
  HttpResponse r = Dispatch(req, &method_not_allowed);
  if (r.status < 100 || r.status > 599) {
    r = PlainResponse(
        500, "handler returned status " + std::to_string(r.status) + "\n");
  }

  response_ = {};
  response_.version(req.version());
  response_.result(static_cast<unsigned>(r.status));
  response_.set(http::field::server, "gaptrain");
  response_.set(http::field::content_type, r.content_type);
  if (method_not_allowed) response_.set(http::field::allow, "GET, HEAD");
  if (!r.www_authenticate.empty()) {
    response_.set(http::field::www_authenticate, r.www_authenticate);
  }
  if (req.method() == http::verb::head) {
    response_.content_length(r.body.size());
  } else {
    response_.body() = std::move(r.body);
    response_.prepare_payload();
  }
  response_.keep_alive(req.keep_alive());
  Write(!response_.keep_alive());
}

HttpResponse HttpServer::Session::Dispatch(
    const http::request<http::string_body>& req, bool* method_not_allowed) {
  if (req.method() != http::verb::get && req.method() != http::verb::head) {
    *method_not_allowed = true;
    return PlainResponse(405, "method not allowed\n");
  }
  HttpRequest request;
  request.method = std::string(req.method_string());
  const beast::string_view target = req.target();
  const size_t q = target.find('?');
  request.path = std::string(target.substr(0, q));
  request.authorization = std::string(req[http::field::authorization]);
  if (q != beast::string_view::npos) {
    request.query = std::string(target.substr(q + 1));
  }
  Handler handler = server_->Find(request.path);
  if (!handler) return PlainResponse(404, "not found\n");
  try {
    return handler(request);
  } catch (const std::exception& e) {
    return PlainResponse(500,
                         std::string("handler failed: ") + e.what() + "\n");
  } catch (...) {
    return PlainResponse(500, "handler failed\n");
  }
}

void HttpServer::Session::SendError(int status, const std::string& body) {
  response_ = {};
  response_.version(11);
  response_.result(static_cast<unsigned>(status));
  response_.set(http::field::server, "gaptrain");
  response_.set(http::field::content_type, "text/plain; charset=utf-8");
  response_.body() = body;
  response_.prepare_payload();
  response_.keep_alive(false);
  Write(/*close=*/true);
}

void HttpServer::Session::Write(bool close) {
  stream_.expires_after(options().read_timeout);
  http::async_write(
      stream_, response_,
      [self = shared_from_this(), close](beast::error_code ec, size_t) {
        self->OnWrite(close, ec);
      });
}

void HttpServer::Session::OnWrite(bool close, beast::error_code ec) {
  if (ec) {
    beast::error_code ignored;
    stream_.socket().close(ignored);
    return;
  }
  if (close) return Linger();
  ReadRequest();
}

void HttpServer::Session::Linger() {
  beast::error_code ec;
  stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
  if (ec) {
    stream_.socket().close(ec);
    return;
  }
  stream_.expires_after(
      std::min<std::chrono::milliseconds>(kLingerTime, options().read_timeout));
  Drain();
}

void HttpServer::Session::Drain() {
  stream_.async_read_some(
      asio::buffer(drain_buffer_),
      [self = shared_from_this()](beast::error_code ec, size_t n) {
        self->drained_ += n;
        if (ec || self->drained_ > kLingerMaxBytes) {
          beast::error_code ignored;
          self->stream_.socket().close(ignored);
          return;
        }
        self->Drain();
      });
}

HttpServer::HttpServer(const Options& options) : options_(options) {}

HttpServer::~HttpServer() { Stop(); }

Status HttpServer::Start(const std::string& address, uint16_t port,
                         std::unique_ptr<HttpServer>* server) {
  return Start(address, port, Options(), server);
}

Status HttpServer::Start(const std::string& address, uint16_t port,
                         const Options& options,
                         std::unique_ptr<HttpServer>* server) {
  const std::string where = HostPort(address, port);
  if (options.read_timeout.count() <= 0) {
    return Status::InvalidArgument("HTTP server read_timeout must be positive");
  }
  if (options.max_header_bytes == 0 || options.max_header_bytes > (1u << 30)) {
    return Status::InvalidArgument(
        "HTTP server max_header_bytes must be in [1, 2^30]");
  }
  try {
    std::unique_ptr<HttpServer> s(new HttpServer(options));
    auto impl = std::make_unique<Impl>(s.get());

    beast::error_code ec;
    tcp::endpoint endpoint;
    const asio::ip::address ip = asio::ip::make_address(address, ec);
    if (!ec) {
      endpoint = tcp::endpoint(ip, port);
    } else {
      tcp::resolver resolver(impl->ioc_);
      auto results = resolver.resolve(address, std::to_string(port),
                                      tcp::resolver::passive, ec);
      if (ec || results.empty()) {
        return Status::InvalidArgument(
            "HTTP server address '" + address +
            "' is neither an IP address "
            "nor a resolvable host name" +
            (ec ? ": " + ec.message() : std::string()));
      }
      endpoint = results.begin()->endpoint();
    }

    tcp::acceptor& acceptor = impl->acceptor_;
    acceptor.open(endpoint.protocol(), ec);
    if (ec) {
      return Status::Internal("cannot open a socket for HTTP server " + where +
                              ": " + ec.message());
    }
    SetCloseOnExec(acceptor);
    // Lets a restarted service rebind while old connections sit in
    // TIME_WAIT; on Linux it never lets two listeners share a port.
    acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
    acceptor.bind(endpoint, ec);
    if (ec) {
      return Status::Unavailable("cannot bind HTTP server to " + where + ": " +
                                 ec.message());
    }
    acceptor.listen(asio::socket_base::max_listen_connections, ec);
    if (ec) {
      return Status::Unavailable("cannot listen on " + where + ": " +
                                 ec.message());
    }
    const tcp::endpoint bound = acceptor.local_endpoint(ec);
    if (ec) {
      return Status::Internal("cannot read the bound port of " + where + ": " +
                              ec.message());
    }
    s->port_ = bound.port();

    impl->Accept();
    Impl* raw = impl.get();
    s->impl_ = std::move(impl);
    s->thread_ = std::thread([raw] {
      for (;;) {
        try {
          raw->ioc_.run();
          return;  // stopped
        } catch (const std::exception& e) {
          // Handlers catch their own errors; this is a last resort that
          // keeps the endpoint alive.
          std::fprintf(stderr, "HttpServer: unexpected exception: %s\n",
                       e.what());
        } catch (...) {
          std::fprintf(stderr, "HttpServer: unexpected exception\n");
        }
      }
    });
    *server = std::move(s);
    return Status::OK();
  } catch (const std::exception& e) {
    return Status::Internal("cannot start HTTP server on " + where + ": " +
                            e.what());
  }
}

void HttpServer::Handle(const std::string& path, Handler handler) {
  std::lock_guard<std::mutex> lock(handlers_mu_);
  handlers_[path] = std::move(handler);
}

HttpServer::Handler HttpServer::Find(const std::string& path) const {
  std::lock_guard<std::mutex> lock(handlers_mu_);
  auto it = handlers_.find(path);
  return it == handlers_.end() ? Handler() : it->second;
}

void HttpServer::Stop() {
  std::lock_guard<std::mutex> lock(stop_mu_);
  if (!impl_) return;
  impl_->ioc_.stop();
  if (thread_.joinable()) thread_.join();
  // Closes the acceptor, then destroys the io_context, whose pending
  // operations own the sessions: every connection closes here.
  impl_.reset();
}

}  // namespace gaptrain
