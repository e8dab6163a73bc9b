#include "services/base/status.h"

#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

namespace gaptrain {
namespace {

using Code = Status::Code;

TEST(StatusTest, DefaultIsOk) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.code(), Code::kOk);
  EXPECT_EQ(s.message(), "");
  EXPECT_EQ(s.ToString(), "OK");
}

TEST(StatusTest, OkFactory) {
  Status s = Status::OK();
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.code(), Code::kOk);
  EXPECT_EQ(s.ToString(), "OK");
}

TEST(StatusTest, CodeAndMessageAreKept) {
  Status s(Code::kAborted, "stopped by the coordinator");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), Code::kAborted);
  EXPECT_EQ(s.message(), "stopped by the coordinator");
  EXPECT_EQ(s.ToString(), "ABORTED: stopped by the coordinator");
}

TEST(StatusTest, CodesAreNumberedAsGrpc) {
  EXPECT_EQ(static_cast<int>(Code::kOk), 0);
  EXPECT_EQ(static_cast<int>(Code::kCancelled), 1);
  EXPECT_EQ(static_cast<int>(Code::kUnknown), 2);
  EXPECT_EQ(static_cast<int>(Code::kInvalidArgument), 3);
  EXPECT_EQ(static_cast<int>(Code::kDeadlineExceeded), 4);
  EXPECT_EQ(static_cast<int>(Code::kNotFound), 5);
  EXPECT_EQ(static_cast<int>(Code::kAlreadyExists), 6);
  EXPECT_EQ(static_cast<int>(Code::kPermissionDenied), 7);
  EXPECT_EQ(static_cast<int>(Code::kResourceExhausted), 8);
  EXPECT_EQ(static_cast<int>(Code::kFailedPrecondition), 9);
  EXPECT_EQ(static_cast<int>(Code::kAborted), 10);
  EXPECT_EQ(static_cast<int>(Code::kOutOfRange), 11);
  EXPECT_EQ(static_cast<int>(Code::kUnimplemented), 12);
  EXPECT_EQ(static_cast<int>(Code::kInternal), 13);
  EXPECT_EQ(static_cast<int>(Code::kUnavailable), 14);
  EXPECT_EQ(static_cast<int>(Code::kDataLoss), 15);
  EXPECT_EQ(static_cast<int>(Code::kUnauthenticated), 16);
}

TEST(StatusTest, FactoriesSetTheirCode) {
  struct Case {
    Status status;
    Code code;
    const char* name;
  };
  const std::vector<Case> cases = {
      {Status::InvalidArgument("m"), Code::kInvalidArgument, "INVALID_ARGUMENT"},
      {Status::NotFound("m"), Code::kNotFound, "NOT_FOUND"},
      {Status::AlreadyExists("m"), Code::kAlreadyExists, "ALREADY_EXISTS"},
      {Status::FailedPrecondition("m"), Code::kFailedPrecondition, "FAILED_PRECONDITION"},
      {Status::OutOfRange("m"), Code::kOutOfRange, "OUT_OF_RANGE"},
      {Status::Unavailable("m"), Code::kUnavailable, "UNAVAILABLE"},
      {Status::DataLoss("m"), Code::kDataLoss, "DATA_LOSS"},
      {Status::Internal("m"), Code::kInternal, "INTERNAL"},
      {Status::Unauthenticated("m"), Code::kUnauthenticated, "UNAUTHENTICATED"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    EXPECT_FALSE(c.status.ok());
    EXPECT_EQ(c.status.code(), c.code);
    EXPECT_EQ(c.status.message(), "m");
    EXPECT_EQ(c.status.ToString(), std::string(c.name) + ": m");
  }
}

TEST(StatusTest, ToStringExampleFromHeader) {
  Status s = Status::InvalidArgument("gradient has 10 values, the model has 12");
  EXPECT_EQ(s.ToString(), "INVALID_ARGUMENT: gradient has 10 values, the model has 12");
}

TEST(StatusTest, StatusCodeNameCoversEveryCode) {
  const std::vector<std::pair<Code, const char*>> names = {
      {Code::kOk, "OK"},
      {Code::kCancelled, "CANCELLED"},
      {Code::kUnknown, "UNKNOWN"},
      {Code::kInvalidArgument, "INVALID_ARGUMENT"},
      {Code::kDeadlineExceeded, "DEADLINE_EXCEEDED"},
      {Code::kNotFound, "NOT_FOUND"},
      {Code::kAlreadyExists, "ALREADY_EXISTS"},
      {Code::kPermissionDenied, "PERMISSION_DENIED"},
      {Code::kResourceExhausted, "RESOURCE_EXHAUSTED"},
      {Code::kFailedPrecondition, "FAILED_PRECONDITION"},
      {Code::kAborted, "ABORTED"},
      {Code::kOutOfRange, "OUT_OF_RANGE"},
      {Code::kUnimplemented, "UNIMPLEMENTED"},
      {Code::kInternal, "INTERNAL"},
      {Code::kUnavailable, "UNAVAILABLE"},
      {Code::kDataLoss, "DATA_LOSS"},
      {Code::kUnauthenticated, "UNAUTHENTICATED"},
  };
  for (const auto& [code, name] : names) {
    EXPECT_STREQ(StatusCodeName(code), name);
  }
  // A value outside the enum still gets a name rather than garbage.
  EXPECT_STREQ(StatusCodeName(static_cast<Code>(99)), "UNKNOWN");
}

TEST(StatusTest, CopyAndMove) {
  Status a = Status::NotFound("worker 7");
  Status b = a;
  EXPECT_EQ(b.code(), Code::kNotFound);
  EXPECT_EQ(b.message(), "worker 7");
  Status c = std::move(a);
  EXPECT_EQ(c.code(), Code::kNotFound);
  EXPECT_EQ(c.message(), "worker 7");
  c = Status::OK();
  EXPECT_TRUE(c.ok());
}

// Helpers for the macro test.
Status Fails(int* calls) {
  ++*calls;
  return Status::DataLoss("truncated file");
}
Status Succeeds(int* calls) {
  ++*calls;
  return Status::OK();
}

Status RunsBoth(int* first, int* second, int* reached_end) {
  GAPTRAIN_RETURN_IF_ERROR(Succeeds(first));
  GAPTRAIN_RETURN_IF_ERROR(Succeeds(second));
  ++*reached_end;
  return Status::OK();
}

Status StopsAtFirstError(int* first, int* second, int* reached_end) {
  GAPTRAIN_RETURN_IF_ERROR(Fails(first));
  GAPTRAIN_RETURN_IF_ERROR(Succeeds(second));
  ++*reached_end;
  return Status::OK();
}

TEST(StatusTest, ReturnIfErrorPassesThroughOk) {
  int first = 0, second = 0, end = 0;
  Status s = RunsBoth(&first, &second, &end);
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(first, 1);
  EXPECT_EQ(second, 1);
  EXPECT_EQ(end, 1);
}

TEST(StatusTest, ReturnIfErrorReturnsTheErrorAndEvaluatesOnce) {
  int first = 0, second = 0, end = 0;
  Status s = StopsAtFirstError(&first, &second, &end);
  EXPECT_EQ(s.code(), Code::kDataLoss);
  EXPECT_EQ(s.message(), "truncated file");
  EXPECT_EQ(first, 1);  // the expression is evaluated exactly once
  EXPECT_EQ(second, 0);
  EXPECT_EQ(end, 0);
}

// The macro is a single statement: it works in an unbraced if/else.
Status MacroInIfElse(bool fail) {
  if (fail)
    GAPTRAIN_RETURN_IF_ERROR(Status::Internal("boom"));
  else
    GAPTRAIN_RETURN_IF_ERROR(Status::OK());
  return Status::OutOfRange("fell through");
}

TEST(StatusTest, ReturnIfErrorIsOneStatement) {
  EXPECT_EQ(MacroInIfElse(true).code(), Code::kInternal);
  EXPECT_EQ(MacroInIfElse(false).code(), Code::kOutOfRange);
}

}  // namespace
}  // namespace gaptrain
