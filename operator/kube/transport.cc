#include "operator/kube/transport.h"

#include <boost/asio/buffer.hpp>
#include <boost/beast/http.hpp>
#include <utility>

namespace gaptrain {
namespace kube {

namespace http = boost::beast::http;

namespace {

bool HasControlCharacters(const std::string& s) {
  for (char c : s) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return true;
  }
  return false;
}

}  // namespace

ResponseStream::~ResponseStream() = default;

Status Transport::New(const ClusterConfig& config, const Options& options,
                      std::unique_ptr<Transport>* transport) {
  std::shared_ptr<const Endpoint> endpoint;
  GAPTRAIN_RETURN_IF_ERROR(NewEndpoint(config, &endpoint));
  transport->reset(new Transport(std::move(endpoint), config, options));
  return Status::OK();
}

Transport::Transport(std::shared_ptr<const Endpoint> endpoint, const ClusterConfig& config,
                     const Options& options)
    : endpoint_(std::move(endpoint)),
      options_(options),
      host_port_(EndpointHostPort(*endpoint_)),
      token_(config.token, config.token_file) {}

Status Transport::Serialize(const HttpCall& call, std::string* bytes) {
  const std::string target = EndpointBasePath(*endpoint_) + call.target;
  if (call.method.empty() || HasControlCharacters(call.method) ||
      call.method.find(' ') != std::string::npos || target.empty() || target[0] != '/' ||
      HasControlCharacters(target) || target.find(' ') != std::string::npos ||
      HasControlCharacters(call.content_type)) {
    return Status::InvalidArgument("not a valid HTTP request: " + call.method + " " + target);
  }
  std::string token;
  GAPTRAIN_RETURN_IF_ERROR(token_.Current(&token));
  if (HasControlCharacters(token)) {
    return Status::Unauthenticated("the bearer token holds control characters");
  }
  std::string out = call.method + " " + target + " HTTP/1.1\r\n";
  out += "Host: " + host_port_ + "\r\n";
  out += "User-Agent: " + options_.user_agent + "\r\n";
  out += "Accept: application/json\r\n";
  if (!token.empty()) out += "Authorization: Bearer " + token + "\r\n";
  if (!call.content_type.empty()) out += "Content-Type: " + call.content_type + "\r\n";
  if (!call.body.empty() || call.method == "POST" || call.method == "PUT" ||
      call.method == "PATCH") {
    out += "Content-Length: " + std::to_string(call.body.size()) + "\r\n";
  }
  out += "\r\n";
  out += call.body;
  *bytes = std::move(out);
  return Status::OK();
}

Status Transport::Exchange(Connection* connection, const std::string& request,
                           Clock::time_point deadline, HttpReply* reply, bool* keep_alive,
                           bool* any_bytes) {
  *keep_alive = false;
  *any_bytes = false;
  GAPTRAIN_RETURN_IF_ERROR(connection->Write(request, deadline));
  http::response_parser<http::string_body> parser;
  parser.eager(true);
  parser.header_limit(1u << 20);
  parser.body_limit(options_.max_response_bytes);
  std::string pending;
  for (;;) {
    if (!pending.empty()) {
      boost::beast::error_code ec;
      const size_t used = parser.put(boost::asio::buffer(pending.data(), pending.size()), ec);
      pending.erase(0, used);
      if (ec == http::error::body_limit) {
        return Status::DataLoss("response from " + host_port_ + " is larger than " +
                                std::to_string(options_.max_response_bytes) + " bytes");
      }
      if (ec && ec != http::error::need_more) {
        return Status::DataLoss("malformed HTTP response from " + host_port_ + ": " +
                                ec.message());
      }
      if (parser.is_done()) break;
      if (!ec && used > 0) continue;
    }
    bool eof = false;
    const size_t before = pending.size();
    GAPTRAIN_RETURN_IF_ERROR(connection->ReadSome(deadline, &pending, &eof));
    if (pending.size() > before) *any_bytes = true;
    if (eof) {
      boost::beast::error_code ec;
      if (parser.is_header_done()) parser.put_eof(ec);  // (it asserts otherwise)
      if (!ec && parser.is_done()) break;
      return Status::Unavailable(host_port_ + " closed the connection before a complete response" +
                                 (*any_bytes ? " (truncated)" : ""));
    }
  }
  const auto& message = parser.get();
  reply->status = static_cast<int>(message.result_int());
  reply->content_type = std::string(message[http::field::content_type]);
  reply->body = message.body();
  reply->warnings.clear();
  for (const auto& field : message) {
    if (field.name() == http::field::warning) {
      reply->warnings.push_back(WarningText(std::string(field.value())));
    }
  }
  *keep_alive = message.keep_alive() && pending.empty();
  return Status::OK();
}

std::string WarningText(const std::string& header_value) {
  const size_t open = header_value.find('"');
  if (open == std::string::npos) return header_value;
  std::string text;
  for (size_t i = open + 1; i < header_value.size(); ++i) {
    const char c = header_value[i];
    if (c == '"') return text;
    if (c == '\\' && i + 1 < header_value.size()) {
      text += header_value[++i];
    } else {
      text += c;
    }
  }
  return header_value;  // no closing quote: not a quoted string
}

std::unique_ptr<Connection> Transport::TakeIdle() {
  std::lock_guard<std::mutex> lock(mu_);
  while (!idle_.empty()) {
    std::unique_ptr<Connection> c = std::move(idle_.back());
    idle_.pop_back();
    if (c->Reusable()) return c;
  }
  return nullptr;
}

void Transport::PutIdle(std::unique_ptr<Connection> connection) {
  std::lock_guard<std::mutex> lock(mu_);
  if (shutdown_.cancelled() || idle_.size() >= options_.max_idle_connections) return;
  idle_.push_back(std::move(connection));
}

Status Transport::RoundTrip(const HttpCall& call, Clock::time_point deadline,
                            Cancellation* cancel, HttpReply* reply) {
  std::string request;
  GAPTRAIN_RETURN_IF_ERROR(Serialize(call, &request));
  for (int attempt = 0;; ++attempt) {
    std::unique_ptr<Connection> connection = TakeIdle();
    const bool reused = connection != nullptr;
    if (!reused) connection = std::make_unique<Connection>(endpoint_);
    Status s;
    bool keep_alive = false;
    bool any_bytes = false;
    {
      Connection* c = connection.get();
      CancelScope scope(&shutdown_, cancel, [c] { c->Cancel(); });
      if (!connection->connected()) s = connection->Connect(deadline);
      if (s.ok()) s = Exchange(c, request, deadline, reply, &keep_alive, &any_bytes);
    }
    if (s.ok()) {
      if (keep_alive && !connection->cancelled()) PutIdle(std::move(connection));
      return s;
    }
    // The server may have closed the idle connection just as we sent.
    const bool stale = reused && !any_bytes && s.code() == Status::Code::kUnavailable;
    if (stale && attempt == 0 && call.method == "GET") continue;
    return s;
  }
}

Status Transport::OpenStream(const HttpCall& call, Clock::time_point deadline,
                             Cancellation* cancel, std::unique_ptr<ResponseStream>* stream) {
  std::string request;
  GAPTRAIN_RETURN_IF_ERROR(Serialize(call, &request));
  std::unique_ptr<ResponseStream> opened(new ResponseStream());
  opened->connection_ = std::make_unique<Connection>(endpoint_);
  Connection* c = opened->connection_.get();
  opened->scope_ = std::make_unique<CancelScope>(&shutdown_, cancel, [c] { c->Cancel(); });
  GAPTRAIN_RETURN_IF_ERROR(c->Connect(deadline));
  GAPTRAIN_RETURN_IF_ERROR(c->Write(request, deadline));
  *stream = std::move(opened);
  return Status::OK();
}

void Transport::Shutdown() {
  shutdown_.Cancel();
  std::lock_guard<std::mutex> lock(mu_);
  idle_.clear();
}

}  // namespace kube
}  // namespace gaptrain
