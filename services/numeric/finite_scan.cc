#include "services/numeric/finite_scan.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace gaptrain {
namespace {

constexpr size_t kBlock = 4096;

// Compiled for AVX2 and for baseline x86-64; the loader picks the best the
// CPU has (the scan is exact integer work either way).
// Not under ThreadSanitizer, which cannot run the clone resolver (it
// runs before the runtime is up).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && \
    !defined(__SANITIZE_THREAD__)
#define GAPTRAIN_SCAN_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define GAPTRAIN_SCAN_CLONES
#endif

// Value j of the buffer, at any alignment (memcpy compiles to one
// unaligned load).
template <class Bits>
inline Bits Load(const uint8_t* bytes, size_t j) {
  Bits x;
  std::memcpy(&x, bytes + j * sizeof(Bits), sizeof(Bits));
  return x;
}

// All exponent bits set: Inf or NaN. Adding the exponent's lowest bit to
// the masked exponent carries into the sign bit exactly then, so a block
// is one AND, ADD and OR per value.
template <class Bits, Bits kExponent>
GAPTRAIN_SCAN_CLONES size_t FindAllOnesExponent(const uint8_t* bytes, size_t n) {
  constexpr Bits kLowest = static_cast<Bits>(kExponent & ~(kExponent - 1));
  constexpr Bits kSign = static_cast<Bits>(kExponent + kLowest);
  for (size_t b0 = 0; b0 < n; b0 += kBlock) {
    const size_t b1 = std::min(n, b0 + kBlock);
    Bits carried = 0;
    for (size_t j = b0; j < b1; ++j) {
      carried |= static_cast<Bits>((Load<Bits>(bytes, j) & kExponent) + kLowest);
    }
    if ((carried & kSign) == 0) continue;
    for (size_t j = b0; j < b1; ++j) {
      if ((Load<Bits>(bytes, j) & kExponent) == kExponent) return j;
    }
  }
  return n;
}

}  // namespace

size_t FindNonFiniteFloatBytes(const uint8_t* bytes, size_t n) {
  static_assert(sizeof(float) == sizeof(uint32_t), "float must be 32-bit");
  return FindAllOnesExponent<uint32_t, 0x7F800000u>(bytes, n);
}

size_t FindNonFiniteBf16Bytes(const uint8_t* bytes, size_t n) {
  return FindAllOnesExponent<uint16_t, 0x7F80u>(bytes, n);
}

size_t FindNonFinite(const float* values, size_t n) {
  return FindNonFiniteFloatBytes(reinterpret_cast<const uint8_t*>(values), n);
}

size_t FindNonFinite(const bf16_t* values, size_t n) {
  return FindNonFiniteBf16Bytes(reinterpret_cast<const uint8_t*>(values), n);
}

}  // namespace gaptrain
