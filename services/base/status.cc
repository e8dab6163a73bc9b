#include "services/base/status.h"

namespace gaptrain {

const char* StatusCodeName(Status::Code code) {
  switch (code) {
    case Status::Code::kOk: return "OK";
    case Status::Code::kCancelled: return "CANCELLED";
    case Status::Code::kUnknown: return "UNKNOWN";
    case Status::Code::kInvalidArgument: return "INVALID_ARGUMENT";
    case Status::Code::kDeadlineExceeded: return "DEADLINE_EXCEEDED";
    case Status::Code::kNotFound: return "NOT_FOUND";
    case Status::Code::kAlreadyExists: return "ALREADY_EXISTS";
    case Status::Code::kPermissionDenied: return "PERMISSION_DENIED";
    case Status::Code::kResourceExhausted: return "RESOURCE_EXHAUSTED";
    case Status::Code::kFailedPrecondition: return "FAILED_PRECONDITION";
    case Status::Code::kAborted: return "ABORTED";
    case Status::Code::kOutOfRange: return "OUT_OF_RANGE";
    case Status::Code::kUnimplemented: return "UNIMPLEMENTED";
    case Status::Code::kInternal: return "INTERNAL";
    case Status::Code::kUnavailable: return "UNAVAILABLE";
    case Status::Code::kDataLoss: return "DATA_LOSS";
    case Status::Code::kUnauthenticated: return "UNAUTHENTICATED";
  }
  return "UNKNOWN";
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  return std::string(StatusCodeName(code_)) + ": " + message_;
}

}  // namespace gaptrain
