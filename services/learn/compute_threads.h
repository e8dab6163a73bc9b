// The math libraries' thread pools are process-wide. gaptrain sets them
// explicitly: on a small machine, LibTorch's intra-op pool and OpenBLAS's
// pool oversubscribing the cores made a LeNet step 10x slower.

#ifndef GAPTRAIN_SERVICES_LEARN_COMPUTE_THREADS_H_
#define GAPTRAIN_SERVICES_LEARN_COMPUTE_THREADS_H_

namespace gaptrain {

// Sets LibTorch's intra-op threads and OpenBLAS's threads to `threads`
// (>= 1) and LibTorch's inter-op threads to 1 (only settable once per
// process; later calls leave it).
void SetComputeThreads(int threads);

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_LEARN_COMPUTE_THREADS_H_
