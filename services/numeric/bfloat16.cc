#include "services/numeric/bfloat16.h"

namespace gaptrain {

void FloatsToBf16(const float* __restrict in, size_t n, bf16_t* __restrict out) {
  for (size_t i = 0; i < n; ++i) out[i] = FloatToBf16(in[i]);
}

void Bf16ToFloats(const bf16_t* __restrict in, size_t n, float* __restrict out) {
  for (size_t i = 0; i < n; ++i) out[i] = Bf16ToFloat(in[i]);
}

}  // namespace gaptrain
