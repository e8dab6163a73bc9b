// Fuzz target: the bf16 conversions (bfloat16.h) and the non-finite scans
// (finite_scan.h) over arbitrary bytes at any alignment, as they meet
// received network buffers. Contract: the vectorised scans find exactly
// the first NaN/Inf a plain loop finds, never read past n values, and
// agree between the typed and the byte-wise entry points; the bulk
// conversions equal the scalar ones; a bf16 value survives a round trip
// through float; a finite float rounds to the nearest bf16.

#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "services/numeric/bfloat16.h"
#include "services/numeric/finite_scan.h"
#include "services/testing/fuzz_contract.h"

namespace gaptrain {
namespace {

template <class T>
size_t FirstNonFiniteByLoop(const std::vector<T>& values) {
  for (size_t i = 0; i < values.size(); ++i) {
    if (!std::isfinite(LoadAsFloat(values.data(), i))) return i;
  }
  return values.size();
}

template <class T>
std::vector<T> ValuesOf(const uint8_t* data, size_t size) {
  std::vector<T> values(size / sizeof(T));
  if (!values.empty()) std::memcpy(values.data(), data, values.size() * sizeof(T));
  return values;
}

void CheckScans(const uint8_t* data, size_t size) {
  const std::vector<float> floats = ValuesOf<float>(data, size);
  const size_t float_bad = FirstNonFiniteByLoop(floats);
  FuzzExpect(FindNonFinite(floats.data(), floats.size()) == float_bad, "FindNonFinite(float)");
  FuzzExpect(FindNonFiniteFloatBytes(data, floats.size()) == float_bad,
             "FindNonFiniteFloatBytes");

  const std::vector<bf16_t> halves = ValuesOf<bf16_t>(data, size);
  const size_t half_bad = FirstNonFiniteByLoop(halves);
  FuzzExpect(FindNonFinite(halves.data(), halves.size()) == half_bad, "FindNonFinite(bf16)");
  FuzzExpect(FindNonFiniteBf16Bytes(data, halves.size()) == half_bad, "FindNonFiniteBf16Bytes");
}

void CheckConversions(const uint8_t* data, size_t size) {
  const std::vector<float> floats = ValuesOf<float>(data, size);
  std::vector<bf16_t> bulk(floats.size());
  FloatsToBf16(floats.data(), floats.size(), bulk.data());
  for (size_t i = 0; i < floats.size(); ++i) {
    const float f = floats[i];
    FuzzExpect(bulk[i] == FloatToBf16(f) || std::isnan(f), "FloatsToBf16 differs from FloatToBf16");
    if (!std::isfinite(f)) continue;
    // Nearest: no other bf16 is closer to f than the chosen one.
    const bf16_t b = FloatToBf16(f);
    const double chosen = Bf16ToFloat(b);
    if (!std::isfinite(chosen)) {
      // Only values past the largest finite bf16's rounding boundary
      // overflow to infinity.
      const double largest = Bf16ToFloat(0x7F7F);
      FuzzExpect(std::fabs(double{f}) >= largest + std::ldexp(1.0, 119),
                 "FloatToBf16 overflowed a value that rounds to a finite bf16");
      continue;
    }
    const double error = std::fabs(chosen - f);
    const double below = Bf16ToFloat(static_cast<bf16_t>(b - 1));
    const double above = Bf16ToFloat(static_cast<bf16_t>(b + 1));
    if (std::isfinite(below) && (b & 0x7FFF) != 0) {
      FuzzExpect(error <= std::fabs(below - f), "FloatToBf16 is not the nearest (below)");
    }
    if (std::isfinite(above) && (b & 0x7FFF) != 0x7F7F) {
      FuzzExpect(error <= std::fabs(above - f), "FloatToBf16 is not the nearest (above)");
    }
  }

  const std::vector<bf16_t> halves = ValuesOf<bf16_t>(data, size);
  std::vector<float> widened(halves.size());
  Bf16ToFloats(halves.data(), halves.size(), widened.data());
  for (size_t i = 0; i < halves.size(); ++i) {
    const float scalar = Bf16ToFloat(halves[i]);
    FuzzExpect(std::memcmp(&widened[i], &scalar, sizeof scalar) == 0,
               "Bf16ToFloats differs from Bf16ToFloat");
    if (!std::isnan(widened[i])) {
      FuzzExpect(FloatToBf16(widened[i]) == halves[i], "bf16 -> float -> bf16 is not exact");
    }
  }
}

}  // namespace
}  // namespace gaptrain

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Every alignment a received slice can have: the input itself (exactly
  // sized: a scan past n values is a heap overflow) and its tails.
  for (size_t skip = 0; skip < 4 && skip <= size; ++skip) {
    gaptrain::CheckScans(data + skip, size - skip);
  }
  gaptrain::CheckConversions(data, size);
  return 0;
}
