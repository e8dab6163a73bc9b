#include "services/base/blas_environment.h"

#include <gtest/gtest.h>

#include <cstdlib>

namespace gaptrain {
namespace {

using Env = std::vector<std::pair<std::string, std::string>>;

TEST(BlasStartEnvironmentTest, StartsOpenBlasWithOneThreadWhenNobodySaidOtherwise) {
  unsetenv("OPENBLAS_NUM_THREADS");
  EXPECT_EQ(BlasStartEnvironment(), (Env{{"OPENBLAS_NUM_THREADS", "1"}}));
}

TEST(BlasStartEnvironmentTest, TheUsersOwnSettingWins) {
  setenv("OPENBLAS_NUM_THREADS", "4", 1);
  EXPECT_EQ(BlasStartEnvironment(), Env{});
  // Set but empty is still the user's choice: OpenBLAS then uses its default.
  setenv("OPENBLAS_NUM_THREADS", "", 1);
  EXPECT_EQ(BlasStartEnvironment(), Env{});
  unsetenv("OPENBLAS_NUM_THREADS");
}

}  // namespace
}  // namespace gaptrain
