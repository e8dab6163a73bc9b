// Float values on the wire (proto bytes fields): little-endian float32, or
// bfloat16, which halves traffic. One pass each way, no temporaries.

#ifndef GAPTRAIN_SERVICES_COMMON_WIRE_VALUES_H_
#define GAPTRAIN_SERVICES_COMMON_WIRE_VALUES_H_

#include <cstddef>
#include <string>

#include "proto/gaptrain.pb.h"

namespace gaptrain {

// Bytes per value: 4 for FLOAT32, 2 for BFLOAT16.
size_t WireTypeSize(proto::WireType type);

// Replaces *out with `n` values encoded as `type`.
void EncodeValues(const float* values, size_t n, proto::WireType type, std::string* out);

// Number of values in `bytes`, or SIZE_MAX when its length is not a
// multiple of the value size.
size_t CountValues(const std::string& bytes, proto::WireType type);

// Decodes all of `bytes` (CountValues values) into `out`.
void DecodeValues(const std::string& bytes, proto::WireType type, float* out);

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_COMMON_WIRE_VALUES_H_
