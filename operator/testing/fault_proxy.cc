#include "operator/testing/fault_proxy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <deque>
#include <limits>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>
#include <utility>

#include "operator/kube/cluster_config.h"

namespace gaptrain {
namespace kube_testing {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = boost::beast::http;
namespace ssl = boost::asio::ssl;
using tcp = boost::asio::ip::tcp;

namespace {

constexpr uint32_t kMaxHeaderBytes = 1 << 20;
// Above kube-apiserver's own 3 MiB, so that its 413 is what clients meet.
constexpr uint64_t kMaxRequestBodyBytes = 8 << 20;
constexpr size_t kRelayBufferBytes = 16 * 1024;
constexpr size_t kMaxLogEntries = 100000;

// kube-apiserver v1.26's answer to a watch from a resourceVersion older
// than its watch window, as recorded in ../shared/k8s/recorded/
// watch-too-old.http: these header fields (then Date, which is now's, and
// Transfer-Encoding), one chunk with this line, and the terminating chunk.
constexpr char kExpiredWatchHead[] =
    "HTTP/1.1 200 OK\r\n"
    "Audit-Id: 5239bcb2-6b1b-4943-87a2-4048a6151de2\r\n"
    "Cache-Control: no-cache, private\r\n"
    "Content-Type: application/json\r\n"
    "X-Kubernetes-Pf-Flowschema-Uid: 0e845eef-1ddf-4c62-b084-9a58a4bc575a\r\n"
    "X-Kubernetes-Pf-Prioritylevel-Uid: 7c5851b7-3ff8-4a6b-a7c2-ca7ef6842466\r\n";
constexpr char kExpiredWatchEvent[] =
    R"json({"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},)json"
    R"json("status":"Failure","message":"too old resource version: 1 (213)",)json"
    R"json("reason":"Expired","code":410}})json"
    "\n";
constexpr char kLastChunk[] = "0\r\n\r\n";

std::string HttpDate() {
  const time_t now = ::time(nullptr);
  struct tm utc;
  gmtime_r(&now, &utc);
  char buf[64];
  std::strftime(buf, sizeof(buf), "%a, %d %b %Y %H:%M:%S GMT", &utc);
  return buf;
}

std::string ChunkHeader(size_t size) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%zx\r\n", size);
  return buf;
}

// The bytes of the expired watch's response.
std::string ExpiredWatchResponse() {
  const std::string event = kExpiredWatchEvent;
  return std::string(kExpiredWatchHead) + "Date: " + HttpDate() +
         "\r\nTransfer-Encoding: chunked\r\n\r\n" + ChunkHeader(event.size()) + event + "\r\n" +
         kLastChunk;
}

// The header's contract: the reasons a client's retry logic looks at.
const char* FaultReason(int code) {
  switch (code) {
    case 429: return "TooManyRequests";
    case 503: return "ServiceUnavailable";
    default: return "InternalError";
  }
}

// A metav1.Status in kube-apiserver's key order.
std::string FaultStatusJson(int code, const std::string& message) {
  nlohmann::ordered_json status;
  status["kind"] = "Status";
  status["apiVersion"] = "v1";
  status["metadata"] = nlohmann::ordered_json::object();
  status["status"] = "Failure";
  status["message"] = message;
  status["reason"] = FaultReason(code);
  if (code == 429) status["details"] = {{"retryAfterSeconds", 1}};
  status["code"] = code;
  return status.dump();
}

// kube-apiserver parses ?watch= with Go's strconv.ParseBool.
bool IsWatchQuery(const std::string& query) {
  size_t start = 0;
  while (start <= query.size()) {
    size_t end = query.find('&', start);
    if (end == std::string::npos) end = query.size();
    const std::string param = query.substr(start, end - start);
    if (param.compare(0, 6, "watch=") == 0) {
      const std::string v = param.substr(6);
      return v == "1" || v == "t" || v == "T" || v == "true" || v == "TRUE" || v == "True";
    }
    start = end + 1;
  }
  return false;
}

bool FaultMatches(const ProxyFault& fault, const std::string& method, const std::string& path) {
  if (!fault.method.empty() && fault.method != method) return false;
  if (!fault.path.empty() && fault.path.back() == '*') {
    return path.compare(0, fault.path.size() - 1, fault.path, 0, fault.path.size() - 1) == 0;
  }
  return path == fault.path;
}

// The status line and fields of `header` as HTTP/1.1 bytes.
std::string HeaderBytes(const http::response_header<>& header) {
  std::string reason(header.reason());
  if (reason.empty()) reason = std::string(http::obsolete_reason(header.result()));
  std::string out = "HTTP/1.1 " + std::to_string(header.result_int()) + " " + reason + "\r\n";
  for (const auto& field : header) {
    out += std::string(field.name_string()) + ": " + std::string(field.value()) + "\r\n";
  }
  return out + "\r\n";
}

// One thread's io_context for the synchronous sockets; never run.
asio::io_context& SocketContext() {
  static asio::io_context* context = new asio::io_context(1);
  return *context;
}

// One client connection, served by its own thread. The sockets are used
// only by that thread; other threads (Stop, DropAllConnections,
// CloseAllWatches) only ::shutdown() them, under State::mu, and the thread
// closes them under State::mu too, so a descriptor is never shut down
// after it was closed (and perhaps reused).
struct ProxyConnection {
  explicit ProxyConnection(int fd) : client(SocketContext()) {
    beast::error_code ec;
    client.assign(tcp::v4(), fd, ec);
  }
  tcp::socket client;
  beast::flat_buffer client_buffer;
  // Opened at the first request to forward; reopened when it broke.
  std::optional<ssl::stream<tcp::socket>> upstream;
  beast::flat_buffer upstream_buffer;
  std::thread thread;
  std::atomic<bool> finished{false};

  // Guarded by State::mu.
  bool open = true;               // `client` not closed yet
  int upstream_fd = -1;           // `upstream`'s socket while open
  bool relaying_watch = false;    // a watch's events are being relayed
  bool close_watch = false;       // CloseAllWatches() asked to end it
  bool dropped = false;           // DropAllConnections(): reset, not close
};

}  // namespace

struct FaultProxy::State {
  kube::ServerUrl upstream_url;
  std::vector<tcp::endpoint> upstream_endpoints;
  bool upstream_is_ip = false;
  ssl::context tls{ssl::context::tls_client};
  uint16_t port = 0;
  int listen_fd = -1;
  std::thread accept_thread;
  std::mutex stop_mu;  // serialises Stop()

  mutable std::mutex mu;
  bool stopping = false;
  std::vector<ProxyFault> faults;
  int expire_watches = 0;
  // Entries are updated in place when the answer is known, so the log
  // keeps the order requests came in.
  std::deque<std::shared_ptr<ProxiedRequest>> log;
  std::map<uint64_t, std::shared_ptr<ProxyConnection>> connections;
  uint64_t next_connection = 1;

  Status Listen();
  void AcceptLoop();
  void ReapConnections();
  void Serve(ProxyConnection* c);
  // Each returns whether the client connection stays open for the next request.
  bool Forward(ProxyConnection* c, http::request<http::string_body>& request, bool watch,
               ProxiedRequest* record);
  bool RelayBody(ProxyConnection* c, http::response_parser<http::buffer_body>& parser, bool watch,
                 bool chunked, bool* upstream_ok);
  bool ConnectUpstream(ProxyConnection* c);
  bool UpstreamReusable(ProxyConnection* c);
  void CloseUpstream(ProxyConnection* c);
  bool WaitForUpstream(ProxyConnection* c);
  bool WatchCloseRequested(ProxyConnection* c);
  void Finish(ProxyConnection* c);

  std::shared_ptr<ProxiedRequest> Record(ProxiedRequest request);
  void Answered(ProxiedRequest* record, int code, bool injected);
  bool TakeFault(const std::string& method, const std::string& path, ProxyFault* fault);
  bool TakeExpiredWatch();
};

Status FaultProxy::Start(const Options& options, std::unique_ptr<FaultProxy>* proxy) {
  auto state = std::make_unique<State>();
  Status s = kube::ParseServerUrl(options.upstream_url, &state->upstream_url);
  if (!s.ok()) return Status::InvalidArgument("FaultProxy upstream_url: " + s.message());
  const kube::ServerUrl& url = state->upstream_url;
  if (!url.tls || !url.base_path.empty()) {
    return Status::InvalidArgument("FaultProxy upstream_url '" + options.upstream_url +
                                   "' must be https://HOST:PORT");
  }
  if (options.upstream_ca_pem.empty()) {
    return Status::InvalidArgument("FaultProxy needs upstream_ca_pem");
  }

  beast::error_code ec;
  const asio::ip::address ip = asio::ip::make_address(url.host, ec);
  state->upstream_is_ip = !ec;
  if (state->upstream_is_ip) {
    state->upstream_endpoints.emplace_back(ip, url.port);
  } else {
    tcp::resolver resolver(SocketContext());
    auto results = resolver.resolve(url.host, std::to_string(url.port), ec);
    if (ec) return Status::Unavailable("FaultProxy: resolve " + url.host + ": " + ec.message());
    for (const auto& r : results) state->upstream_endpoints.push_back(r.endpoint());
  }

  SSL_CTX_set_min_proto_version(state->tls.native_handle(), TLS1_2_VERSION);
  state->tls.set_verify_mode(ssl::verify_peer);
  state->tls.add_certificate_authority(asio::buffer(options.upstream_ca_pem), ec);
  if (ec) return Status::InvalidArgument("FaultProxy upstream_ca_pem: " + ec.message());

  GAPTRAIN_RETURN_IF_ERROR(state->Listen());
  State* raw = state.get();
  state->accept_thread = std::thread([raw] { raw->AcceptLoop(); });
  proxy->reset(new FaultProxy(std::move(state)));
  return Status::OK();
}

FaultProxy::FaultProxy(std::unique_ptr<State> state) : state_(std::move(state)) {}

FaultProxy::~FaultProxy() { Stop(); }

std::string FaultProxy::url() const {
  return "http://127.0.0.1:" + std::to_string(state_->port);
}

Status FaultProxy::State::Listen() {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status::Internal(std::string("FaultProxy socket: ") + std::strerror(errno));
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::listen(fd, SOMAXCONN) != 0) {
    Status s = Status::Unavailable(std::string("FaultProxy cannot listen on 127.0.0.1: ") +
                                   std::strerror(errno));
    ::close(fd);
    return s;
  }
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  port = ntohs(addr.sin_port);
  listen_fd = fd;
  return Status::OK();
}

void FaultProxy::State::AcceptLoop() {
  for (;;) {
    const int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
    const int accept_errno = errno;
    std::unique_lock<std::mutex> lock(mu);
    if (stopping) {
      if (fd >= 0) ::close(fd);
      return;
    }
    lock.unlock();
    if (fd < 0) {
      if (accept_errno == EINTR || accept_errno == ECONNABORTED) continue;
      ::poll(nullptr, 0, 20);  // out of descriptors or similar: do not spin
      continue;
    }
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    ReapConnections();
    auto connection = std::make_shared<ProxyConnection>(fd);
    lock.lock();
    if (stopping) return;  // Stop() shuts down only the connections it sees
    connections[next_connection++] = connection;
    ProxyConnection* c = connection.get();
    connection->thread = std::thread([this, c] {
      Serve(c);
      Finish(c);
    });
  }
}

void FaultProxy::State::ReapConnections() {
  std::vector<std::shared_ptr<ProxyConnection>> done;
  {
    std::lock_guard<std::mutex> lock(mu);
    for (auto it = connections.begin(); it != connections.end();) {
      if (it->second->finished) {
        done.push_back(std::move(it->second));
        it = connections.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (auto& c : done) c->thread.join();
}

void FaultProxy::State::Finish(ProxyConnection* c) {
  std::lock_guard<std::mutex> lock(mu);
  beast::error_code ignored;
  if (c->dropped) {
    // Closing with a zero linger sends a reset, as a crashed server would.
    const linger reset{1, 0};
    ::setsockopt(c->client.native_handle(), SOL_SOCKET, SO_LINGER, &reset, sizeof(reset));
  }
  c->client.close(ignored);
  c->open = false;
  if (c->upstream) {
    c->upstream->lowest_layer().close(ignored);
    c->upstream_fd = -1;
  }
  c->finished = true;
}

void FaultProxy::State::Serve(ProxyConnection* c) {
  for (;;) {
    http::request_parser<http::string_body> parser;
    parser.header_limit(kMaxHeaderBytes);
    parser.body_limit(kMaxRequestBodyBytes);
    beast::error_code ec;
    http::read(c->client, c->client_buffer, parser, ec);
    if (ec) {
      // A request the proxy cannot forward is answered here and not logged.
      if (ec == http::error::body_limit || ec == http::error::header_limit) {
        http::response<http::string_body> error{
            ec == http::error::body_limit ? http::status::payload_too_large
                                          : http::status::request_header_fields_too_large,
            11};
        error.set(http::field::content_type, "text/plain; charset=utf-8");
        error.body() = "FaultProxy: request too large\n";
        error.keep_alive(false);
        error.prepare_payload();
        http::write(c->client, error, ec);
      }
      return;  // end of stream, reset, malformed, or shut down
    }
    http::request<http::string_body>& request = parser.get();
    const std::string target(request.target());
    const size_t q = target.find('?');
    ProxiedRequest entry;
    entry.method = std::string(request.method_string());
    entry.path = target.substr(0, q);
    entry.query = q == std::string::npos ? "" : target.substr(q + 1);
    entry.watch = IsWatchQuery(entry.query);
    const std::shared_ptr<ProxiedRequest> record = Record(entry);
    const bool keep_alive = request.keep_alive();

    // The log says how a request was answered before the client can see
    // the answer, so a test that got it finds the code there.
    ProxyFault fault;
    if (TakeFault(entry.method, entry.path, &fault)) {
      http::response<http::string_body> response{static_cast<http::status>(fault.code), 11};
      response.set(http::field::cache_control, "no-cache, private");
      response.set(http::field::content_type, "application/json");
      response.set(http::field::date, HttpDate());
      if (fault.code == 429) response.set(http::field::retry_after, "1");
      if (request.method() != http::verb::head) {
        response.body() = FaultStatusJson(fault.code, fault.message);
      }
      response.prepare_payload();
      response.keep_alive(keep_alive);
      Answered(record.get(), fault.code, true);
      http::write(c->client, response, ec);
      if (ec) return;
    } else if (entry.watch && TakeExpiredWatch()) {
      Answered(record.get(), 200, true);
      asio::write(c->client, asio::buffer(ExpiredWatchResponse()), ec);
      if (ec) return;
    } else if (!Forward(c, request, entry.watch, record.get())) {
      return;
    }
    if (!keep_alive) return;
  }
}

bool FaultProxy::State::Forward(ProxyConnection* c, http::request<http::string_body>& request,
                                bool watch, ProxiedRequest* record) {
  if (!UpstreamReusable(c)) {
    CloseUpstream(c);
    // Unreachable, or its certificate failed verification: the client sees
    // its connection closed without an answer, as from a dead server.
    if (!ConnectUpstream(c)) return false;
  }
  request.set(http::field::host, upstream_url.HostPort());
  const bool head = request.method() == http::verb::head;
  beast::error_code ec;
  http::write(*c->upstream, request, ec);
  http::response_parser<http::buffer_body> parser;
  parser.header_limit(kMaxHeaderBytes);
  // A watch never ends by size. (Not boost::none: Beast 1.81 compares a
  // Content-Length with the empty optional and refuses every such body.)
  parser.body_limit(std::numeric_limits<std::uint64_t>::max());
  if (head) parser.skip(true);
  if (!ec) http::read_header(*c->upstream, c->upstream_buffer, parser, ec);
  if (ec) {
    CloseUpstream(c);
    return false;
  }
  const int code = static_cast<int>(parser.get().result_int());
  const bool streaming_watch = watch && code == 200;
  if (streaming_watch) {
    // Before the client learns that its watch started.
    std::lock_guard<std::mutex> lock(mu);
    c->relaying_watch = true;
    c->close_watch = false;
  }
  Answered(record, code, false);
  asio::write(c->client, asio::buffer(HeaderBytes(parser.get().base())), ec);
  bool upstream_ok = false;
  const bool client_ok =
      !ec && RelayBody(c, parser, streaming_watch, parser.chunked() && !head, &upstream_ok);
  if (streaming_watch) {
    std::lock_guard<std::mutex> lock(mu);
    c->relaying_watch = false;
  }
  const bool keep_alive = parser.get().keep_alive();
  if (!upstream_ok || !keep_alive) CloseUpstream(c);
  // A body that ends with the connection cannot be followed by another.
  return client_ok && keep_alive && !parser.need_eof();
}

// Relays the body as it arrives: a chunked body chunk by chunk (the chunks
// carry the same bytes, perhaps split differently), any other as it is.
// *upstream_ok tells whether the upstream's response ended as it should.
//
// The upstream socket is non-blocking meanwhile, so that a read that would
// block comes back, and the thread then waits in poll() for the upstream or
// for the client to leave (a watch the client gave up on ends now, not at
// its timeoutSeconds). Polling before a blocking read would not do:
// asio::ssl::stream keeps bytes it has read from the socket where poll()
// cannot see them, and an event would wait for the next.
bool FaultProxy::State::RelayBody(ProxyConnection* c,
                                  http::response_parser<http::buffer_body>& parser, bool watch,
                                  bool chunked, bool* upstream_ok) {
  beast::error_code ec;
  auto write_last_chunk = [&] {
    asio::write(c->client, asio::buffer(kLastChunk, sizeof(kLastChunk) - 1), ec);
    return !ec;
  };
  tcp::socket& upstream_socket = c->upstream->next_layer();
  upstream_socket.non_blocking(true, ec);
  if (ec) return false;
  while (!parser.is_done()) {
    // CloseAllWatches() shut the upstream side down: end the response as a
    // server's timeout does. (A watch that is not chunked cannot end early.)
    if (watch && WatchCloseRequested(c)) return chunked && write_last_chunk();
    char buffer[kRelayBufferBytes];
    parser.get().body().data = buffer;
    parser.get().body().size = sizeof(buffer);
    beast::error_code read_error;
    http::read_some(*c->upstream, c->upstream_buffer, parser, read_error);
    const size_t n = sizeof(buffer) - parser.get().body().size;
    if (n > 0) {
      if (chunked) {
        const std::string size = ChunkHeader(n);
        const std::array<asio::const_buffer, 3> chunk = {
            asio::buffer(size), asio::buffer(buffer, n), asio::buffer("\r\n", 2)};
        asio::write(c->client, chunk, ec);
      } else {
        asio::write(c->client, asio::buffer(buffer, n), ec);
      }
      if (ec) return false;
    }
    if (read_error == asio::error::would_block || read_error == asio::error::try_again) {
      if (!WaitForUpstream(c)) return false;  // the client left, or was dropped
    } else if (read_error && read_error != http::error::need_buffer) {
      if (watch && WatchCloseRequested(c)) return chunked && write_last_chunk();
      return false;  // the upstream broke: so does the client's response
    }
  }
  upstream_socket.non_blocking(false, ec);
  *upstream_ok = !ec;
  return !chunked || write_last_chunk();
}

// Blocks until the upstream socket is readable (or shut down). False when
// the client hung up (or was shut down) first.
bool FaultProxy::State::WaitForUpstream(ProxyConnection* c) {
  pollfd fds[2] = {{c->upstream->lowest_layer().native_handle(), POLLIN, 0},
                   {c->client.native_handle(), POLLRDHUP, 0}};
  for (;;) {
    const int n = ::poll(fds, 2, -1);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return true;  // the read reports the problem
    return (fds[1].revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) == 0;
  }
}

bool FaultProxy::State::WatchCloseRequested(ProxyConnection* c) {
  std::lock_guard<std::mutex> lock(mu);
  return c->close_watch;
}

// An idle upstream connection is fit for the next request when nothing
// is waiting on it: a server that closed it made it readable.
bool FaultProxy::State::UpstreamReusable(ProxyConnection* c) {
  if (!c->upstream || c->upstream_buffer.size() > 0 ||
      SSL_pending(c->upstream->native_handle()) > 0) {
    return false;
  }
  pollfd p{c->upstream->lowest_layer().native_handle(), POLLIN, 0};
  return ::poll(&p, 1, 0) == 0;
}

bool FaultProxy::State::ConnectUpstream(ProxyConnection* c) {
  c->upstream_buffer.clear();
  beast::error_code ec;
  // Each address in turn on a socket of its own, registered before
  // connecting so that Stop() and DropAllConnections() can interrupt the
  // handshake (a loopback connect does not block).
  for (const tcp::endpoint& endpoint : upstream_endpoints) {
    CloseUpstream(c);
    c->upstream.emplace(SocketContext(), tls);
    tcp::socket& socket = c->upstream->next_layer();
    socket.open(endpoint.protocol(), ec);
    if (ec) continue;
    {
      std::lock_guard<std::mutex> lock(mu);
      if (stopping || c->dropped) return false;
      c->upstream_fd = socket.native_handle();
    }
    socket.connect(endpoint, ec);
    if (!ec) break;
  }
  if (ec || !c->upstream) return false;
  c->upstream->next_layer().set_option(tcp::no_delay(true), ec);

  SSL* ssl_handle = c->upstream->native_handle();
  X509_VERIFY_PARAM* param = SSL_get0_param(ssl_handle);
  if (upstream_is_ip) {
    X509_VERIFY_PARAM_set1_ip_asc(param, upstream_url.host.c_str());
  } else {
    SSL_set_tlsext_host_name(ssl_handle, upstream_url.host.c_str());  // SNI: names only
    X509_VERIFY_PARAM_set1_host(param, upstream_url.host.c_str(), 0);
  }
  c->upstream->handshake(ssl::stream_base::client, ec);
  return !ec;
}

void FaultProxy::State::CloseUpstream(ProxyConnection* c) {
  if (!c->upstream) return;
  {
    std::lock_guard<std::mutex> lock(mu);
    beast::error_code ignored;
    c->upstream->lowest_layer().close(ignored);
    c->upstream_fd = -1;
  }
  c->upstream.reset();
  c->upstream_buffer.clear();
}

std::shared_ptr<ProxiedRequest> FaultProxy::State::Record(ProxiedRequest request) {
  auto record = std::make_shared<ProxiedRequest>(std::move(request));
  std::lock_guard<std::mutex> lock(mu);
  log.push_back(record);
  if (log.size() > kMaxLogEntries) log.pop_front();
  return record;
}

void FaultProxy::State::Answered(ProxiedRequest* record, int code, bool injected) {
  std::lock_guard<std::mutex> lock(mu);
  record->code = code;
  record->injected = injected;
}

bool FaultProxy::State::TakeFault(const std::string& method, const std::string& path,
                                  ProxyFault* fault) {
  std::lock_guard<std::mutex> lock(mu);
  for (auto it = faults.begin(); it != faults.end(); ++it) {
    if (!FaultMatches(*it, method, path)) continue;
    *fault = *it;
    if (--it->count <= 0) faults.erase(it);
    return true;
  }
  return false;
}

bool FaultProxy::State::TakeExpiredWatch() {
  std::lock_guard<std::mutex> lock(mu);
  if (expire_watches <= 0) return false;
  --expire_watches;
  return true;
}

void FaultProxy::Stop() {
  State& s = *state_;
  std::lock_guard<std::mutex> stop_lock(s.stop_mu);
  if (s.listen_fd < 0) return;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    s.stopping = true;
  }
  ::shutdown(s.listen_fd, SHUT_RDWR);  // wakes accept()
  s.accept_thread.join();
  ::close(s.listen_fd);
  s.listen_fd = -1;
  std::map<uint64_t, std::shared_ptr<ProxyConnection>> connections;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    for (auto& [id, c] : s.connections) {
      if (c->open) ::shutdown(c->client.native_handle(), SHUT_RDWR);
      if (c->upstream_fd >= 0) ::shutdown(c->upstream_fd, SHUT_RDWR);
    }
    connections.swap(s.connections);
  }
  for (auto& [id, c] : connections) c->thread.join();
}

void FaultProxy::InjectFault(const ProxyFault& fault) {
  std::lock_guard<std::mutex> lock(state_->mu);
  if (fault.count > 0) state_->faults.push_back(fault);
}

void FaultProxy::ClearFaults() {
  std::lock_guard<std::mutex> lock(state_->mu);
  state_->faults.clear();
}

void FaultProxy::ExpireNextWatches(int count) {
  std::lock_guard<std::mutex> lock(state_->mu);
  state_->expire_watches += count;
}

void FaultProxy::CloseAllWatches() {
  std::lock_guard<std::mutex> lock(state_->mu);
  for (auto& [id, c] : state_->connections) {
    if (!c->relaying_watch) continue;
    c->close_watch = true;
    // Wakes the relay, which then ends the client's response cleanly.
    if (c->upstream_fd >= 0) ::shutdown(c->upstream_fd, SHUT_RDWR);
  }
}

void FaultProxy::DropAllConnections() {
  std::lock_guard<std::mutex> lock(state_->mu);
  for (auto& [id, c] : state_->connections) {
    if (!c->open) continue;
    c->dropped = true;
    // Wakes the connection's thread wherever it blocks; it then closes the
    // socket with a reset (Finish).
    ::shutdown(c->client.native_handle(), SHUT_RDWR);
    if (c->upstream_fd >= 0) ::shutdown(c->upstream_fd, SHUT_RDWR);
  }
}

std::vector<ProxiedRequest> FaultProxy::RequestLog() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  std::vector<ProxiedRequest> out;
  out.reserve(state_->log.size());
  for (const auto& r : state_->log) out.push_back(*r);
  return out;
}

void FaultProxy::ClearRequestLog() {
  std::lock_guard<std::mutex> lock(state_->mu);
  state_->log.clear();
}

}  // namespace kube_testing
}  // namespace gaptrain
