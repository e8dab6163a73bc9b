// Runs with OPENBLAS_NUM_THREADS=1 in its environment (BUILD), as every
// process gaptrain launches does (services/base/blas_environment.h): the
// compute thread count asked for must still reach OpenBLAS.
#include "services/learn/compute_threads.h"

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <ATen/Parallel.h>

namespace gaptrain {
namespace {

int OpenBlasThreads() {
  using GetThreadsFn = int (*)();
  const auto get =
      reinterpret_cast<GetThreadsFn>(::dlsym(RTLD_DEFAULT, "openblas_get_num_threads"));
  return get != nullptr ? get() : -1;
}

TEST(ComputeThreadsTest, GrowsAndShrinksAPoolThatStartedWithOneThread) {
  const int at_start = OpenBlasThreads();
  if (at_start < 0) GTEST_SKIP() << "this LibTorch does not use OpenBLAS";
  ASSERT_EQ(at_start, 1) << "the test's environment sets OPENBLAS_NUM_THREADS=1";

  SetComputeThreads(3);
  EXPECT_EQ(OpenBlasThreads(), 3);
  EXPECT_EQ(at::get_num_threads(), 3);

  SetComputeThreads(1);
  EXPECT_EQ(OpenBlasThreads(), 1);
  EXPECT_EQ(at::get_num_threads(), 1);

  SetComputeThreads(0);  // below 1 means 1
  EXPECT_EQ(OpenBlasThreads(), 1);
}

}  // namespace
}  // namespace gaptrain
