// bfloat16 <-> float32 conversion for Gap snapshots and the wire.
// bf16 keeps float32's exponent and the top 7 mantissa bits: enough for a
// Gap |θ - θ⁽ⁱ⁾| / C, at half the memory and traffic. Conversions are
// branch-free so loops over buffers vectorise.

#ifndef GAPTRAIN_SERVICES_NUMERIC_BFLOAT16_H_
#define GAPTRAIN_SERVICES_NUMERIC_BFLOAT16_H_

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace gaptrain {

using bf16_t = uint16_t;

// Round to nearest, ties to even. Finite inputs only: a NaN may come out
// as Inf, NaN or ±0 (the engine rejects non-finite values first).
inline bf16_t FloatToBf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  bits += 0x7FFFu + ((bits >> 16) & 1u);
  return static_cast<bf16_t>(bits >> 16);
}

inline float Bf16ToFloat(bf16_t b) {
  uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// Loads element j of a worker copy stored as float32 or bf16.
inline float LoadAsFloat(const float* p, size_t j) { return p[j]; }
inline float LoadAsFloat(const bf16_t* p, size_t j) { return Bf16ToFloat(p[j]); }

void FloatsToBf16(const float* in, size_t n, bf16_t* out);
void Bf16ToFloats(const bf16_t* in, size_t n, float* out);

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_NUMERIC_BFLOAT16_H_
