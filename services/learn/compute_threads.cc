// SetComputeThreads.
//
// Debian's LibTorch runs its intra-op pool on OpenMP: at::set_num_threads
// stores the count globally and sets the calling thread's OpenMP count;
// other threads pick the global count up at their first parallel region.
// Call SetComputeThreads before the compute threads start.
//
// Measured on the 2-core development machine while another process kept
// one core busy: 2 threads made a step 10-18x SLOWER than 1 (mlp batch 128:
// 40 ms instead of 2.8 ms; lenet5: 250 ms instead of 22 ms), because every
// OpenMP fork-join waits for a worker that only runs when the scheduler
// lends it the busy core, and libgomp's workers spin while waiting.
// OMP_WAIT_POLICY=PASSIVE in the worker's environment (libgomp reads it when
// it loads, before main, so setenv cannot do it) cut that to about 2.5x.
// Use more than one thread only on cores the worker has to itself.
//
// OpenBLAS (libopenblas0-pthread, reached through libblas.so.3) keeps its
// own pool, sized from OPENBLAS_NUM_THREADS when the library loads, which
// has already happened by the time main() runs; openblas_set_num_threads is
// the only way to change it afterwards. It is looked up with dlsym so a
// build linked against another BLAS simply skips it.

#include "services/learn/compute_threads.h"

#include <dlfcn.h>

#include <ATen/Parallel.h>

#include <algorithm>
#include <mutex>

namespace gaptrain {

void SetComputeThreads(int threads) {
  threads = std::max(1, threads);
  at::set_num_threads(threads);

  // Settable once, and only before the inter-op pool has started; LibTorch
  // throws otherwise, and then whatever was set first stays.
  static std::once_flag interop_once;
  std::call_once(interop_once, [] {
    try {
      at::set_num_interop_threads(1);
    } catch (...) {
    }
  });

  using SetThreadsFn = void (*)(int);
  static const auto openblas_set_num_threads =
      reinterpret_cast<SetThreadsFn>(::dlsym(RTLD_DEFAULT, "openblas_set_num_threads"));
  if (openblas_set_num_threads != nullptr) openblas_set_num_threads(threads);
}

}  // namespace gaptrain
