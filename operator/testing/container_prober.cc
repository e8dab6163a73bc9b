#include "operator/testing/container_prober.h"

#include "operator/testing/json_fields.h"
#include "services/net/http_client.h"

namespace gaptrain {
namespace kube_testing {

using nlohmann::json;

namespace {

Status ParsePort(const json& handler, const json& container, const std::string& field,
                 uint16_t* port) {
  const json* value = FindField(handler, {"port"});
  if (value != nullptr && value->is_number_integer()) {
    const int64_t n = value->get<int64_t>();
    if (n < 1 || n > 65535) {
      return Status::InvalidArgument(field + ".port: Invalid value: " + std::to_string(n) +
                                     ": must be between 1 and 65535, inclusive");
    }
    *port = static_cast<uint16_t>(n);
    return Status::OK();
  }
  if (value != nullptr && value->is_string()) {
    const std::string name = value->get<std::string>();
    for (const json& p : ListField(container, {"ports"})) {
      if (StringField(p, {"name"}) == name) {
        const int64_t n = IntField(p, {"containerPort"});
        if (n >= 1 && n <= 65535) {
          *port = static_cast<uint16_t>(n);
          return Status::OK();
        }
      }
    }
    return Status::InvalidArgument(field + ".port: Invalid value: \"" + name +
                                   "\": not the name of a container port");
  }
  return Status::InvalidArgument(field + ".port: Required value");
}

Status ParseSeconds(const json& probe, const char* key, int64_t fallback, int64_t minimum,
                    const std::string& field, std::chrono::seconds* out) {
  const int64_t v = IntField(probe, {key}, fallback);
  if (v < minimum) {
    return Status::InvalidArgument(field + "." + key + ": Invalid value: " + std::to_string(v) +
                                   ": must be at least " + std::to_string(minimum));
  }
  *out = std::chrono::seconds(v);
  return Status::OK();
}

}  // namespace

Status ParseProbe(const json& probe, const json& container, const std::string& pod_ip,
                  const std::string& field, ProbeSpec* spec) {
  *spec = ProbeSpec();
  if (!probe.is_object()) return Status::InvalidArgument(field + ": must be an object");
  if (const json* http = FindField(probe, {"httpGet"})) {
    spec->kind = ProbeSpec::Kind::kHttpGet;
    const std::string scheme = StringField(*http, {"scheme"});
    if (!scheme.empty() && scheme != "HTTP") {
      return Status::InvalidArgument(field + ".httpGet.scheme: Unsupported value: \"" + scheme +
                                     "\": the test node probes HTTP only");
    }
    GAPTRAIN_RETURN_IF_ERROR(ParsePort(*http, container, field + ".httpGet", &spec->port));
    spec->host = StringField(*http, {"host"});
    const std::string path = StringField(*http, {"path"});
    spec->path = path.empty() ? "/" : (path[0] == '/' ? path : "/" + path);
    for (const json& header : ListField(*http, {"httpHeaders"})) {
      const std::string name = StringField(header, {"name"});
      const std::string value = StringField(header, {"value"});
      if (name.empty() || name.find_first_of(":\r\n") != std::string::npos ||
          value.find_first_of("\r\n") != std::string::npos) {
        return Status::InvalidArgument(field + ".httpGet.httpHeaders: Invalid value: \"" + name +
                                       "\"");
      }
      spec->headers.emplace_back(name, value);
    }
  } else if (const json* tcp = FindField(probe, {"tcpSocket"})) {
    spec->kind = ProbeSpec::Kind::kTcpSocket;
    GAPTRAIN_RETURN_IF_ERROR(ParsePort(*tcp, container, field + ".tcpSocket", &spec->port));
    spec->host = StringField(*tcp, {"host"});
  } else {
    return Status::InvalidArgument(field + ": the test node runs httpGet and tcpSocket probes "
                                   "only (not exec or grpc)");
  }
  if (spec->host.empty()) spec->host = pod_ip;
  GAPTRAIN_RETURN_IF_ERROR(
      ParseSeconds(probe, "initialDelaySeconds", 0, 0, field, &spec->initial_delay));
  GAPTRAIN_RETURN_IF_ERROR(ParseSeconds(probe, "periodSeconds", 10, 1, field, &spec->period));
  GAPTRAIN_RETURN_IF_ERROR(ParseSeconds(probe, "timeoutSeconds", 1, 1, field, &spec->timeout));
  spec->success_threshold = static_cast<int>(IntField(probe, {"successThreshold"}, 1));
  spec->failure_threshold = static_cast<int>(IntField(probe, {"failureThreshold"}, 3));
  if (spec->success_threshold < 1 || spec->failure_threshold < 1) {
    return Status::InvalidArgument(field + ": successThreshold and failureThreshold must be at "
                                   "least 1");
  }
  return Status::OK();
}

ContainerProber::ContainerProber(const ProbeSpec& spec, bool initial_result,
                                 std::function<void()> on_change)
    : spec_(spec), on_change_(std::move(on_change)), result_(initial_result) {
  thread_ = std::thread([this] { Run(); });
}

ContainerProber::~ContainerProber() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  stop_cv_.notify_all();
  thread_.join();
}

bool ContainerProber::ProbeOnce() const {
  const double timeout = static_cast<double>(spec_.timeout.count());
  std::unique_ptr<HttpConnection> connection;
  if (!HttpConnection::Connect(spec_.host, spec_.port, timeout, &connection).ok()) return false;
  if (spec_.kind == ProbeSpec::Kind::kTcpSocket) return true;
  std::string request = "GET " + spec_.path + " HTTP/1.1\r\nHost: " + spec_.host + ":" +
                        std::to_string(spec_.port) +
                        "\r\nUser-Agent: kube-probe/1.26\r\nAccept: */*\r\nConnection: close\r\n";
  for (const auto& [name, value] : spec_.headers) request += name + ": " + value + "\r\n";
  request += "\r\n";
  HttpClientResponse response;
  if (!connection->Send(request).ok() || !connection->ReadResponse(&response).ok()) return false;
  return response.status >= 200 && response.status < 400;
}

void ContainerProber::Run() {
  auto next = std::chrono::steady_clock::now() + spec_.initial_delay;
  int successes = 0;
  int failures = 0;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (stop_cv_.wait_until(lock, next, [this] { return stopping_; })) return;
    }
    next = std::chrono::steady_clock::now() + spec_.period;
    const bool ok = ProbeOnce();
    successes = ok ? successes + 1 : 0;
    failures = ok ? 0 : failures + 1;
    const bool before = result_;
    if (ok && successes >= spec_.success_threshold) result_ = true;
    if (!ok && failures >= spec_.failure_threshold) result_ = false;
    if (result_ != before && on_change_) on_change_();
  }
}

}  // namespace kube_testing
}  // namespace gaptrain
