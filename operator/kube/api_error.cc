#include "operator/kube/api_error.h"

#include "operator/kube/json_text.h"

namespace gaptrain {
namespace kube {
namespace {

std::string StringField(const nlohmann::json& object, const char* key) {
  auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : std::string();
}

}  // namespace

bool ParseStatusObject(const nlohmann::json& body, ApiError* error) {
  if (!body.is_object() || StringField(body, "kind") != "Status") return false;
  error->reason = StringField(body, "reason");
  error->message = StringField(body, "message");
  auto code = body.find("code");
  if (code != body.end() && code->is_number_integer()) error->http_status = code->get<int>();
  error->causes.clear();
  auto details = body.find("details");
  if (details != body.end() && details->is_object()) {
    auto causes = details->find("causes");
    if (causes != details->end() && causes->is_array()) {
      for (const nlohmann::json& c : *causes) {
        if (!c.is_object()) continue;
        error->causes.push_back(
            {StringField(c, "reason"), StringField(c, "message"), StringField(c, "field")});
      }
    }
  }
  return true;
}

Status::Code CodeForHttp(int http_status, const std::string& reason) {
  switch (http_status) {
    case 400:
    case 422: return Status::Code::kInvalidArgument;
    case 401: return Status::Code::kUnauthenticated;
    case 403: return Status::Code::kPermissionDenied;
    case 404: return Status::Code::kNotFound;
    case 405: return Status::Code::kUnimplemented;
    case 409:
      return reason == "AlreadyExists" ? Status::Code::kAlreadyExists : Status::Code::kAborted;
    case 410: return Status::Code::kOutOfRange;
    case 429: return Status::Code::kResourceExhausted;
    case 504: return Status::Code::kDeadlineExceeded;
  }
  if (http_status >= 500 && http_status <= 599) {
    return reason == "Timeout" ? Status::Code::kDeadlineExceeded : Status::Code::kUnavailable;
  }
  return Status::Code::kUnknown;
}

Status ApiErrorStatus(const std::string& what, int http_status, const std::string& body,
                      ApiError* error) {
  ApiError parsed;
  nlohmann::json json;
  const bool is_status = ParseJson(body, &json).ok() && ParseStatusObject(json, &parsed);
  // The HTTP status line is authoritative; the object's code only repeats it.
  parsed.http_status = http_status;
  if (!is_status) {
    parsed.message = body.empty() ? "(empty body)" : "(not a Status) " + Excerpt(body);
  }
  std::string message = what + ": " + std::to_string(http_status);
  if (!parsed.reason.empty()) message += " " + parsed.reason;
  message += ": " + parsed.message;
  Status::Code code = CodeForHttp(http_status, parsed.reason);
  if (error != nullptr) *error = std::move(parsed);
  return Status(code, message);
}

bool IsNotFound(const Status& s) { return s.code() == Status::Code::kNotFound; }
bool IsAlreadyExists(const Status& s) { return s.code() == Status::Code::kAlreadyExists; }
bool IsConflict(const Status& s) { return s.code() == Status::Code::kAborted; }
bool IsGone(const Status& s) { return s.code() == Status::Code::kOutOfRange; }
bool IsInvalid(const Status& s) { return s.code() == Status::Code::kInvalidArgument; }

bool IsRetryable(const Status& s) {
  switch (s.code()) {
    case Status::Code::kResourceExhausted:
    case Status::Code::kUnavailable:
    case Status::Code::kDeadlineExceeded: return true;
    default: return false;
  }
}

}  // namespace kube
}  // namespace gaptrain
