// GoogleTest assertions on Status values: ASSERT_OK(expr) and
// EXPECT_OK(expr) print the Status when it is not OK.

#ifndef GAPTRAIN_SERVICES_TESTING_STATUS_ASSERTIONS_H_
#define GAPTRAIN_SERVICES_TESTING_STATUS_ASSERTIONS_H_

#include <gtest/gtest.h>

#include "services/base/status.h"

#define ASSERT_OK(expr)                                   \
  do {                                                    \
    const ::gaptrain::Status status_of_expr_ = (expr);    \
    ASSERT_TRUE(status_of_expr_.ok()) << status_of_expr_.ToString(); \
  } while (0)

#define EXPECT_OK(expr)                                   \
  do {                                                    \
    const ::gaptrain::Status status_of_expr_ = (expr);    \
    EXPECT_TRUE(status_of_expr_.ok()) << status_of_expr_.ToString(); \
  } while (0)

#endif  // GAPTRAIN_SERVICES_TESTING_STATUS_ASSERTIONS_H_
