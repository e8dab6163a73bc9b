// FindNonFinite: the index of the first NaN or Inf in a buffer, or n when
// all values are finite. The common all-finite case is one vectorised pass
// (an OR over exponent bits per block); only a block that has a bad value
// is scanned again to locate it.

#ifndef GAPTRAIN_SERVICES_NUMERIC_FINITE_SCAN_H_
#define GAPTRAIN_SERVICES_NUMERIC_FINITE_SCAN_H_

#include <cstddef>
#include <cstdint>

#include "services/numeric/bfloat16.h"

namespace gaptrain {

size_t FindNonFinite(const float* values, size_t n);
size_t FindNonFinite(const bf16_t* values, size_t n);

// The same over n little-endian values stored at any alignment, as they
// lie in received network buffers.
size_t FindNonFiniteFloatBytes(const uint8_t* bytes, size_t n);
size_t FindNonFiniteBf16Bytes(const uint8_t* bytes, size_t n);

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_NUMERIC_FINITE_SCAN_H_
