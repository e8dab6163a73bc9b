#include "operator/kube/client.h"

#include <algorithm>
#include <cctype>
#include <set>
#include <utility>

#include "operator/kube/json_text.h"

namespace gaptrain {
namespace kube {
namespace {

// Kubernetes names never hold these; refusing them keeps every path one
// segment per name.
bool ValidPathSegment(const std::string& s) {
  if (s.empty() || s == "." || s == "..") return false;
  for (char c : s) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u >= 0x7f || c == '/' || c == '%' || c == '?' || c == '#') return false;
  }
  return true;
}

std::string MetadataString(const nlohmann::json& object, const char* key) {
  if (!object.is_object()) return "";
  auto metadata = object.find("metadata");
  if (metadata == object.end() || !metadata->is_object()) return "";
  auto value = metadata->find(key);
  return value != metadata->end() && value->is_string() ? value->get<std::string>() : "";
}

Status NotJson(const std::string& what, int http_status, const std::string& body) {
  return Status::DataLoss(what + ": the " + std::to_string(http_status) +
                          " response is not a JSON object: " + Excerpt(body));
}

}  // namespace

std::string EncodeQuery(const std::map<std::string, std::string>& params) {
  auto escape = [](const std::string& s) {
    static const char kHex[] = "0123456789ABCDEF";
    std::string out;
    for (char c : s) {
      const unsigned char u = static_cast<unsigned char>(c);
      if (std::isalnum(u) || c == '-' || c == '_' || c == '.' || c == '~') {
        out += c;
      } else {
        out += '%';
        out += kHex[u >> 4];
        out += kHex[u & 15];
      }
    }
    return out;
  };
  std::string query;
  for (const auto& [key, value] : params) {
    if (!query.empty()) query += '&';
    query += escape(key) + "=" + escape(value);
  }
  return query;
}

bool WatchStream::Next(WatchEvent* event) {
  while (pending_.empty()) {
    if (ended_) return false;
    std::vector<WatchEvent> decoded;
    if (decoder_.done()) {
      // The server ended the watch (timeoutSeconds); a last line without
      // its newline may still be pending in the decoder.
      ended_ = true;
      Status s = decoder_.Finish(&decoded);
      if (!s.ok()) status_ = Status(s.code(), what_ + ": " + s.message());
      for (WatchEvent& e : decoded) pending_.push_back(std::move(e));
      continue;
    }
    std::string bytes;
    bool eof = false;
    Status s = stream_->ReadSome(Clock::now() + idle_timeout_, &bytes, &eof);
    if (s.code() == Status::Code::kDeadlineExceeded) {
      status_ = Status(s.code(), what_ + ": no data for " +
                                     std::to_string(idle_timeout_.count()) + " ms");
    } else if (!s.ok()) {
      status_ = Status(s.code(), what_ + ": " + s.message());
    } else if (eof) {
      s = decoder_.Finish(&decoded);
      if (!s.ok()) {
        status_ = Status::Unavailable(what_ + ": the server closed the connection mid-stream (" +
                                      s.message() + ")");
      }
      ended_ = true;
    } else {
      s = decoder_.Feed(bytes.data(), bytes.size(), &decoded);
      if (!s.ok()) status_ = Status(s.code(), what_ + ": " + s.message());
    }
    if (!status_.ok()) ended_ = true;
    for (WatchEvent& e : decoded) pending_.push_back(std::move(e));
  }
  *event = std::move(pending_.front());
  pending_.pop_front();
  return true;
}

Client::Client(std::unique_ptr<Transport> transport, const ClientOptions& options,
               std::string default_namespace)
    : transport_(std::move(transport)),
      options_(options),
      default_namespace_(std::move(default_namespace)) {}

Status Client::New(const ClusterConfig& config, const ClientOptions& options,
                   std::unique_ptr<Client>* client) {
  if (options.request_timeout.count() <= 0) {
    return Status::InvalidArgument("ClientOptions.request_timeout must be positive");
  }
  if (options.field_manager.empty()) {
    return Status::InvalidArgument("ClientOptions.field_manager must not be empty");
  }
  Transport::Options transport_options;
  transport_options.user_agent = options.user_agent;
  transport_options.max_idle_connections = options.max_idle_connections;
  transport_options.max_response_bytes = options.max_response_bytes;
  std::unique_ptr<Transport> transport;
  GAPTRAIN_RETURN_IF_ERROR(Transport::New(config, transport_options, &transport));
  const std::string ns = config.default_namespace.empty() ? "default" : config.default_namespace;
  client->reset(new Client(std::move(transport), options, ns));
  return Status::OK();
}

Status Client::Prepare(Call call, const Resource& resource, const std::string& ns,
                       const std::string& name, std::string* what, std::string* ns_used) const {
  const bool all_namespaces = resource.namespaced && ns == kAllNamespaces;
  *ns_used = resource.namespaced ? (ns.empty() ? default_namespace_ : ns) : "";
  *what = std::string(CallName(call)) + " " + resource.RbacName();
  if (all_namespaces) {
    *what += " in all namespaces" + (name.empty() ? "" : " (" + name + ")");
  } else if (!ns_used->empty() || !name.empty()) {
    *what += " " + *ns_used + (ns_used->empty() || name.empty() ? "" : "/") + name;
  }
  if (!AllowedOn(resource, call)) {
    return Status::InvalidArgument(*what + ": the client does not " + CallName(call) +
                                   " the subresource " + std::string(resource.subresource));
  }
  if (all_namespaces && call != Call::kList && call != Call::kWatch) {
    return Status::InvalidArgument(*what + ": only list and watch span all namespaces");
  }
  if (resource.namespaced && !all_namespaces && !ValidPathSegment(*ns_used)) {
    return Status::InvalidArgument(*what + ": namespace '" + *ns_used + "' is not a valid name");
  }
  const bool needs_name = call != Call::kList && call != Call::kWatch && call != Call::kCreate;
  if (needs_name && !ValidPathSegment(name)) {
    return Status::InvalidArgument(*what + ": name '" + name + "' is not a valid name");
  }
  return Status::OK();
}

Status Client::Send(const std::string& what, const HttpCall& http, Cancellation* cancel,
                    nlohmann::json* out, ApiError* error) {
  if (error != nullptr) *error = ApiError();
  HttpReply reply;
  Status s = transport_->RoundTrip(http, Deadline(), cancel, &reply);
  for (const std::string& warning : reply.warnings) {
    bool first = false;
    {
      std::lock_guard<std::mutex> lock(warnings_mu_);
      if (std::find(warnings_.begin(), warnings_.end(), warning) == warnings_.end()) {
        warnings_.push_back(warning);
        first = true;
      }
    }
    if (first && options_.on_warning) options_.on_warning(what, warning);
  }
  if (!s.ok()) {
    if (error != nullptr) error->message = s.message();
    return Status(s.code(), what + ": " + s.message());
  }
  if (reply.status < 200 || reply.status > 299) {
    return ApiErrorStatus(what, reply.status, reply.body, error);
  }
  nlohmann::json body;
  if (!ParseJson(reply.body, &body).ok() || !body.is_object()) {
    return NotJson(what, reply.status, reply.body);
  }
  if (out != nullptr) *out = std::move(body);
  return Status::OK();
}

std::vector<std::string> Client::Warnings() const {
  std::lock_guard<std::mutex> lock(warnings_mu_);
  return warnings_;
}

Status Client::Get(const Resource& resource, const std::string& ns, const std::string& name,
                   nlohmann::json* out, ApiError* error) {
  std::string what, ns_used;
  GAPTRAIN_RETURN_IF_ERROR(Prepare(Call::kGet, resource, ns, name, &what, &ns_used));
  return Send(what, {"GET", resource.ObjectPath(ns_used, name), "", ""}, nullptr, out, error);
}

Status Client::GetApiGroup(const std::string& group, nlohmann::json* out, ApiError* error) {
  const std::string what = "get API group " + group;
  if (!ValidPathSegment(group)) {
    return Status::InvalidArgument(what + ": '" + group + "' is not a valid group name");
  }
  return Send(what, {"GET", "/apis/" + group, "", ""}, nullptr, out, error);
}

Status Client::ListOnce(const Resource& resource, const std::string& ns, const std::string& what,
                        const ListOptions& options, int64_t page_size, ObjectList* out,
                        ApiError* error) {
  out->items.clear();
  out->resource_version.clear();
  std::string continue_token;
  std::set<std::string> seen_tokens;
  for (;;) {
    std::map<std::string, std::string> query;
    if (!options.label_selector.empty()) query["labelSelector"] = options.label_selector;
    if (!options.field_selector.empty()) query["fieldSelector"] = options.field_selector;
    if (page_size > 0) query["limit"] = std::to_string(page_size);
    if (!continue_token.empty()) query["continue"] = continue_token;
    std::string target = resource.CollectionPath(ns);
    if (!query.empty()) target += "?" + EncodeQuery(query);
    nlohmann::json page;
    GAPTRAIN_RETURN_IF_ERROR(Send(what, {"GET", target, "", ""}, options.cancel, &page, error));

    auto items = page.find("items");
    if (items != page.end() && !items->is_array() && !items->is_null()) {
      return Status::DataLoss(what + ": the list's items are not an array");
    }
    if (items != page.end() && items->is_array()) {
      for (nlohmann::json& item : *items) {
        if (!item.is_object()) return Status::DataLoss(what + ": a list item is not an object");
        if (!item.contains("apiVersion")) item["apiVersion"] = resource.ApiVersion();
        if (!item.contains("kind")) item["kind"] = std::string(resource.kind);
        if (options.transform) options.transform(&item);
        out->items.push_back(std::move(item));
      }
    }
    continue_token = MetadataString(page, "continue");
    if (continue_token.empty()) {
      out->resource_version = MetadataString(page, "resourceVersion");
      return Status::OK();
    }
    if (!seen_tokens.insert(continue_token).second) {
      return Status::DataLoss(what + ": the server repeated continue token '" +
                              Excerpt(continue_token, 40) + "'");
    }
  }
}

Status Client::List(const Resource& resource, const std::string& ns, const ListOptions& options,
                    ObjectList* out, ApiError* error) {
  std::string what, ns_used;
  GAPTRAIN_RETURN_IF_ERROR(Prepare(Call::kList, resource, ns, "", &what, &ns_used));
  ObjectList list;
  Status s = ListOnce(resource, ns_used, what, options, options.page_size, &list, error);
  if (IsGone(s) && options.page_size > 0) {
    // The continue token expired between pages: take everything at once.
    s = ListOnce(resource, ns_used, what, options, 0, &list, error);
  }
  if (s.ok() && out != nullptr) *out = std::move(list);
  return s;
}

Status Client::Create(const Resource& resource, const std::string& ns,
                      const nlohmann::json& object, nlohmann::json* out, ApiError* error) {
  std::string name = MetadataString(object, "name");
  if (name.empty()) name = MetadataString(object, "generateName") + "*";
  std::string what, ns_used;
  GAPTRAIN_RETURN_IF_ERROR(Prepare(Call::kCreate, resource, ns, name, &what, &ns_used));
  if (!object.is_object()) return Status::InvalidArgument(what + ": the object is not a JSON object");
  return Send(what, {"POST", resource.CollectionPath(ns_used), "application/json", object.dump()},
              nullptr, out, error);
}

Status Client::Update(const Resource& resource, const std::string& ns,
                      const nlohmann::json& object, nlohmann::json* out, ApiError* error) {
  const std::string name = MetadataString(object, "name");
  std::string what, ns_used;
  GAPTRAIN_RETURN_IF_ERROR(Prepare(Call::kUpdate, resource, ns, name, &what, &ns_used));
  return Send(what,
              {"PUT", resource.ObjectPath(ns_used, name), "application/json", object.dump()},
              nullptr, out, error);
}

Status Client::MergePatch(const Resource& resource, const std::string& ns,
                          const std::string& name, const nlohmann::json& patch,
                          nlohmann::json* out, ApiError* error) {
  std::string what, ns_used;
  GAPTRAIN_RETURN_IF_ERROR(Prepare(Call::kMergePatch, resource, ns, name, &what, &ns_used));
  if (!patch.is_object()) return Status::InvalidArgument(what + ": a merge patch must be an object");
  return Send(what,
              {"PATCH", resource.ObjectPath(ns_used, name), "application/merge-patch+json",
               patch.dump()},
              nullptr, out, error);
}

Status Client::Apply(const Resource& resource, const std::string& ns,
                     const nlohmann::json& object, nlohmann::json* out, ApiError* error) {
  const std::string name = MetadataString(object, "name");
  std::string what, ns_used;
  GAPTRAIN_RETURN_IF_ERROR(Prepare(Call::kApply, resource, ns, name, &what, &ns_used));
  nlohmann::json body = object;
  if (!body.contains("apiVersion")) body["apiVersion"] = resource.ApiVersion();
  if (!body.contains("kind")) body["kind"] = std::string(resource.kind);
  const std::string target =
      resource.ObjectPath(ns_used, name) + "?" +
      EncodeQuery({{"fieldManager", options_.field_manager}, {"force", "true"}});
  return Send(what, {"PATCH", target, "application/apply-patch+yaml", body.dump()}, nullptr, out,
              error);
}

Status Client::Delete(const Resource& resource, const std::string& ns, const std::string& name,
                      const DeleteOptions& options, nlohmann::json* out, ApiError* error) {
  std::string what, ns_used;
  GAPTRAIN_RETURN_IF_ERROR(Prepare(Call::kDelete, resource, ns, name, &what, &ns_used));
  nlohmann::json body = {{"apiVersion", "v1"}, {"kind", "DeleteOptions"}};
  const std::string& policy = options.propagation_policy;
  if (!policy.empty()) {
    if (policy != "Foreground" && policy != "Background" && policy != "Orphan") {
      return Status::InvalidArgument(what + ": propagation policy '" + policy +
                                     "' is not Foreground, Background or Orphan");
    }
    body["propagationPolicy"] = policy;
  }
  if (options.grace_period_seconds) {
    if (*options.grace_period_seconds < 0) {
      return Status::InvalidArgument(what + ": grace period must not be negative");
    }
    body["gracePeriodSeconds"] = *options.grace_period_seconds;
  }
  if (!options.precondition_uid.empty()) body["preconditions"]["uid"] = options.precondition_uid;
  if (!options.precondition_resource_version.empty()) {
    body["preconditions"]["resourceVersion"] = options.precondition_resource_version;
  }
  HttpCall http{"DELETE", resource.ObjectPath(ns_used, name), "", ""};
  if (body.size() > 2) {  // more than apiVersion and kind: send the options
    http.content_type = "application/json";
    http.body = body.dump();
  }
  return Send(what, http, nullptr, out, error);
}

Status Client::Watch(const Resource& resource, const std::string& ns, const WatchOptions& options,
                     std::unique_ptr<WatchStream>* stream, ApiError* error) {
  if (error != nullptr) *error = ApiError();
  std::string what, ns_used;
  GAPTRAIN_RETURN_IF_ERROR(Prepare(Call::kWatch, resource, ns, "", &what, &ns_used));
  if (options.timeout_seconds <= 0 || options.idle_timeout.count() <= 0) {
    return Status::InvalidArgument(what + ": timeout_seconds and idle_timeout must be positive");
  }
  std::map<std::string, std::string> query = {
      {"watch", "1"}, {"timeoutSeconds", std::to_string(options.timeout_seconds)}};
  if (options.allow_bookmarks) query["allowWatchBookmarks"] = "true";
  if (!options.resource_version.empty()) query["resourceVersion"] = options.resource_version;
  if (!options.label_selector.empty()) query["labelSelector"] = options.label_selector;
  if (!options.field_selector.empty()) query["fieldSelector"] = options.field_selector;
  const HttpCall http{"GET", resource.CollectionPath(ns_used) + "?" + EncodeQuery(query), "", ""};

  std::unique_ptr<WatchStream> watch(new WatchStream());
  watch->what_ = what;
  watch->idle_timeout_ = options.idle_timeout;
  const Clock::time_point deadline = Deadline();
  Status s = transport_->OpenStream(http, deadline, options.cancel, &watch->stream_);
  std::vector<WatchEvent> early;
  // Read the status line (and, for an error, the whole Status body).
  while (s.ok() && (!watch->decoder_.header_done() ||
                    (watch->decoder_.http_status() != 200 && !watch->decoder_.done()))) {
    std::string bytes;
    bool eof = false;
    s = watch->stream_->ReadSome(deadline, &bytes, &eof);
    if (!s.ok()) break;
    if (!eof) {
      s = watch->decoder_.Feed(bytes.data(), bytes.size(), &early);
      continue;
    }
    Status finished = watch->decoder_.Finish(&early);
    if (!finished.ok() || !watch->decoder_.done()) {
      s = Status::Unavailable("the server closed the connection before answering" +
                              (finished.ok() ? std::string() : " (" + finished.message() + ")"));
    }
    break;
  }
  if (!s.ok()) {
    if (error != nullptr) error->message = s.message();
    return Status(s.code(), what + ": " + s.message());
  }
  const int http_status = watch->decoder_.http_status();
  if (http_status != 200) {
    return ApiErrorStatus(what, http_status, watch->decoder_.error_body(), error);
  }
  for (WatchEvent& e : early) watch->pending_.push_back(std::move(e));
  *stream = std::move(watch);
  return Status::OK();
}

}  // namespace kube
}  // namespace gaptrain
