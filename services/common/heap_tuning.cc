#include "services/common/heap_tuning.h"

#include <malloc.h>

namespace gaptrain {

void KeepFreedHeapForTransfers() { mallopt(M_TRIM_THRESHOLD, 64 << 20); }

}  // namespace gaptrain
