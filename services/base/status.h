// Status: the outcome of an operation that can fail at a boundary (an RPC, a
// config file, a data file). A default-constructed Status is OK; an error
// carries a code and a message that names the offending field and the
// reason. Codes are numbered as gRPC's canonical codes, so a service maps
// one onto the other without a table.

#ifndef GAPTRAIN_SERVICES_BASE_STATUS_H_
#define GAPTRAIN_SERVICES_BASE_STATUS_H_

#include <string>
#include <utility>

namespace gaptrain {

class Status {
 public:
  enum class Code : int {
    kOk = 0,
    kCancelled = 1,
    kUnknown = 2,
    kInvalidArgument = 3,
    kDeadlineExceeded = 4,
    kNotFound = 5,
    kAlreadyExists = 6,
    kPermissionDenied = 7,
    kResourceExhausted = 8,
    kFailedPrecondition = 9,
    kAborted = 10,
    kOutOfRange = 11,
    kUnimplemented = 12,
    kInternal = 13,
    kUnavailable = 14,
    kDataLoss = 15,
    kUnauthenticated = 16,
  };

  Status() = default;
  Status(Code code, std::string message)
      : code_(code), message_(std::move(message)) {}

  static Status OK() { return Status(); }
  static Status InvalidArgument(std::string m) { return {Code::kInvalidArgument, std::move(m)}; }
  static Status NotFound(std::string m) { return {Code::kNotFound, std::move(m)}; }
  static Status AlreadyExists(std::string m) { return {Code::kAlreadyExists, std::move(m)}; }
  static Status FailedPrecondition(std::string m) { return {Code::kFailedPrecondition, std::move(m)}; }
  static Status OutOfRange(std::string m) { return {Code::kOutOfRange, std::move(m)}; }
  static Status Unavailable(std::string m) { return {Code::kUnavailable, std::move(m)}; }
  static Status DataLoss(std::string m) { return {Code::kDataLoss, std::move(m)}; }
  static Status Internal(std::string m) { return {Code::kInternal, std::move(m)}; }
  static Status Unauthenticated(std::string m) { return {Code::kUnauthenticated, std::move(m)}; }

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }

  // "INVALID_ARGUMENT: gradient has 10 values, the model has 12", or "OK".
  std::string ToString() const;

 private:
  Code code_ = Code::kOk;
  std::string message_;
};

// The canonical upper-case name of a code, e.g. "INVALID_ARGUMENT".
const char* StatusCodeName(Status::Code code);

}  // namespace gaptrain

// Returns early from the calling function when `expr` is not OK.
#define GAPTRAIN_RETURN_IF_ERROR(expr)            \
  do {                                            \
    ::gaptrain::Status _gaptrain_status = (expr); \
    if (!_gaptrain_status.ok()) return _gaptrain_status; \
  } while (0)

#endif  // GAPTRAIN_SERVICES_BASE_STATUS_H_
