// BlasStartEnvironment: what a launcher puts in the environment of a
// process that will load LibTorch, so that OpenBLAS does not start a thread
// pool nobody asked for.
//
// Why: Debian's LibTorch loads OpenBLAS (libopenblas0-pthread), which starts
// one thread per CPU as it loads, before main(), and those threads spin in
// sched_yield for about 0.1 s waiting for work that does not come. gaptrain
// sizes the pool itself once it knows its thread count (SetComputeThreads in
// services/learn/compute_threads.h grows it from 1 when asked for more), so
// the pool made at load time is waste: on 2 vCPUs `gaptrain-worker --help`
// took 0.58 s of CPU with it and 0.47 s without, and the five workers of
// `gaptrain run` start together on the same cores (docs/performance.md).
// The variable must be in the environment before the process starts:
// OpenBLAS reads it when the dynamic loader loads it.
//
// What callers may rely on: the pairs returned are exactly the variables
// the caller's own environment does not set (a user's setting wins); add
// them to the environment of every child that loads LibTorch.

#ifndef GAPTRAIN_SERVICES_BASE_BLAS_ENVIRONMENT_H_
#define GAPTRAIN_SERVICES_BASE_BLAS_ENVIRONMENT_H_

#include <string>
#include <utility>
#include <vector>

namespace gaptrain {

std::vector<std::pair<std::string, std::string>> BlasStartEnvironment();

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_BASE_BLAS_ENVIRONMENT_H_
