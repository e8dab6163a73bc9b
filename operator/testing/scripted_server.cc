#include "operator/testing/scripted_server.h"

#include <arpa/inet.h>
#include <signal.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/buffer.hpp>
#include <boost/beast/http.hpp>
#include <cerrno>
#include <cstring>
#include <utility>

namespace gaptrain {
namespace kube {

namespace http = boost::beast::http;

namespace {

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string PercentDecode(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && HexValue(s[i + 1]) >= 0 &&
        HexValue(s[i + 2]) >= 0) {
      out += static_cast<char>(HexValue(s[i + 1]) * 16 + HexValue(s[i + 2]));
      i += 2;
    } else {
      out += s[i] == '+' ? ' ' : s[i];
    }
  }
  return out;
}

std::string CommonName(SSL* ssl) {
  X509* peer = SSL_get1_peer_certificate(ssl);
  if (peer == nullptr) return "";
  char cn[256] = {0};
  X509_NAME_get_text_by_NID(X509_get_subject_name(peer), NID_commonName, cn, sizeof(cn));
  X509_free(peer);
  return cn;
}

std::string Response(const ScriptedReply& reply) {
  if (!reply.raw.empty()) return reply.raw;
  std::string out = "HTTP/1.1 " + std::to_string(reply.status) + " " +
                    std::string(http::obsolete_reason(static_cast<http::status>(reply.status))) +
                    "\r\n";
  out += "Content-Type: " + reply.content_type + "\r\n";
  out += "Content-Length: " + std::to_string(reply.body.size()) + "\r\n";
  if (reply.close) out += "Connection: close\r\n";
  return out + "\r\n" + reply.body;
}

}  // namespace

std::map<std::string, std::string> DecodeQuery(const std::string& query) {
  std::map<std::string, std::string> out;
  size_t start = 0;
  while (start < query.size()) {
    size_t end = query.find('&', start);
    if (end == std::string::npos) end = query.size();
    const std::string pair = query.substr(start, end - start);
    const size_t eq = pair.find('=');
    if (!pair.empty()) {
      out[PercentDecode(pair.substr(0, eq))] =
          eq == std::string::npos ? "" : PercentDecode(pair.substr(eq + 1));
    }
    start = end + 1;
  }
  return out;
}

Status ScriptedServer::Start(const Options& options, std::unique_ptr<ScriptedServer>* server) {
  // OpenSSL writes to a socket the client closed raise SIGPIPE otherwise.
  ::signal(SIGPIPE, SIG_IGN);
  std::unique_ptr<ScriptedServer> s(new ScriptedServer());
  s->options_ = options;
  if (!options.cert_file.empty()) {
    SSL_CTX* ctx = SSL_CTX_new(TLS_server_method());
    s->ssl_ctx_ = ctx;
    if (SSL_CTX_use_certificate_chain_file(ctx, options.cert_file.c_str()) != 1 ||
        SSL_CTX_use_PrivateKey_file(ctx, options.key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
      return Status::InvalidArgument("scripted server: cannot load " + options.cert_file);
    }
    if (!options.client_ca_file.empty()) {
      if (SSL_CTX_load_verify_locations(ctx, options.client_ca_file.c_str(), nullptr) != 1) {
        return Status::InvalidArgument("scripted server: cannot load " + options.client_ca_file);
      }
      SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
    }
  }
  s->listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s->listen_fd_ < 0) return Status::Internal(std::string("socket: ") + std::strerror(errno));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (::bind(s->listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::listen(s->listen_fd_, 64) != 0 ||
      ::getsockname(s->listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    return Status::Unavailable(std::string("scripted server: ") + std::strerror(errno));
  }
  s->port_ = ntohs(addr.sin_port);
  s->accept_thread_ = std::thread([raw = s.get()] { raw->AcceptLoop(); });
  *server = std::move(s);
  return Status::OK();
}

ScriptedServer::~ScriptedServer() {
  Stop();
  if (listen_fd_ >= 0) ::close(listen_fd_);
  if (ssl_ctx_ != nullptr) SSL_CTX_free(static_cast<SSL_CTX*>(ssl_ctx_));
}

std::string ScriptedServer::url() const {
  return std::string(ssl_ctx_ != nullptr ? "https" : "http") + "://127.0.0.1:" +
         std::to_string(port_);
}

void ScriptedServer::Push(ScriptedReply reply) {
  std::lock_guard<std::mutex> lock(mu_);
  queue_.push_back(std::move(reply));
}

void ScriptedServer::SetHandler(Handler handler) {
  std::lock_guard<std::mutex> lock(mu_);
  handler_ = std::move(handler);
}

std::vector<ReceivedRequest> ScriptedServer::requests() const {
  std::lock_guard<std::mutex> lock(mu_);
  return requests_;
}

bool ScriptedServer::WaitForRequests(size_t count, std::chrono::milliseconds timeout) const {
  std::unique_lock<std::mutex> lock(mu_);
  return changed_.wait_for(lock, timeout, [&] { return requests_.size() >= count; });
}

int ScriptedServer::connections() const {
  std::lock_guard<std::mutex> lock(mu_);
  return connections_;
}

int ScriptedServer::failed_handshakes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return failed_handshakes_;
}

void ScriptedServer::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ && !accept_thread_.joinable()) return;
    stopping_ = true;
    for (int fd : open_fds_) ::shutdown(fd, SHUT_RDWR);
    changed_.notify_all();
  }
  if (listen_fd_ >= 0) ::shutdown(listen_fd_, SHUT_RDWR);
  if (accept_thread_.joinable()) accept_thread_.join();
  std::vector<std::thread> threads;
  {
    std::lock_guard<std::mutex> lock(mu_);
    threads.swap(threads_);
  }
  for (std::thread& t : threads) t.join();
}

void ScriptedServer::AcceptLoop() {
  for (;;) {
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0 && errno == EINTR) continue;
    if (fd < 0) return;  // Stop() shut the socket down
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) {
      ::close(fd);
      return;
    }
    const int connection = ++connections_;
    open_fds_.push_back(fd);
    threads_.emplace_back([this, fd, connection] { Serve(fd, connection); });
  }
}

ScriptedReply ScriptedServer::NextReply(const ReceivedRequest& request) {
  Handler handler;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!queue_.empty()) {
      ScriptedReply reply = std::move(queue_.front());
      queue_.pop_front();
      return reply;
    }
    handler = handler_;
  }
  if (handler) return handler(request);
  ScriptedReply reply;
  reply.status = 500;
  reply.body = R"({"kind":"Status","apiVersion":"v1","status":"Failure","message":"no scripted reply","reason":"InternalError","code":500})";
  return reply;
}

void ScriptedServer::Serve(int fd, int connection) {
  SSL* ssl = nullptr;
  std::string common_name;
  std::string server_name;
  auto receive = [&](std::string* out) {
    char buf[16384];
    const int n = ssl != nullptr ? SSL_read(ssl, buf, sizeof(buf))
                                 : static_cast<int>(::recv(fd, buf, sizeof(buf), 0));
    if (n <= 0) return false;
    out->append(buf, static_cast<size_t>(n));
    return true;
  };
  auto send_all = [&](const std::string& bytes) {
    size_t sent = 0;
    while (sent < bytes.size()) {
      const int n = ssl != nullptr
                        ? SSL_write(ssl, bytes.data() + sent, static_cast<int>(bytes.size() - sent))
                        : static_cast<int>(::send(fd, bytes.data() + sent, bytes.size() - sent,
                                                  MSG_NOSIGNAL));
      if (n <= 0) return false;
      sent += static_cast<size_t>(n);
    }
    return true;
  };

  bool serving = true;
  if (ssl_ctx_ != nullptr) {
    ssl = SSL_new(static_cast<SSL_CTX*>(ssl_ctx_));
    SSL_set_fd(ssl, fd);
    if (SSL_accept(ssl) != 1) {
      ERR_clear_error();
      std::lock_guard<std::mutex> lock(mu_);
      ++failed_handshakes_;
      serving = false;
    } else {
      common_name = CommonName(ssl);
      const char* sni = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);
      if (sni != nullptr) server_name = sni;
    }
  }

  std::string pending;
  while (serving) {
    http::request_parser<http::string_body> parser;
    parser.eager(true);
    parser.body_limit(64u << 20);
    while (!parser.is_done()) {
      if (!pending.empty()) {
        boost::beast::error_code ec;
        const size_t used = parser.put(boost::asio::buffer(pending.data(), pending.size()), ec);
        pending.erase(0, used);
        if (ec && ec != http::error::need_more) serving = false;
        if (!serving || parser.is_done()) break;
        if (!ec && used > 0) continue;
      }
      if (!receive(&pending)) {
        serving = false;
        break;
      }
    }
    if (!serving) break;

    const auto& message = parser.get();
    ReceivedRequest request;
    request.method = std::string(message.method_string());
    request.target = std::string(message.target());
    const size_t q = request.target.find('?');
    request.path = request.target.substr(0, q);
    if (q != std::string::npos) request.query = DecodeQuery(request.target.substr(q + 1));
    for (const auto& field : message) {
      std::string name(field.name_string());
      std::transform(name.begin(), name.end(), name.begin(), ::tolower);
      request.headers[name] = std::string(field.value());
    }
    request.body = message.body();
    request.client_common_name = common_name;
    request.server_name = server_name;
    request.connection = connection;
    {
      std::lock_guard<std::mutex> lock(mu_);
      requests_.push_back(request);
      changed_.notify_all();
    }

    const ScriptedReply reply = NextReply(request);
    if (reply.delay.count() > 0) {
      std::unique_lock<std::mutex> lock(mu_);
      if (changed_.wait_for(lock, reply.delay, [this] { return stopping_; })) break;
    }
    if (reply.hang) {
      if (!reply.raw.empty()) send_all(reply.raw);
      std::string ignored;
      while (receive(&ignored)) {
      }
      break;
    }
    const std::string bytes = Response(reply);
    if (reply.cut_after < bytes.size()) {
      send_all(bytes.substr(0, reply.cut_after));
      break;
    }
    if (!send_all(bytes) || reply.close || reply.vanish) break;
  }

  if (ssl != nullptr) SSL_free(ssl);
  std::lock_guard<std::mutex> lock(mu_);
  open_fds_.erase(std::remove(open_fds_.begin(), open_fds_.end(), fd), open_fds_.end());
  ::close(fd);
}

}  // namespace kube
}  // namespace gaptrain
