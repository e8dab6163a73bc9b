// How the heap behaves in processes that move models over gRPC.

#ifndef GAPTRAIN_SERVICES_COMMON_HEAP_TUNING_H_
#define GAPTRAIN_SERVICES_COMMON_HEAP_TUNING_H_

namespace gaptrain {

// Process-wide; call once at start in a process that moves models over
// gRPC (the master, a worker). gRPC receives into heap blocks of 8-64 KiB.
// With glibc's default trim threshold (128 KiB) the heap that one received
// chunk used goes back to the kernel as soon as the chunk is freed, and the
// next chunk faults the same pages in again, zeroed: about a tenth of a
// transfer's CPU time (docs/performance.md). This keeps up to 64 MiB of
// freed heap for reuse instead.
void KeepFreedHeapForTransfers();

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_COMMON_HEAP_TUNING_H_
