// The heap policy of every gaptrain process that runs LibTorch or moves
// models over gRPC: freed memory stays in the process for the next training
// step or transfer instead of going back to the kernel at once.
//
// Why: every LibTorch step allocates and frees the same temporaries (a
// LeNet-5 batch's activations are 1-2 MB each), and a 25M-parameter push
// arrives as 100 MB of gRPC slices. glibc maps each block above its mmap
// threshold afresh and unmaps it on free, and trims the top of the heap
// above 128 KiB, so the next step faults the same pages in again, zeroed.
// On a virtual machine (every cloud and spot node) a page fault is
// expensive: the README's job spent 40% of its CPU time in the kernel and
// ran 8x slower (docs/performance.md, "The heap").
//
// What callers may rely on: after the call, blocks up to 256 MiB come from
// the heap, up to 1 GiB of freed heap per arena is kept for reuse, and the
// heap grows 64 MiB at a time. Call it first thing in main(), before any
// thread starts; calling it again changes nothing.

#ifndef GAPTRAIN_SERVICES_BASE_HEAP_POLICY_H_
#define GAPTRAIN_SERVICES_BASE_HEAP_POLICY_H_

namespace gaptrain {

void UseTrainingHeapPolicy();

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_BASE_HEAP_POLICY_H_
