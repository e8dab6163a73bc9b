#include "services/numeric/wire_values.h"

namespace gaptrain {

// x86-64 and arm64 Linux are little-endian, as the wire is; a big-endian
// port would swap here.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "wire format is little-endian");

size_t WireTypeSize(proto::WireType type) { return type == proto::BFLOAT16 ? 2 : 4; }

}  // namespace gaptrain
