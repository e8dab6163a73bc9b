#include "services/base/heap_policy.h"

#include <malloc.h>

namespace gaptrain {

void UseTrainingHeapPolicy() {
  // All three together: setting any of them freezes glibc's otherwise
  // adaptive mmap threshold, and the trim threshold alone would leave it at
  // 128 KiB (every tensor mapped and unmapped per step).
  mallopt(M_MMAP_THRESHOLD, 256 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  mallopt(M_TOP_PAD, 64 << 20);
}

}  // namespace gaptrain
