#include "operator/testing/api_handler.h"

#include <utility>

#include "operator/testing/api_error.h"
#include "operator/testing/discovery.h"

namespace gaptrain {
namespace kube_testing {

namespace {

constexpr size_t kMaxLogEntries = 100000;
const char kAnonymous[] = "system:anonymous";

ApiResponse ErrorResponse(const ApiError& error) {
  ApiResponse r;
  r.status = error.code();
  r.body = error.ToJsonText();
  if (error.code() == 429 || error.code() == 503) r.headers.push_back({"Retry-After", "1"});
  return r;
}

ApiResponse DocumentResponse(const nlohmann::ordered_json& document) {
  ApiResponse r;
  r.body = document.dump();
  return r;
}

std::vector<std::string> SplitPath(const std::string& path) {
  std::vector<std::string> segments;
  size_t start = 0;
  while (start < path.size()) {
    size_t slash = path.find('/', start);
    if (slash == std::string::npos) slash = path.size();
    if (slash > start) segments.push_back(PercentDecode(path.substr(start, slash - start), false));
    start = slash + 1;
  }
  return segments;
}

bool IsPublicPath(const std::string& path) {
  return path == "/version" || path == "/healthz" || path == "/readyz" || path == "/livez";
}

}  // namespace

struct ApiHandler::Route {
  bool resource = false;
  std::string group;
  std::string version;
  std::string ns;
  std::string resource_name;
  std::string name;
  std::string subresource;
  bool valid = false;
};

ApiHandler::ApiHandler(ResourceRegistry* registry, ObjectStore* store, const Options& options)
    : registry_(registry),
      options_(options),
      resources_(registry, store, options.resources) {}

void ApiHandler::set_server_address(const std::string& address) {
  std::lock_guard<std::mutex> lock(mu_);
  server_address_ = address;
}

void ApiHandler::InjectFault(const Fault& fault) {
  std::lock_guard<std::mutex> lock(mu_);
  if (fault.count > 0) faults_.push_back(fault);
}

void ApiHandler::ClearFaults() {
  std::lock_guard<std::mutex> lock(mu_);
  faults_.clear();
}

bool ApiHandler::TakeFault(const std::string& method, const std::string& path, Fault* fault) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = faults_.begin(); it != faults_.end(); ++it) {
    if (!it->method.empty() && it->method != method) continue;
    const bool prefix = !it->path.empty() && it->path.back() == '*';
    const bool matches =
        prefix ? path.compare(0, it->path.size() - 1, it->path, 0, it->path.size() - 1) == 0
               : path == it->path;
    if (!matches) continue;
    *fault = *it;
    if (--it->count <= 0) faults_.erase(it);
    return true;
  }
  return false;
}

std::vector<RequestRecord> ApiHandler::RequestLog() const {
  std::lock_guard<std::mutex> lock(mu_);
  return std::vector<RequestRecord>(log_.begin(), log_.end());
}

void ApiHandler::ClearRequestLog() {
  std::lock_guard<std::mutex> lock(mu_);
  log_.clear();
}

size_t ApiHandler::CountRequests(const std::string& verb, const std::string& resource,
                                 const std::string& subresource) const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t n = 0;
  for (const RequestRecord& r : log_) {
    if (!verb.empty() && r.verb != verb) continue;
    if (!resource.empty() && r.resource != resource) continue;
    if (subresource != "*" && r.subresource != subresource) continue;
    ++n;
  }
  return n;
}

void ApiHandler::Record(RequestRecord record) {
  std::lock_guard<std::mutex> lock(mu_);
  log_.push_back(std::move(record));
  while (log_.size() > kMaxLogEntries) log_.pop_front();
}

ApiResponse ApiHandler::Handle(const ApiRequest& request) {
  const size_t q = request.target.find('?');
  const std::string path = request.target.substr(0, q);
  const std::string query = q == std::string::npos ? "" : request.target.substr(q + 1);
  RequestRecord record;
  record.method = request.method;
  record.path = path;
  record.query = query;
  ApiResponse response;
  try {
    response = Serve(request, path, query, &record);
  } catch (const std::exception& e) {
    // A bug here must show up as a 500 in the test, not take the server down.
    response = ErrorResponse(ApiError::InternalError(e.what()));
  }
  record.code = response.status;
  Record(std::move(record));
  return response;
}

ApiResponse ApiHandler::Serve(const ApiRequest& request, const std::string& path,
                              const std::string& query, RequestRecord* record) {
  const std::vector<std::string> segments = SplitPath(path);
  std::map<std::string, std::string> params = ParseQuery(query);

  // Route the path.
  Route route;
  size_t rest = 0;
  if (segments.size() >= 2 && segments[0] == "api") {
    route.resource = segments.size() > 2;
    route.version = segments[1];
    rest = 2;
  } else if (segments.size() >= 3 && segments[0] == "apis") {
    route.resource = segments.size() > 3;
    route.group = segments[1];
    route.version = segments[2];
    rest = 3;
  }
  if (route.resource) {
    std::vector<std::string> tail(segments.begin() + static_cast<long>(rest), segments.end());
    size_t i = 0;
    if (tail.size() >= 3 && tail[0] == "namespaces") {
      route.ns = tail[1];
      i = 2;
    }
    route.resource_name = tail[i];
    if (i + 1 < tail.size()) route.name = tail[i + 1];
    if (i + 2 < tail.size()) route.subresource = tail[i + 2];
    route.valid = i + 3 >= tail.size();
  }

  // The verb, as authorization names it.
  const std::string& method = request.method;
  std::string verb;
  if (route.resource) {
    auto watch = params.find("watch");
    const bool watching = watch != params.end() && (watch->second == "1" || watch->second == "true");
    if (method == "GET" && watching && !route.name.empty() && route.subresource.empty()) {
      // A watch of one object is a watch of the collection by name.
      const std::string by_name = "metadata.name=" + route.name;
      std::string& fields = params["fieldSelector"];
      fields = fields.empty() ? by_name : fields + "," + by_name;
      route.name.clear();
      verb = "watch";
    } else if (method == "GET") {
      verb = !route.name.empty() ? "get" : (watching ? "watch" : "list");
    } else if (method == "POST") {
      verb = "create";
    } else if (method == "PUT") {
      verb = "update";
    } else if (method == "PATCH") {
      verb = "patch";
    } else if (method == "DELETE") {
      verb = route.name.empty() ? "deletecollection" : "delete";
    }
    record->verb = verb;
    record->group = route.group;
    record->resource = route.resource_name;
    record->subresource = route.subresource;
    record->namespace_name = route.ns;
    record->name = route.name;
  }

  // Authentication.
  if (!options_.bearer_token.empty() && !IsPublicPath(path)) {
    const std::string authorization = request.Header("authorization");
    if (!authorization.empty()) {
      if (authorization != "Bearer " + options_.bearer_token) {
        return ErrorResponse(ApiError::Unauthorized());
      }
    } else if (route.resource) {
      return ErrorResponse(ApiError::Forbidden(kAnonymous, verb.empty() ? "get" : verb,
                                               route.group, route.resource_name,
                                               route.subresource, route.name, route.ns));
    } else {
      return ErrorResponse(ApiError::ForbiddenPath(kAnonymous, "get", path));
    }
  }

  Fault fault;
  if (TakeFault(method, path, &fault)) return ErrorResponse(ApiError::ForCode(fault.code, fault.message));

  if (!route.resource) {
    if (method != "GET" && method != "HEAD") return ErrorResponse(ApiError::MethodNotAllowed());
    if (path == "/healthz" || path == "/readyz" || path == "/livez") {
      ApiResponse ok;
      ok.content_type = "text/plain; charset=utf-8";
      ok.body = "ok";
      return ok;
    }
    if (path == "/version") return DocumentResponse(VersionDocument());
    if (segments.size() == 1 && segments[0] == "api") {
      std::lock_guard<std::mutex> lock(mu_);
      return DocumentResponse(ApiVersionsDocument(server_address_));
    }
    if (segments.size() == 1 && segments[0] == "apis") {
      return DocumentResponse(ApiGroupListDocument(*registry_));
    }
    nlohmann::ordered_json document;
    if (segments.size() == 2 && segments[0] == "apis" &&
        ApiGroupDocument(*registry_, segments[1], &document)) {
      return DocumentResponse(document);
    }
    if (((segments.size() == 2 && segments[0] == "api") ||
         (segments.size() == 3 && segments[0] == "apis")) &&
        ApiResourceListDocument(*registry_, route.group, route.version, &document)) {
      return DocumentResponse(document);
    }
    return ErrorResponse(ApiError::PathNotFound());
  }

  if (!route.valid || verb.empty()) {
    return ErrorResponse(route.valid ? ApiError::MethodNotAllowed() : ApiError::PathNotFound());
  }
  ResourceTypePtr type = registry_->Find(route.group, route.version, route.resource_name);
  if (type == nullptr) return ErrorResponse(ApiError::PathNotFound());
  if (!type->namespaced && !route.ns.empty()) return ErrorResponse(ApiError::PathNotFound());
  if (type->namespaced && route.ns.empty() && verb != "list" && verb != "watch") {
    // Namespaced objects are only listed and watched across namespaces.
    return ErrorResponse(route.name.empty() ? ApiError::MethodNotAllowed()
                                            : ApiError::PathNotFound());
  }
  if (!route.subresource.empty() && route.name.empty()) {
    return ErrorResponse(ApiError::PathNotFound());
  }
  if (method == "POST" && !route.name.empty() && route.subresource.empty()) {
    return ErrorResponse(ApiError::MethodNotAllowed());
  }
  ResourceRequest r;
  r.verb = verb;
  r.type = type;
  r.ns = route.ns;
  r.name = route.name;
  r.subresource = route.subresource;
  r.query = params;
  r.http = &request;
  return resources_.Serve(r);
}

}  // namespace kube_testing
}  // namespace gaptrain
