#include "services/base/heap_policy.h"

#include <gtest/gtest.h>
#include <sys/resource.h>

#include <cstdlib>
#include <cstring>

namespace gaptrain {
namespace {

// ASan and TSan bring their own allocator: glibc's malloc settings, which
// these tests measure, do not apply (scripts/sanitize.sh runs them so).
bool MallocIsReplaced() {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  return true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
  return true;
#endif
#endif
  return false;
}

long MinorFaults() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_minflt;
}

// What a training step does to the heap: allocate a tensor, write it, free
// it, again and again. 200 steps of a 2 MiB block touch 102,400 pages; with
// the policy the block's pages are reused, so only the first step faults.
long FaultsOfRepeatedSteps() {
  constexpr size_t kBytes = 2 << 20;
  const long before = MinorFaults();
  for (int step = 0; step < 200; ++step) {
    char* block = static_cast<char*>(std::malloc(kBytes));
    std::memset(block, step, kBytes);
    asm volatile("" : : "r"(block) : "memory");  // keep the writes
    std::free(block);
  }
  return MinorFaults() - before;
}

TEST(HeapPolicyTest, RepeatedTensorSizedBlocksFaultOnlyOnce) {
  if (MallocIsReplaced()) GTEST_SKIP() << "a sanitizer replaces malloc";
  UseTrainingHeapPolicy();
  UseTrainingHeapPolicy();  // idempotent
  // One step's 512 pages, plus slack for the heap's growth (64 MiB of top
  // pad is reserved, not touched) and gtest's own allocations.
  EXPECT_LT(FaultsOfRepeatedSteps(), 2000);
}

TEST(HeapPolicyTest, FreedHeapBeyondTheOldTrimThresholdIsKept) {
  if (MallocIsReplaced()) GTEST_SKIP() << "a sanitizer replaces malloc";
  UseTrainingHeapPolicy();
  // 100 MB live at once, as a 25M-parameter push received in 64 KiB slices,
  // then freed; the next push reuses the pages instead of faulting them in.
  constexpr int kSlices = 1600;
  constexpr size_t kSlice = 64 << 10;
  char* slices[kSlices];
  auto push = [&] {
    for (char*& s : slices) {
      s = static_cast<char*>(std::malloc(kSlice));
      std::memset(s, 1, kSlice);
    }
    for (char* s : slices) std::free(s);
  };
  push();
  const long before = MinorFaults();
  push();
  EXPECT_LT(MinorFaults() - before, 2000);  // 25,600 pages without the policy
}

}  // namespace
}  // namespace gaptrain
