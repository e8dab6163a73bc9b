#include "operator/testing/fake_api_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>

#include "operator/testing/kind_rules.h"
#include "operator/testing/yaml_to_json.h"
#include "operator/testing/json_fields.h"

namespace gaptrain {
namespace kube_testing {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = boost::beast::http;
using nlohmann::json;
using tcp = boost::asio::ip::tcp;

namespace {

constexpr uint32_t kMaxHeaderBytes = 1 << 20;
const char kTestManager[] = "fake-apiserver-test";

std::string HttpDate() {
  const time_t now = ::time(nullptr);
  struct tm utc;
  gmtime_r(&now, &utc);
  char buf[64];
  std::strftime(buf, sizeof(buf), "%a, %d %b %Y %H:%M:%S GMT", &utc);
  return buf;
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// A Status code from the body of an error response.
Status StatusFromResponse(const std::string& what, const ApiResponse& response) {
  const json body = json::parse(response.body, nullptr, false);
  const std::string message =
      what + ": " + (StringField(body, {"message"}).empty() ? response.body
                                                            : StringField(body, {"message"}));
  switch (response.status) {
    case 400:
    case 422: return Status::InvalidArgument(message);
    case 404: return Status::NotFound(message);
    case 409:
      return body.is_object() && StringField(body, {"reason"}) == "AlreadyExists"
                 ? Status::AlreadyExists(message)
                 : Status(Status::Code::kAborted, message);
    default: return Status::Internal(message);
  }
}

}  // namespace

struct FakeApiServer::Connection {
  Connection(asio::io_context& ioc, int fd) : socket(ioc) {
    beast::error_code ec;
    socket.assign(tcp::v4(), fd, ec);
  }
  tcp::socket socket;
  std::thread thread;
  std::atomic<bool> finished{false};
};

std::string KubeconfigFor(const std::string& server_url, const std::string& token,
                          const std::string& namespace_name, const std::string& ca_file) {
  std::string config =
      "apiVersion: v1\n"
      "kind: Config\n"
      "clusters:\n"
      "- name: fake\n"
      "  cluster:\n"
      "    server: " + server_url + "\n";
  if (!ca_file.empty()) config += "    certificate-authority: " + ca_file + "\n";
  config +=
      "contexts:\n"
      "- name: fake\n"
      "  context:\n"
      "    cluster: fake\n"
      "    user: fake\n"
      "    namespace: " + namespace_name + "\n"
      "current-context: fake\n"
      "preferences: {}\n"
      "users:\n"
      "- name: fake\n";
  config += token.empty() ? "  user: {}\n" : "  user:\n    token: " + token + "\n";
  return config;
}

namespace {

ObjectStore::Options StoreOptions(const FakeApiServer::Options& options) {
  ObjectStore::Options o;
  o.watch_history_size = options.watch_history_size;
  o.collect_dangling_dependents = options.collect_dangling_dependents;
  o.random_seed = options.random_seed;
  return o;
}

ApiHandler::Options HandlerOptions(const FakeApiServer::Options& options) {
  ApiHandler::Options o;
  o.bearer_token = options.bearer_token;
  o.resources.bookmark_interval = options.bookmark_interval;
  o.resources.default_watch_timeout = options.default_watch_timeout;
  return o;
}

// One thread's io_context for the synchronous sockets; never run.
asio::io_context& SocketContext() {
  static asio::io_context* context = new asio::io_context(1);
  return *context;
}

}  // namespace

FakeApiServer::FakeApiServer(const Options& options)
    : options_(options),
      store_(&registry_, StoreOptions(options)),
      handler_(&registry_, &store_, HandlerOptions(options)) {}

FakeApiServer::~FakeApiServer() { Stop(); }

Status FakeApiServer::Start(const Options& options, std::unique_ptr<FakeApiServer>* server) {
  if (options.max_body_bytes == 0) {
    return Status::InvalidArgument("FakeApiServer max_body_bytes must be positive");
  }
  std::unique_ptr<FakeApiServer> s(new FakeApiServer(options));
  if (options.tls_cert_file.empty() != options.tls_key_file.empty()) {
    return Status::InvalidArgument("FakeApiServer needs both tls_cert_file and tls_key_file, or "
                                   "neither");
  }
  if (!options.tls_cert_file.empty()) {
    s->tls_ = std::make_unique<asio::ssl::context>(asio::ssl::context::tls_server);
    beast::error_code ec;
    s->tls_->use_certificate_chain_file(options.tls_cert_file, ec);
    if (ec) {
      return Status::InvalidArgument("tls_cert_file '" + options.tls_cert_file + "': " + ec.message());
    }
    s->tls_->use_private_key_file(options.tls_key_file, asio::ssl::context::pem, ec);
    if (ec) {
      return Status::InvalidArgument("tls_key_file '" + options.tls_key_file + "': " + ec.message());
    }
  }
  for (size_t i = 0; i < options.custom_resource_definitions.size(); ++i) {
    json crd;
    Status parsed = YamlToJson(options.custom_resource_definitions[i], &crd);
    if (!parsed.ok()) {
      return Status::InvalidArgument("custom_resource_definitions[" + std::to_string(i) +
                                     "]: " + parsed.message());
    }
    Status created = s->Create(crd);
    if (!created.ok()) {
      return Status::InvalidArgument("custom_resource_definitions[" + std::to_string(i) +
                                     "]: " + created.message());
    }
  }
  GAPTRAIN_RETURN_IF_ERROR(s->Listen());
  s->handler_.set_server_address(options.address + ":" + std::to_string(s->port_));
  FakeApiServer* raw = s.get();
  s->accept_thread_ = std::thread([raw] { raw->AcceptLoop(); });
  *server = std::move(s);
  return Status::OK();
}

Status FakeApiServer::Listen() {
  const std::string where = options_.address + ":" + std::to_string(options_.port);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(options_.port);
  const std::string ip = options_.address == "localhost" ? "127.0.0.1" : options_.address;
  if (::inet_pton(AF_INET, ip.c_str(), &addr.sin_addr) != 1) {
    return Status::InvalidArgument("FakeApiServer address '" + options_.address +
                                   "' is not an IPv4 address");
  }
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status::Internal(std::string("socket: ") + std::strerror(errno));
  const int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::listen(fd, SOMAXCONN) != 0) {
    Status s = Status::Unavailable("cannot listen on " + where + ": " + std::strerror(errno));
    ::close(fd);
    return s;
  }
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  port_ = ntohs(addr.sin_port);
  listen_fd_ = fd;
  return Status::OK();
}

void FakeApiServer::AcceptLoop() {
  for (;;) {
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (stopping_) {
      if (fd >= 0) ::close(fd);
      return;
    }
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      // Out of descriptors or similar: back off instead of spinning.
      ::poll(nullptr, 0, 20);
      continue;
    }
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    ReapConnections();
    auto connection = std::make_shared<Connection>(SocketContext(), fd);
    std::lock_guard<std::mutex> lock(connections_mu_);
    if (stopping_) return;  // Stop() shuts down only what it can see
    connections_[next_connection_++] = connection;
    connection->thread = std::thread([this, connection] {
      Serve(connection);
      connection->finished = true;
    });
  }
}

void FakeApiServer::ReapConnections() {
  std::vector<std::shared_ptr<Connection>> done;
  {
    std::lock_guard<std::mutex> lock(connections_mu_);
    for (auto it = connections_.begin(); it != connections_.end();) {
      if (it->second->finished) {
        done.push_back(it->second);
        it = connections_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (auto& c : done) {
    if (c->thread.joinable()) c->thread.join();
  }
}

void FakeApiServer::Serve(const std::shared_ptr<Connection>& connection) {
  tcp::socket& socket = connection->socket;
  beast::error_code ec;
  if (tls_ == nullptr) {
    ServeStream(socket);
  } else {
    asio::ssl::stream<tcp::socket&> stream(socket, *tls_);
    stream.handshake(asio::ssl::stream_base::server, ec);
    if (!ec) {
      ServeStream(stream);
      stream.shutdown(ec);
    }
  }
  socket.shutdown(tcp::socket::shutdown_both, ec);
}

template <class Stream>
void FakeApiServer::ServeStream(Stream& stream) {
  const int fd = beast::get_lowest_layer(stream).native_handle();
  beast::flat_buffer buffer;
  auto client_gone = [this, fd] {
    if (stopping_) return true;
    pollfd p{fd, POLLRDHUP, 0};
    return ::poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
  };
  uint64_t audit = 0;
  auto audit_id = [&] {
    char id[48];
    std::snprintf(id, sizeof(id), "%08x-0000-4000-8000-%012llx",
                  static_cast<unsigned>(port_), static_cast<unsigned long long>(++audit));
    return std::string(id);
  };
  for (;;) {
    http::request_parser<http::string_body> parser;
    parser.header_limit(kMaxHeaderBytes);
    parser.body_limit(options_.max_body_bytes);
    beast::error_code ec;
    http::read(stream, buffer, parser, ec);
    if (ec == http::error::end_of_stream || stopping_) break;
    if (ec) {
      http::response<http::string_body> error;
      error.version(11);
      error.keep_alive(false);
      if (ec == http::error::body_limit) {
        error.result(413);
        error.set(http::field::content_type, "application/json");
        error.body() = ApiError::RequestEntityTooLarge(options_.max_body_bytes).ToJsonText();
      } else if (ec == http::error::header_limit) {
        error.result(431);
        error.set(http::field::content_type, "text/plain; charset=utf-8");
        error.body() = "431 Request Header Fields Too Large";
      } else if (ec.category() == beast::error_code(http::error::bad_method).category()) {
        error.result(400);
        error.set(http::field::content_type, "text/plain; charset=utf-8");
        error.body() = "400 Bad Request";
      } else {
        break;  // reset, or the client left mid-request: nobody to answer
      }
      error.prepare_payload();
      beast::error_code ignored;
      http::write(stream, error, ignored);
      break;
    }
    http::request<http::string_body>& req = parser.get();
    ApiRequest request;
    request.method = std::string(req.method_string());
    request.target = std::string(req.target());
    for (const auto& field : req) {
      const std::string name = Lower(std::string(field.name_string()));
      auto it = request.headers.find(name);
      if (it == request.headers.end()) {
        request.headers[name] = std::string(field.value());
      } else {
        it->second += ", " + std::string(field.value());
      }
    }
    request.body = std::move(req.body());
    bool keep_alive = req.keep_alive();
    ApiResponse response = handler_.Handle(request);

    if (response.watch) {
      std::string head = "HTTP/1.1 200 OK\r\nAudit-Id: " + audit_id() +
                         "\r\nCache-Control: no-cache, private\r\nContent-Type: " +
                         response.content_type + "\r\nDate: " + HttpDate() +
                         "\r\nTransfer-Encoding: chunked\r\n\r\n";
      asio::write(stream, asio::buffer(head), ec);
      std::string line;
      while (!ec && response.watch->NextLine(client_gone, &line)) {
        char size[32];
        std::snprintf(size, sizeof(size), "%zx\r\n", line.size());
        const std::string chunk = size + line + "\r\n";
        asio::write(stream, asio::buffer(chunk), ec);
      }
      if (ec || client_gone()) break;
      asio::write(stream, asio::buffer(std::string("0\r\n\r\n")), ec);
      if (ec) break;
    } else {
      http::response<http::string_body> res;
      res.version(req.version());
      res.result(static_cast<unsigned>(response.status));
      res.set("Audit-Id", audit_id());
      res.set(http::field::cache_control, "no-cache, private");
      res.set(http::field::content_type, response.content_type);
      res.set(http::field::date, HttpDate());
      for (const auto& [name, value] : response.headers) res.insert(name, value);
      if (request.method != "HEAD") res.body() = std::move(response.body);
      res.prepare_payload();
      res.keep_alive(keep_alive);
      http::write(stream, res, ec);
      if (ec) break;
    }
    if (!keep_alive) break;
  }
}

void FakeApiServer::Stop() {
  std::lock_guard<std::mutex> stop_lock(stop_mu_);
  if (listen_fd_ < 0) return;
  stopping_ = true;
  store_.Shutdown();
  ::shutdown(listen_fd_, SHUT_RDWR);
  if (accept_thread_.joinable()) accept_thread_.join();
  ::close(listen_fd_);
  listen_fd_ = -1;
  std::map<uint64_t, std::shared_ptr<Connection>> connections;
  {
    std::lock_guard<std::mutex> lock(connections_mu_);
    connections.swap(connections_);
  }
  for (auto& [id, c] : connections) ::shutdown(c->socket.native_handle(), SHUT_RDWR);
  for (auto& [id, c] : connections) {
    if (c->thread.joinable()) c->thread.join();
  }
}

std::string FakeApiServer::url() const {
  return std::string(tls_ != nullptr ? "https://" : "http://") + options_.address + ":" +
         std::to_string(port_);
}

std::string FakeApiServer::Kubeconfig(const std::string& namespace_name) const {
  return KubeconfigFor(url(), options_.bearer_token, namespace_name, options_.tls_cert_file);
}

ResourceTypePtr FakeApiServer::FindType(const std::string& resource, Status* error) const {
  ResourceTypePtr type = registry_.FindByName(resource);
  if (type == nullptr) *error = Status::NotFound("no resource type named \"" + resource + "\"");
  return type;
}

Status FakeApiServer::Get(const std::string& resource, const std::string& ns,
                          const std::string& name, json* object) const {
  Status error;
  ResourceTypePtr type = FindType(resource, &error);
  if (type == nullptr) return error;
  return store_.Get(*type, ns, name, object).ToStatus();
}

Status FakeApiServer::List(const std::string& resource, const std::string& ns,
                           const std::string& label_selector, std::vector<json>* objects) {
  Status error;
  ResourceTypePtr type = FindType(resource, &error);
  if (type == nullptr) return error;
  ObjectStore::ListOptions options;
  options.ns = type->namespaced ? ns : "";
  GAPTRAIN_RETURN_IF_ERROR(LabelSelector::Parse(label_selector, &options.labels));
  ObjectStore::ListResult result;
  GAPTRAIN_RETURN_IF_ERROR(store_.List(*type, options, &result).ToStatus());
  *objects = std::move(result.items);
  return Status::OK();
}

Status FakeApiServer::Create(const json& object, json* created) {
  if (!object.is_object()) return Status::InvalidArgument("the object must be a JSON object");
  const std::string api_version = StringField(object, {"apiVersion"});
  const std::string kind = StringField(object, {"kind"});
  const size_t slash = api_version.find('/');
  const std::string group = slash == std::string::npos ? "" : api_version.substr(0, slash);
  const std::string version = slash == std::string::npos ? api_version : api_version.substr(slash + 1);
  ResourceTypePtr type;
  for (const ResourceTypePtr& t : registry_.All()) {
    if (t->group == group && t->version == version && t->kind == kind) type = t;
  }
  if (type == nullptr) {
    return Status::NotFound("no resource serves kind \"" + kind + "\" in \"" + api_version + "\"");
  }
  ApiRequest http;
  http.method = "POST";
  http.body = object.dump();
  http.headers["content-type"] = "application/json";
  ResourceRequest r;
  r.verb = "create";
  r.type = type;
  if (type->namespaced) {
    r.ns = object.contains("metadata") && object["metadata"].is_object()
               ? StringField(object, {"metadata", "namespace"})
               : "";
    if (r.ns.empty()) r.ns = "default";
  }
  r.query["fieldManager"] = kTestManager;
  r.http = &http;
  ApiResponse response = handler_.resources()->Serve(r);
  if (response.status != 201) return StatusFromResponse("create " + type->key(), response);
  if (created != nullptr) *created = json::parse(response.body);
  return Status::OK();
}

Status FakeApiServer::Update(const std::string& resource, const std::string& ns,
                             const std::string& name,
                             const std::function<void(json*)>& mutate, json* updated) {
  Status error;
  ResourceTypePtr type = FindType(resource, &error);
  if (type == nullptr) return error;
  ObjectStore::WriteResult result;
  ApiError e = store_.Update(
      *type, ns, name, /*create_if_absent=*/false,
      [&](const json* current, json* next) {
        *next = *current;
        mutate(next);
        if (!next->is_object()) return ApiError::BadRequest("the mutation left no object");
        ApplyKindDefaults(*type, next);
        return ApiError();
      },
      &result);
  if (!e.ok()) return e.ToStatus();
  if (updated != nullptr) *updated = result.object;
  return Status::OK();
}

Status FakeApiServer::Delete(const std::string& resource, const std::string& ns,
                             const std::string& name, std::optional<int64_t> grace_period_seconds,
                             const std::string& propagation_policy,
                             const std::string& precondition_uid) {
  Status error;
  ResourceTypePtr type = FindType(resource, &error);
  if (type == nullptr) return error;
  ApiRequest http;
  http.method = "DELETE";
  ResourceRequest r;
  r.verb = "delete";
  r.type = type;
  r.ns = type->namespaced ? ns : "";
  r.name = name;
  if (grace_period_seconds) r.query["gracePeriodSeconds"] = std::to_string(*grace_period_seconds);
  if (!propagation_policy.empty()) r.query["propagationPolicy"] = propagation_policy;
  if (!precondition_uid.empty()) {
    http.body = json{{"kind", "DeleteOptions"},
                     {"apiVersion", "v1"},
                     {"preconditions", {{"uid", precondition_uid}}}}
                    .dump();
  }
  r.http = &http;
  ApiResponse response = handler_.resources()->Serve(r);
  if (response.status != 200) return StatusFromResponse("delete " + type->key(), response);
  return Status::OK();
}

uint64_t FakeApiServer::resource_version() const { return store_.resource_version(); }

std::string FakeApiServer::Now() const { return store_.Now(); }

bool FakeApiServer::WaitFor(const std::function<bool(const StoreView&)>& predicate,
                            std::chrono::milliseconds timeout) {
  return store_.WaitUntil(predicate, std::chrono::steady_clock::now() + timeout);
}

bool FakeApiServer::WaitForObject(const std::string& resource, const std::string& ns,
                                  const std::string& name,
                                  const std::function<bool(const json*)>& predicate,
                                  std::chrono::milliseconds timeout) {
  Status error;
  ResourceTypePtr type = FindType(resource, &error);
  if (type == nullptr) return false;
  const std::string key = type->key();
  const std::string object_ns = type->namespaced ? ns : "";
  return WaitFor([&](const StoreView& view) { return predicate(view.Get(key, object_ns, name)); },
                 timeout);
}

Status FakeApiServer::Watch(const std::string& resource, const std::string& ns,
                            const std::string& label_selector, const std::string& field_selector,
                            const std::string& resource_version,
                            std::unique_ptr<ObjectStore::Watch>* watch) {
  Status error;
  ResourceTypePtr type = FindType(resource, &error);
  if (type == nullptr) return error;
  LabelSelector labels;
  GAPTRAIN_RETURN_IF_ERROR(LabelSelector::Parse(label_selector, &labels));
  FieldSelector fields;
  GAPTRAIN_RETURN_IF_ERROR(FieldSelector::Parse(field_selector, &fields));
  for (const std::string& field : fields.Fields()) {
    std::string ignored;
    if (!SelectableField(*type, json::object(), field, &ignored)) {
      return Status::InvalidArgument("field label not supported: " + field);
    }
  }
  return store_
      .StartWatch(*type, type->namespaced ? ns : "", std::move(labels), std::move(fields),
                  resource_version, watch)
      .ToStatus();
}

std::vector<RequestRecord> FakeApiServer::RequestLog() const { return handler_.RequestLog(); }

void FakeApiServer::ClearRequestLog() { handler_.ClearRequestLog(); }

size_t FakeApiServer::CountRequests(const std::string& verb, const std::string& resource,
                                    const std::string& subresource) const {
  return handler_.CountRequests(verb, resource, subresource);
}

size_t FakeApiServer::CountWriteRequests() const {
  size_t n = 0;
  for (const char* verb : {"create", "update", "patch", "delete", "deletecollection"}) {
    n += handler_.CountRequests(verb, "");
  }
  return n;
}

void FakeApiServer::InjectFault(const Fault& fault) { handler_.InjectFault(fault); }

void FakeApiServer::ClearFaults() { handler_.ClearFaults(); }

void FakeApiServer::CloseAllWatches() { store_.CloseAllWatches(); }

void FakeApiServer::DropAllConnections() {
  std::lock_guard<std::mutex> lock(connections_mu_);
  for (auto& [id, c] : connections_) ::shutdown(c->socket.native_handle(), SHUT_RDWR);
  store_.WakeWatchers();
}

void FakeApiServer::ExpireWatchHistory() { store_.ExpireWatchHistory(); }

}  // namespace kube_testing
}  // namespace gaptrain
