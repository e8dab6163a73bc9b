#include "services/common/finite_scan.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace gaptrain {
namespace {

constexpr size_t kBlock = 4096;

// All exponent bits set: Inf or NaN.
template <class Bits, Bits kExponent>
size_t FindAllOnesExponent(const Bits* bits, size_t n) {
  for (size_t b0 = 0; b0 < n; b0 += kBlock) {
    const size_t b1 = std::min(n, b0 + kBlock);
    Bits bad = 0;
    for (size_t j = b0; j < b1; ++j) {
      bad |= static_cast<Bits>((bits[j] & kExponent) == kExponent);
    }
    if (bad == 0) continue;
    for (size_t j = b0; j < b1; ++j) {
      if ((bits[j] & kExponent) == kExponent) return j;
    }
  }
  return n;
}

}  // namespace

size_t FindNonFinite(const float* values, size_t n) {
  static_assert(sizeof(float) == sizeof(uint32_t), "float must be 32-bit");
  // Reading float storage through uint32_t: same size and alignment; the
  // buffers come from the network or aligned_alloc, never from a float
  // object whose lifetime the compiler tracks across this call.
  return FindAllOnesExponent<uint32_t, 0x7F800000u>(
      reinterpret_cast<const uint32_t*>(values), n);
}

size_t FindNonFinite(const bf16_t* values, size_t n) {
  return FindAllOnesExponent<uint16_t, 0x7F80u>(values, n);
}

}  // namespace gaptrain
