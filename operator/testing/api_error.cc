#include "operator/testing/api_error.h"

#include <utility>

namespace gaptrain {
namespace kube_testing {

using nlohmann::json;
using nlohmann::ordered_json;

namespace {

// A value as field.Error prints it: strings quoted, numbers and booleans bare.
std::string FieldValueText(const json& value) {
  if (value.is_null()) return "null";
  return value.dump();
}

std::string WithDetail(std::string head, const std::string& detail) {
  if (!detail.empty()) head += ": " + detail;
  return head;
}

std::string ReasonForCode(int code) {
  switch (code) {
    case 400: return "BadRequest";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "NotFound";
    case 405: return "MethodNotAllowed";
    case 406: return "NotAcceptable";
    case 409: return "Conflict";
    case 410: return "Expired";
    case 413: return "RequestEntityTooLarge";
    case 415: return "UnsupportedMediaType";
    case 422: return "Invalid";
    case 429: return "TooManyRequests";
    case 500: return "InternalError";
    case 503: return "ServiceUnavailable";
    case 504: return "Timeout";
    default: return "";  // the real server leaves it empty ("Unknown")
  }
}

}  // namespace

std::string QualifiedResource(const std::string& group, const std::string& resource) {
  return group.empty() ? resource : resource + "." + group;
}

StatusCause RequiredField(const std::string& field, const std::string& detail) {
  return {"FieldValueRequired", WithDetail("Required value", detail), field};
}

StatusCause InvalidField(const std::string& field, const json& value,
                         const std::string& detail) {
  return {"FieldValueInvalid", WithDetail("Invalid value: " + FieldValueText(value), detail),
          field};
}

StatusCause UnsupportedField(const std::string& field, const json& value,
                             const std::vector<std::string>& supported) {
  std::string message = "Unsupported value: " + FieldValueText(value);
  if (!supported.empty()) {
    message += ": supported values: ";
    for (size_t i = 0; i < supported.size(); ++i) {
      if (i > 0) message += ", ";
      message += json(supported[i]).dump();
    }
  }
  return {"FieldValueNotSupported", message, field};
}

StatusCause ForbiddenField(const std::string& field, const std::string& detail) {
  return {"FieldValueForbidden", WithDetail("Forbidden", detail), field};
}

ordered_json ApiError::ToStatusJson() const {
  ordered_json status;
  status["kind"] = "Status";
  status["apiVersion"] = "v1";
  status["metadata"] = ordered_json::object();
  status["status"] = "Failure";
  if (!message_.empty()) status["message"] = message_;
  if (!reason_.empty()) status["reason"] = reason_;
  if (has_details_) {
    ordered_json details = ordered_json::object();
    if (!name_.empty()) details["name"] = name_;
    if (!group_.empty()) details["group"] = group_;
    if (!kind_.empty()) details["kind"] = kind_;
    if (!causes_.empty()) {
      ordered_json causes = ordered_json::array();
      for (const StatusCause& c : causes_) {
        ordered_json cause = ordered_json::object();
        if (!c.reason.empty()) cause["reason"] = c.reason;
        if (!c.message.empty()) cause["message"] = c.message;
        if (!c.field.empty()) cause["field"] = c.field;
        causes.push_back(std::move(cause));
      }
      details["causes"] = std::move(causes);
    }
    if (retry_after_seconds_ > 0) details["retryAfterSeconds"] = retry_after_seconds_;
    status["details"] = std::move(details);
  }
  status["code"] = code_;
  return status;
}

std::string ApiError::ToJsonText() const { return ToStatusJson().dump(); }

Status ApiError::ToStatus() const {
  if (ok()) return Status::OK();
  Status::Code code = Status::Code::kUnknown;
  switch (code_) {
    case 400: case 422: code = Status::Code::kInvalidArgument; break;
    case 401: code = Status::Code::kUnauthenticated; break;
    case 403: code = Status::Code::kPermissionDenied; break;
    case 404: code = Status::Code::kNotFound; break;
    case 409: code = reason_ == "AlreadyExists" ? Status::Code::kAlreadyExists
                                                : Status::Code::kAborted; break;
    case 410: code = Status::Code::kOutOfRange; break;
    case 413: case 429: code = Status::Code::kResourceExhausted; break;
    case 500: code = Status::Code::kInternal; break;
    case 503: code = Status::Code::kUnavailable; break;
    case 504: code = Status::Code::kDeadlineExceeded; break;
    default: break;
  }
  return Status(code, message_);
}

ApiError ApiError::NotFound(const std::string& group, const std::string& resource,
                            const std::string& name) {
  ApiError e(404, "NotFound",
             QualifiedResource(group, resource) + " \"" + name + "\" not found");
  e.has_details_ = true;
  e.name_ = name;
  e.group_ = group;
  e.kind_ = resource;
  return e;
}

ApiError ApiError::AlreadyExists(const std::string& group, const std::string& resource,
                                 const std::string& name) {
  ApiError e(409, "AlreadyExists",
             QualifiedResource(group, resource) + " \"" + name + "\" already exists");
  e.has_details_ = true;
  e.name_ = name;
  e.group_ = group;
  e.kind_ = resource;
  return e;
}

ApiError ApiError::Conflict(const std::string& group, const std::string& resource,
                            const std::string& name, const std::string& detail) {
  ApiError e(409, "Conflict",
             "Operation cannot be fulfilled on " + QualifiedResource(group, resource) + " \"" +
                 name + "\": " + detail);
  e.has_details_ = true;
  e.name_ = name;
  e.group_ = group;
  e.kind_ = resource;
  return e;
}

ApiError ApiError::StaleResourceVersion(const std::string& group, const std::string& resource,
                                        const std::string& name) {
  return Conflict(group, resource, name,
                  "the object has been modified; please apply your changes to the latest "
                  "version and try again");
}

ApiError ApiError::Invalid(const std::string& group, const std::string& kind,
                           const std::string& name, std::vector<StatusCause> causes) {
  std::string list;
  for (size_t i = 0; i < causes.size(); ++i) {
    if (i > 0) list += ", ";
    list += causes[i].field.empty() ? causes[i].message
                                    : causes[i].field + ": " + causes[i].message;
  }
  if (causes.size() > 1) list = "[" + list + "]";
  const std::string qualified_kind = group.empty() ? kind : kind + "." + group;
  ApiError e(422, "Invalid", qualified_kind + " \"" + name + "\" is invalid: " + list);
  e.has_details_ = true;
  e.name_ = name;
  e.group_ = group;
  e.kind_ = kind;
  e.causes_ = std::move(causes);
  return e;
}

ApiError ApiError::BadRequest(const std::string& message) {
  return ApiError(400, "BadRequest", message);
}

ApiError ApiError::Forbidden(const std::string& user, const std::string& verb,
                             const std::string& group, const std::string& resource,
                             const std::string& subresource, const std::string& name,
                             const std::string& namespace_name) {
  std::string why = "User \"" + user + "\" cannot " + verb + " resource \"" + resource +
                    (subresource.empty() ? "" : "/" + subresource) + "\" in API group \"" +
                    group + "\"";
  why += namespace_name.empty() ? " at the cluster scope"
                                : " in the namespace \"" + namespace_name + "\"";
  const std::string qualified = QualifiedResource(group, resource);
  ApiError e(403, "Forbidden",
             name.empty() ? qualified + " is forbidden: " + why
                          : qualified + " \"" + name + "\" is forbidden: " + why);
  e.has_details_ = true;
  e.name_ = name;
  e.group_ = group;
  e.kind_ = resource;
  return e;
}

ApiError ApiError::ForbiddenPath(const std::string& user, const std::string& verb,
                                 const std::string& path) {
  ApiError e(403, "Forbidden",
             "forbidden: User \"" + user + "\" cannot " + verb + " path \"" + path + "\"");
  e.has_details_ = true;
  return e;
}

ApiError ApiError::Unauthorized() { return ApiError(401, "Unauthorized", "Unauthorized"); }

ApiError ApiError::Expired(const std::string& message) {
  return ApiError(410, "Expired", message);
}

ApiError ApiError::TooOldResourceVersion(uint64_t requested, uint64_t oldest_available) {
  return Expired("too old resource version: " + std::to_string(requested) + " (" +
                 std::to_string(oldest_available) + ")");
}

ApiError ApiError::TooLargeResourceVersion(uint64_t requested, uint64_t current) {
  ApiError e(504, "Timeout",
             "Too large resource version: " + std::to_string(requested) +
                 ", current: " + std::to_string(current));
  e.has_details_ = true;
  e.causes_.push_back({"ResourceVersionTooLarge", "Too large resource version", ""});
  e.retry_after_seconds_ = 1;
  return e;
}

ApiError ApiError::PathNotFound() {
  ApiError e(404, "NotFound", "the server could not find the requested resource");
  e.has_details_ = true;
  return e;
}

ApiError ApiError::MethodNotAllowed() {
  ApiError e(405, "MethodNotAllowed",
             "the server does not allow this method on the requested resource");
  e.has_details_ = true;
  return e;
}

ApiError ApiError::RequestEntityTooLarge(size_t limit) {
  return ApiError(413, "RequestEntityTooLarge",
                  "Request entity too large: limit is " + std::to_string(limit));
}

ApiError ApiError::UnsupportedMediaType(const std::vector<std::string>& accepted) {
  std::string list;
  for (size_t i = 0; i < accepted.size(); ++i) list += (i > 0 ? ", " : "") + accepted[i];
  return ApiError(415, "UnsupportedMediaType",
                  "the body of the request was in an unknown format - accepted media types "
                  "include: " + list);
}

ApiError ApiError::NotAcceptable(const std::vector<std::string>& accepted) {
  std::string list;
  for (size_t i = 0; i < accepted.size(); ++i) list += (i > 0 ? ", " : "") + accepted[i];
  return ApiError(406, "NotAcceptable", "only the following media types are accepted: " + list);
}

ApiError ApiError::ApplyConflict(std::vector<StatusCause> causes, const std::string& message) {
  ApiError e(409, "Conflict", message);
  e.has_details_ = true;
  e.causes_ = std::move(causes);
  return e;
}

ApiError ApiError::InternalError(const std::string& message) {
  ApiError e(500, "InternalError", "Internal error occurred: " + message);
  e.has_details_ = true;
  e.causes_.push_back({"", message, ""});
  return e;
}

ApiError ApiError::ForCode(int code, const std::string& message) {
  if (code == 500) return InternalError(message);
  ApiError e(code, ReasonForCode(code), message);
  if (code == 429 || code == 503 || code == 504) {
    e.has_details_ = true;
    e.retry_after_seconds_ = 1;
  }
  return e;
}

const char* HttpReasonPhrase(int code) {
  switch (code) {
    case 200: return "OK";
    case 201: return "Created";
    case 202: return "Accepted";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 406: return "Not Acceptable";
    case 409: return "Conflict";
    case 410: return "Gone";
    case 413: return "Request Entity Too Large";
    case 415: return "Unsupported Media Type";
    case 422: return "Unprocessable Entity";
    case 429: return "Too Many Requests";
    case 500: return "Internal Server Error";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    default: return "Unknown";
  }
}

ordered_json DeletedStatusJson(const std::string& group, const std::string& resource,
                               const std::string& name, const std::string& uid) {
  ordered_json status;
  status["kind"] = "Status";
  status["apiVersion"] = "v1";
  status["metadata"] = ordered_json::object();
  status["status"] = "Success";
  ordered_json details = ordered_json::object();
  details["name"] = name;
  if (!group.empty()) details["group"] = group;
  details["kind"] = resource;
  details["uid"] = uid;
  status["details"] = std::move(details);
  return status;
}

ordered_json SuccessStatusJson(int code) {
  ordered_json status;
  status["kind"] = "Status";
  status["apiVersion"] = "v1";
  status["metadata"] = ordered_json::object();
  status["status"] = "Success";
  status["code"] = code;
  return status;
}

}  // namespace kube_testing
}  // namespace gaptrain
