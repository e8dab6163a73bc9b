// Float values on the wire (proto bytes fields): little-endian float32, or
// bfloat16, which halves traffic. services/master/chunk_wire.h reads and
// writes them in place in gRPC's buffers.

#ifndef GAPTRAIN_SERVICES_NUMERIC_WIRE_VALUES_H_
#define GAPTRAIN_SERVICES_NUMERIC_WIRE_VALUES_H_

#include <cstddef>

#include "proto/gaptrain.pb.h"

namespace gaptrain {

// Bytes per value: 4 for FLOAT32, 2 for BFLOAT16.
size_t WireTypeSize(proto::WireType type);

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_NUMERIC_WIRE_VALUES_H_
