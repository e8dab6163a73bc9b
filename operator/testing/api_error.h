// ApiError: a failed Kubernetes API request as kube-apiserver v1.26 reports
// it: an HTTP code plus a meta/v1 Status object whose reason, message,
// details and causes carry the real server's texts (see
// ../shared/k8s/recorded). A default-constructed ApiError means success.
//
// Status objects are serialised with the real server's key order (kind,
// apiVersion, metadata, status, message, reason, details, code), so a watch
// ERROR event is byte-compatible with the recorded one.

#ifndef GAPTRAIN_OPERATOR_TESTING_API_ERROR_H_
#define GAPTRAIN_OPERATOR_TESTING_API_ERROR_H_

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "services/common/status.h"

namespace gaptrain {
namespace kube_testing {

// One entry of details.causes; also one field error of a 422 Invalid.
struct StatusCause {
  std::string reason;   // "FieldValueInvalid", "FieldManagerConflict", ...
  std::string message;  // "Invalid value: 0: ... greater than or equal to 1"
  std::string field;    // "spec.workers.replicas"; may be empty
};

// Field errors in the form apimachinery's field.Error prints them.
StatusCause RequiredField(const std::string& field, const std::string& detail = "");
StatusCause InvalidField(const std::string& field, const nlohmann::json& value,
                         const std::string& detail);
StatusCause UnsupportedField(const std::string& field, const nlohmann::json& value,
                             const std::vector<std::string>& supported);
StatusCause ForbiddenField(const std::string& field, const std::string& detail);

class ApiError {
 public:
  ApiError() = default;

  bool ok() const { return code_ == 0; }
  int code() const { return code_; }
  const std::string& reason() const { return reason_; }
  const std::string& message() const { return message_; }
  const std::vector<StatusCause>& causes() const { return causes_; }

  // The Status object, in the real server's key order.
  nlohmann::ordered_json ToStatusJson() const;
  // ToStatusJson() as compact text.
  std::string ToJsonText() const;
  // The same failure as a gaptrain::Status ("NOT_FOUND: pods \"x\" not found").
  Status ToStatus() const;

  // `group` is "" for the core group; `resource` the plural ("pods").
  static ApiError NotFound(const std::string& group, const std::string& resource,
                           const std::string& name);
  static ApiError AlreadyExists(const std::string& group, const std::string& resource,
                                const std::string& name);
  // "Operation cannot be fulfilled on <resource> \"<name>\": <detail>".
  static ApiError Conflict(const std::string& group, const std::string& resource,
                           const std::string& name, const std::string& detail);
  // The optimistic-concurrency conflict of a stale metadata.resourceVersion.
  static ApiError StaleResourceVersion(const std::string& group, const std::string& resource,
                                       const std::string& name);
  // 422: "<Kind>.<group> \"<name>\" is invalid: <causes>".
  static ApiError Invalid(const std::string& group, const std::string& kind,
                          const std::string& name, std::vector<StatusCause> causes);
  static ApiError BadRequest(const std::string& message);
  // 403 for a resource request; `name` and `namespace_name` may be empty.
  static ApiError Forbidden(const std::string& user, const std::string& verb,
                            const std::string& group, const std::string& resource,
                            const std::string& subresource, const std::string& name,
                            const std::string& namespace_name);
  // 403 for a non-resource path ("/api").
  static ApiError ForbiddenPath(const std::string& user, const std::string& verb,
                                const std::string& path);
  static ApiError Unauthorized();
  static ApiError Expired(const std::string& message);  // 410
  static ApiError TooOldResourceVersion(uint64_t requested, uint64_t oldest_available);
  static ApiError TooLargeResourceVersion(uint64_t requested, uint64_t current);  // 504
  static ApiError PathNotFound();        // 404 for a path no resource serves
  static ApiError MethodNotAllowed();    // 405
  static ApiError RequestEntityTooLarge(size_t limit);
  static ApiError UnsupportedMediaType(const std::vector<std::string>& accepted);
  static ApiError NotAcceptable(const std::vector<std::string>& accepted);
  static ApiError ApplyConflict(std::vector<StatusCause> causes, const std::string& message);
  static ApiError InternalError(const std::string& message);
  // Any code, as fault injection asks for; the reason follows the code.
  static ApiError ForCode(int code, const std::string& message);

 private:
  ApiError(int code, std::string reason, std::string message)
      : code_(code), reason_(std::move(reason)), message_(std::move(message)) {}

  int code_ = 0;
  std::string reason_;
  std::string message_;
  // details; each omitted when empty, as in the real server.
  bool has_details_ = false;
  std::string name_;
  std::string group_;
  std::string kind_;
  std::vector<StatusCause> causes_;
  int retry_after_seconds_ = 0;
};

// The reason phrase of an HTTP status code ("Unprocessable Entity").
const char* HttpReasonPhrase(int code);

// {"kind":"Status","apiVersion":"v1","metadata":{},"status":"Success",...}:
// what DELETE answers for kinds that do not return the deleted object.
nlohmann::ordered_json DeletedStatusJson(const std::string& group, const std::string& resource,
                                         const std::string& name, const std::string& uid);
// What the eviction and binding subresources answer: Success with `code`.
nlohmann::ordered_json SuccessStatusJson(int code);

// "pods" or "trainingjobs.gaptrain.io", as messages name a resource.
std::string QualifiedResource(const std::string& group, const std::string& resource);

}  // namespace kube_testing
}  // namespace gaptrain

#endif  // GAPTRAIN_OPERATOR_TESTING_API_ERROR_H_
