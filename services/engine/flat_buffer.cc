#include "services/engine/flat_buffer.h"

#include <cassert>
#include <cstdlib>
#include <cstring>
#include <new>

namespace gaptrain {

const char* DTypeName(DType t) { return t == DType::kFloat32 ? "fp32" : "bf16"; }

void FlatBuffer::FreeDeleter::operator()(void* p) const { std::free(p); }

FlatBuffer::FlatBuffer(DType dtype, size_t size) : dtype_(dtype), size_(size) {
  size_t bytes = size * DTypeSize(dtype);
  // aligned_alloc wants a multiple of the alignment; never ask for 0 bytes.
  size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  if (rounded == 0) rounded = kAlignment;
  void* p = std::aligned_alloc(kAlignment, rounded);
  if (p == nullptr) throw std::bad_alloc();
  std::memset(p, 0, rounded);
  data_.reset(p);
}

float* FlatBuffer::f32() {
  assert(dtype_ == DType::kFloat32);
  return static_cast<float*>(data_.get());
}
const float* FlatBuffer::f32() const {
  assert(dtype_ == DType::kFloat32);
  return static_cast<const float*>(data_.get());
}
bf16_t* FlatBuffer::bf16() {
  assert(dtype_ == DType::kBfloat16);
  return static_cast<bf16_t*>(data_.get());
}
const bf16_t* FlatBuffer::bf16() const {
  assert(dtype_ == DType::kBfloat16);
  return static_cast<const bf16_t*>(data_.get());
}

void FlatBuffer::Fill(float value) {
  if (dtype_ == DType::kFloat32) {
    float* p = f32();
    for (size_t i = 0; i < size_; ++i) p[i] = value;
  } else {
    bf16_t b = FloatToBf16(value);
    bf16_t* p = bf16();
    for (size_t i = 0; i < size_; ++i) p[i] = b;
  }
}

void FlatBuffer::CopyFrom(const float* values) {
  if (dtype_ == DType::kFloat32) {
    std::memcpy(f32(), values, size_ * sizeof(float));
  } else {
    FloatsToBf16(values, size_, bf16());
  }
}

}  // namespace gaptrain
