// FlatBuffer: an owned, zero-initialised, 64-byte-aligned array of float32 or
// bf16 values. The parameter vector, momenta, running means and Gap snapshots
// are all FlatBuffers of the model's length P, so update rules are single
// passes over aligned arrays.

#ifndef GAPTRAIN_SERVICES_ENGINE_FLAT_BUFFER_H_
#define GAPTRAIN_SERVICES_ENGINE_FLAT_BUFFER_H_

#include <cstddef>
#include <cstdint>
#include <memory>

#include "services/numeric/bfloat16.h"

namespace gaptrain {

enum class DType : uint8_t { kFloat32 = 0, kBfloat16 = 1 };

inline size_t DTypeSize(DType t) { return t == DType::kFloat32 ? 4 : 2; }
const char* DTypeName(DType t);  // "fp32" | "bf16"

class FlatBuffer {
 public:
  static constexpr size_t kAlignment = 64;

  FlatBuffer() = default;
  FlatBuffer(DType dtype, size_t size);  // zero-filled

  FlatBuffer(FlatBuffer&&) noexcept = default;
  FlatBuffer& operator=(FlatBuffer&&) noexcept = default;
  FlatBuffer(const FlatBuffer&) = delete;
  FlatBuffer& operator=(const FlatBuffer&) = delete;

  DType dtype() const { return dtype_; }
  size_t size() const { return size_; }  // elements
  size_t bytes() const { return size_ * DTypeSize(dtype_); }

  // Typed access; the dtype must match (checked with assert).
  float* f32();
  const float* f32() const;
  bf16_t* bf16();
  const bf16_t* bf16() const;

  void* data() { return data_.get(); }
  const void* data() const { return data_.get(); }

  void Fill(float value);
  // Stores `n == size()` floats, converting to this buffer's dtype.
  void CopyFrom(const float* values);

 private:
  struct FreeDeleter {
    void operator()(void* p) const;
  };
  DType dtype_ = DType::kFloat32;
  size_t size_ = 0;
  std::unique_ptr<void, FreeDeleter> data_;
};

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_ENGINE_FLAT_BUFFER_H_
