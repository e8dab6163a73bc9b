// ApiError: what the API server said when a call failed, and how that
// becomes a gaptrain::Status the controller can branch on.
//
// Every failed Client call returns a Status whose message names the call,
// the resource, the namespace/name, the HTTP code, and the server's reason
// and message, e.g.
//   create pods default/mnist-trainer-0: 409 AlreadyExists: pods "mnist-trainer-0" already exists
// and whose code follows the HTTP status (so the predicates below work on
// the Status alone):
//   400 BadRequest, 422 Invalid         INVALID_ARGUMENT   (not retryable)
//   401                                 UNAUTHENTICATED
//   403                                 PERMISSION_DENIED
//   404                                 NOT_FOUND
//   405                                 UNIMPLEMENTED
//   409 reason AlreadyExists            ALREADY_EXISTS
//   409 anything else (Conflict)        ABORTED            (re-read, retry)
//   410 Gone / Expired                  OUT_OF_RANGE       (re-list)
//   429 TooManyRequests                 RESOURCE_EXHAUSTED (retryable)
//   504, reason Timeout                 DEADLINE_EXCEEDED  (retryable)
//   other 5xx                           UNAVAILABLE        (retryable)
//   anything else                       UNKNOWN
// Failures without an HTTP answer: connecting or a cut connection
// UNAVAILABLE, the call's deadline DEADLINE_EXCEEDED, cancellation
// CANCELLED, a response that is not JSON or not what the call expects
// DATA_LOSS. Calls refused before sending (bad arguments) are
// INVALID_ARGUMENT with http_status 0.
//
// Callers that need the details (the 422 causes, the exact HTTP code) pass
// an ApiError* to the call.

#ifndef GAPTRAIN_OPERATOR_KUBE_API_ERROR_H_
#define GAPTRAIN_OPERATOR_KUBE_API_ERROR_H_

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "services/base/status.h"

namespace gaptrain {
namespace kube {

struct ApiError {
  int http_status = 0;  // 0: no HTTP answer (transport error, refused locally)
  std::string reason;   // the Status object's reason: "AlreadyExists", "Conflict", "Expired", ...
  std::string message;  // the Status object's message, or an excerpt of a non-Status body
  struct Cause {
    std::string reason;  // "FieldValueInvalid"
    std::string message;
    std::string field;  // "spec.workers.replicas"
  };
  std::vector<Cause> causes;  // details.causes (422 Invalid, apply conflicts)
};

// Reads a response body that should be a metav1.Status. Returns false (and
// fills only message with an excerpt) when it is not one.
bool ParseStatusObject(const nlohmann::json& body, ApiError* error);

// The error for an HTTP answer `http_status` with `body` (any bytes), for
// the call described by `what` ("create pods default/mnist-trainer-0").
// Fills *error when given.
Status ApiErrorStatus(const std::string& what, int http_status, const std::string& body,
                      ApiError* error);

// The Status code for an HTTP status and reason (the table above).
Status::Code CodeForHttp(int http_status, const std::string& reason);

bool IsNotFound(const Status& s);       // 404
bool IsAlreadyExists(const Status& s);  // 409 AlreadyExists
bool IsConflict(const Status& s);       // 409 Conflict (stale resourceVersion, apply conflict)
bool IsGone(const Status& s);           // 410: the resourceVersion is too old
bool IsInvalid(const Status& s);        // 400/422, or bad arguments
// 429, 5xx, timeouts and broken connections: worth retrying after a delay.
bool IsRetryable(const Status& s);

}  // namespace kube
}  // namespace gaptrain

#endif  // GAPTRAIN_OPERATOR_KUBE_API_ERROR_H_
