#include "operator/kube/connection.h"

#include <fcntl.h>
#include <openssl/ssl.h>
#include <openssl/x509_vfy.h>
#include <openssl/x509v3.h>
#include <poll.h>

#include <boost/asio/buffer.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/write.hpp>
#include <optional>
#include <utility>
#include <vector>

#include "operator/kube/pem.h"

namespace gaptrain {
namespace kube {

namespace asio = boost::asio;
namespace ssl = boost::asio::ssl;
using tcp = boost::asio::ip::tcp;
using ErrorCode = boost::system::error_code;

class Endpoint {
 public:
  ServerUrl url;
  std::string host_port;
  std::string verify_name;  // checked against the certificate
  bool verify_name_is_ip = false;
  // Present for https. SSL objects are created from it by many connections
  // at once, which OpenSSL allows; nothing changes it after NewEndpoint.
  mutable std::optional<ssl::context> tls;
};

Status NewEndpoint(const ClusterConfig& config, std::shared_ptr<const Endpoint>* endpoint) {
  const std::string source = config.source.empty() ? "cluster config" : config.source;
  auto fail = [&source](const std::string& what, const std::string& why) {
    return Status::InvalidArgument(source + ": " + what + ": " + why);
  };
  auto e = std::make_shared<Endpoint>();
  Status s = ParseServerUrl(config.server, &e->url);
  if (!s.ok()) return Status::InvalidArgument(source + ": " + s.message());
  e->host_port = e->url.HostPort();
  e->verify_name = config.tls_server_name.empty() ? e->url.host : config.tls_server_name;
  ErrorCode ec;
  asio::ip::make_address(e->verify_name, ec);
  e->verify_name_is_ip = !ec;
  if (!e->url.tls) {
    *endpoint = std::move(e);
    return Status::OK();
  }

  e->tls.emplace(ssl::context::tls_client);
  SSL_CTX* ctx = e->tls->native_handle();
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  if (config.insecure_skip_tls_verify) {
    SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, nullptr);
  } else {
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
    if (!config.ca_pem.empty()) {
      s = CheckCertificatesPem(config.ca_pem);
      if (!s.ok()) return fail("certificate authority", s.message());
      e->tls->add_certificate_authority(asio::buffer(config.ca_pem), ec);
      if (ec) return fail("certificate authority", ec.message() + TakeOpensslErrors());
    } else if (SSL_CTX_set_default_verify_paths(ctx) != 1) {
      return fail("system certificate authorities", TakeOpensslErrors());
    }
  }
  if (config.client_certificate_pem.empty() != config.client_key_pem.empty()) {
    return fail("client certificate", "needs both a certificate and a key");
  }
  if (!config.client_certificate_pem.empty()) {
    s = CheckCertificatesPem(config.client_certificate_pem);
    if (!s.ok()) return fail("client certificate", s.message());
    s = CheckPrivateKeyPem(config.client_key_pem);
    if (!s.ok()) return fail("client key", s.message());
    e->tls->use_certificate_chain(asio::buffer(config.client_certificate_pem), ec);
    if (ec) return fail("client certificate", ec.message() + TakeOpensslErrors());
    e->tls->use_private_key(asio::buffer(config.client_key_pem), ssl::context::pem, ec);
    if (ec) {
      // The key parsed (checked above), so OpenSSL refused the pair.
      TakeOpensslErrors();
      return fail("client key", "does not match the client certificate (" + ec.message() + ")");
    }
    if (SSL_CTX_check_private_key(ctx) != 1) {
      return fail("client key", "does not match the client certificate");
    }
  }
  *endpoint = std::move(e);
  return Status::OK();
}

std::string EndpointHostPort(const Endpoint& endpoint) { return endpoint.host_port; }
const std::string& EndpointBasePath(const Endpoint& endpoint) { return endpoint.url.base_path; }

class Connection::Impl {
 public:
  explicit Impl(std::shared_ptr<const Endpoint> e)
      : endpoint(std::move(e)), resolver(ioc), plain(ioc) {
    if (endpoint->tls) tls.emplace(ioc, *endpoint->tls);
  }

  tcp::socket& Socket() { return tls ? tls->next_layer() : plain; }

  // Closes the socket, which ends the operation in progress (its handler
  // then runs with operation_aborted). Runs on the owner's thread.
  void Abort() {
    resolver.cancel();
    ErrorCode ignored;
    Socket().close(ignored);
  }

  // Runs the io_context until the operation that set up `done` completes,
  // or until `deadline`: then aborts it and waits for its handler. False on
  // the deadline.
  bool RunUntil(Clock::time_point deadline, const bool& done) {
    ioc.restart();
    while (!done) {
      if (ioc.run_one_until(deadline) > 0) continue;
      if (done) break;
      if (Clock::now() < deadline) {
        ioc.restart();
        continue;
      }
      Abort();
      ioc.restart();
      while (!done) ioc.run_one();
      return false;
    }
    return true;
  }

  std::shared_ptr<const Endpoint> endpoint;
  asio::io_context ioc{1};  // declared before the sockets, destroyed after them
  tcp::resolver resolver;
  tcp::socket plain;
  std::optional<ssl::stream<tcp::socket>> tls;
};

Connection::Connection(std::shared_ptr<const Endpoint> endpoint)
    : impl_(std::make_unique<Impl>(std::move(endpoint))) {}

Connection::~Connection() = default;

void Connection::Cancel() {
  cancelled_.store(true);
  Impl* impl = impl_.get();
  asio::post(impl->ioc, [impl] { impl->Abort(); });
}

Status Connection::Connect(Clock::time_point deadline) {
  const Endpoint& e = *impl_->endpoint;
  auto failed = [&](const std::string& what, bool in_time, const ErrorCode& ec) {
    broken_ = true;
    if (cancelled_) return Status(Status::Code::kCancelled, what + " " + e.host_port + ": cancelled");
    if (!in_time) {
      return Status(Status::Code::kDeadlineExceeded,
                    what + " " + e.host_port + ": no answer before the deadline");
    }
    return Status::Unavailable(what + " " + e.host_port + ": " + ec.message());
  };
  if (cancelled_) return failed("connect to", true, {});

  std::vector<tcp::endpoint> targets;
  ErrorCode ec;
  const asio::ip::address ip = asio::ip::make_address(e.url.host, ec);
  if (!ec) {
    targets.emplace_back(ip, e.url.port);
  } else {
    bool done = false;
    tcp::resolver::results_type results;
    impl_->resolver.async_resolve(
        e.url.host, std::to_string(e.url.port),
        [&](const ErrorCode& result, tcp::resolver::results_type found) {
          done = true;
          ec = result;
          results = std::move(found);
        });
    const bool in_time = impl_->RunUntil(deadline, done);
    if (!in_time || ec || cancelled_) return failed("resolve", in_time, ec);
    for (const auto& r : results) targets.push_back(r.endpoint());
  }

  bool done = false;
  asio::async_connect(impl_->Socket(), targets,
                      [&](const ErrorCode& result, const tcp::endpoint&) {
                        done = true;
                        ec = result;
                      });
  bool in_time = impl_->RunUntil(deadline, done);
  if (!in_time || ec || cancelled_) return failed("connect to", in_time, ec);
  const int fd = impl_->Socket().native_handle();
  ::fcntl(fd, F_SETFD, ::fcntl(fd, F_GETFD) | FD_CLOEXEC);
  impl_->Socket().set_option(tcp::no_delay(true), ec);

  if (impl_->tls) {
    SSL* ssl = impl_->tls->native_handle();
    if (!e.verify_name_is_ip) SSL_set_tlsext_host_name(ssl, e.verify_name.c_str());
    X509_VERIFY_PARAM* param = SSL_get0_param(ssl);
    X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
    if (e.verify_name_is_ip) {
      X509_VERIFY_PARAM_set1_ip_asc(param, e.verify_name.c_str());
    } else {
      X509_VERIFY_PARAM_set1_host(param, e.verify_name.c_str(), 0);
    }
    done = false;
    impl_->tls->async_handshake(ssl::stream_base::client, [&](const ErrorCode& result) {
      done = true;
      ec = result;
    });
    in_time = impl_->RunUntil(deadline, done);
    if (in_time && ec && !cancelled_) {
      broken_ = true;
      std::string why = ec.message();
      const long verify = SSL_get_verify_result(ssl);
      if (verify != X509_V_OK) {
        why += " (" + std::string(X509_verify_cert_error_string(verify)) + ")";
      }
      TakeOpensslErrors();
      return Status::Unavailable("TLS handshake with " + e.host_port + ": " + why);
    }
    if (!in_time || ec || cancelled_) return failed("TLS handshake with", in_time, ec);
  }
  connected_ = true;
  return Status::OK();
}

Status Connection::Write(const std::string& bytes, Clock::time_point deadline) {
  const std::string& peer = impl_->endpoint->host_port;
  if (cancelled_) return Status(Status::Code::kCancelled, "send to " + peer + ": cancelled");
  bool done = false;
  ErrorCode ec;
  auto handler = [&](const ErrorCode& result, size_t) {
    done = true;
    ec = result;
  };
  if (impl_->tls) {
    asio::async_write(*impl_->tls, asio::buffer(bytes), handler);
  } else {
    asio::async_write(impl_->plain, asio::buffer(bytes), handler);
  }
  const bool in_time = impl_->RunUntil(deadline, done);
  if (in_time && !ec && !cancelled_) return Status::OK();
  broken_ = true;
  if (cancelled_) return Status(Status::Code::kCancelled, "send to " + peer + ": cancelled");
  if (!in_time) {
    return Status(Status::Code::kDeadlineExceeded,
                  "send to " + peer + ": not done before the deadline");
  }
  return Status::Unavailable("send to " + peer + ": " + ec.message());
}

Status Connection::ReadSome(Clock::time_point deadline, std::string* out, bool* eof) {
  const std::string& peer = impl_->endpoint->host_port;
  *eof = false;
  if (cancelled_) return Status(Status::Code::kCancelled, "read from " + peer + ": cancelled");
  char buffer[16384];
  bool done = false;
  ErrorCode ec;
  size_t n = 0;
  auto handler = [&](const ErrorCode& result, size_t bytes) {
    done = true;
    ec = result;
    n = bytes;
  };
  if (impl_->tls) {
    impl_->tls->async_read_some(asio::buffer(buffer), handler);
  } else {
    impl_->plain.async_read_some(asio::buffer(buffer), handler);
  }
  const bool in_time = impl_->RunUntil(deadline, done);
  out->append(buffer, n);
  if (cancelled_) {
    broken_ = true;
    return Status(Status::Code::kCancelled, "read from " + peer + ": cancelled");
  }
  if (!in_time) {
    broken_ = true;
    return Status(Status::Code::kDeadlineExceeded,
                  "read from " + peer + ": no data before the deadline");
  }
  if (ec == asio::error::eof || ec == ssl::error::stream_truncated ||
      ec == asio::error::connection_reset) {
    broken_ = true;
    *eof = true;
    return Status::OK();
  }
  if (ec) {
    broken_ = true;
    return Status::Unavailable("read from " + peer + ": " + ec.message());
  }
  return Status::OK();
}

bool Connection::Reusable() {
  if (!connected_ || broken_ || cancelled_) return false;
  if (impl_->tls && SSL_pending(impl_->tls->native_handle()) > 0) return false;
  pollfd p{impl_->Socket().native_handle(), POLLIN, 0};
  return ::poll(&p, 1, 0) == 0;
}

}  // namespace kube
}  // namespace gaptrain
