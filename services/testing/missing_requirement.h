// What a test does when something it needs is missing here (a tool such as
// kubectl or kube-apiserver, root for network namespaces): on a developer's
// machine it skips, saying what is missing; in CI (the environment variable
// CI is "true" or "1", as GitHub Actions, GitLab and most CI systems set it)
// it fails, because there everything must be present and a skipped test
// would pass unnoticed. scripts/test.sh counts skipped tests apart from
// passed ones.
//
//   if (!found.ok()) GAPTRAIN_SKIP_OR_FAIL_IN_CI(found.message());
//
// Like GTEST_SKIP and FAIL, it returns from the current function (use it in
// a test body, SetUp or a void helper). Bazel passes CI to tests
// (.bazelrc: --test_env=CI).

#ifndef GAPTRAIN_SERVICES_TESTING_MISSING_REQUIREMENT_H_
#define GAPTRAIN_SERVICES_TESTING_MISSING_REQUIREMENT_H_

#include <gtest/gtest.h>

namespace gaptrain {

// True when the environment variable CI is "true" or "1".
bool RunningInCi();

}  // namespace gaptrain

#define GAPTRAIN_SKIP_OR_FAIL_IN_CI(message)                                      \
  do {                                                                            \
    if (::gaptrain::RunningInCi()) {                                              \
      GTEST_FAIL() << "CI=true, so this test may not skip: " << (message);        \
    } else {                                                                      \
      GTEST_SKIP() << (message);                                                  \
    }                                                                             \
  } while (0)

#endif  // GAPTRAIN_SERVICES_TESTING_MISSING_REQUIREMENT_H_
