#include "services/common/wire_values.h"

#include <cstdint>
#include <cstring>

#include "services/common/bfloat16.h"

namespace gaptrain {

// x86-64 and arm64 Linux are little-endian, as the wire is; a big-endian
// port would swap here.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "wire format is little-endian");

size_t WireTypeSize(proto::WireType type) { return type == proto::BFLOAT16 ? 2 : 4; }

void EncodeValues(const float* values, size_t n, proto::WireType type, std::string* out) {
  out->resize(n * WireTypeSize(type));
  if (type == proto::BFLOAT16) {
    FloatsToBf16(values, n, reinterpret_cast<bf16_t*>(out->data()));
  } else {
    std::memcpy(out->data(), values, n * sizeof(float));
  }
}

size_t CountValues(const std::string& bytes, proto::WireType type) {
  size_t size = WireTypeSize(type);
  return bytes.size() % size == 0 ? bytes.size() / size : SIZE_MAX;
}

void DecodeValues(const std::string& bytes, proto::WireType type, float* out) {
  if (type == proto::BFLOAT16) {
    // std::string data is only 1-byte aligned: load bf16 values bytewise.
    const unsigned char* p = reinterpret_cast<const unsigned char*>(bytes.data());
    const size_t n = bytes.size() / 2;
    for (size_t i = 0; i < n; ++i) {
      out[i] = Bf16ToFloat(static_cast<bf16_t>(p[2 * i] | (p[2 * i + 1] << 8)));
    }
  } else {
    std::memcpy(out, bytes.data(), bytes.size());
  }
}

}  // namespace gaptrain
