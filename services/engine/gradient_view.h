// GradientView: the P values of a pushed gradient as the update rules read
// them, one range at a time.
//
// A gradient is either one float array (the simulator, tests) or the wire
// bytes of a push still in the buffers gRPC received them into: fp32 or
// bf16, in pieces of any size and alignment. Rules read the latter in
// blocks of kBlock values decoded into a scratch that stays in L1 cache, so
// a push reaches θ without first being copied into a model-sized buffer:
// one pass over memory less for every push (docs/performance.md).

#ifndef GAPTRAIN_SERVICES_ENGINE_GRADIENT_VIEW_H_
#define GAPTRAIN_SERVICES_ENGINE_GRADIENT_VIEW_H_

#include <cstddef>

#include "services/engine/flat_buffer.h"
#include "services/numeric/bfloat16.h"
#include "services/numeric/sliced_bytes.h"

namespace gaptrain {

class GradientView {
 public:
  // Values per Read of wire bytes: 16 KiB of floats, a multiple of the
  // rules' statistics block (kStatsBlock).
  static constexpr size_t kBlock = 4096;

  // Where wire values are decoded; one per reading thread.
  struct Scratch {
    alignas(64) float values[kBlock];
    bf16_t wire[kBlock];
  };

  // No gradient (size 0).
  GradientView() = default;
  // `size` floats at `values`.
  GradientView(const float* values, size_t size) : values_(values), size_(size) {}
  // `size` little-endian values of `type` in `bytes`, which must hold
  // exactly size * DTypeSize(type) bytes.
  GradientView(const SlicedBytes* bytes, DType type, size_t size)
      : bytes_(bytes), type_(type), size_(size) {}

  size_t size() const { return size_; }
  bool empty() const { return values_ == nullptr && bytes_ == nullptr; }
  // True for a float array: Read never copies, for any range.
  bool contiguous() const { return values_ != nullptr; }

  // Values [begin, end) as floats: a pointer into the array, or into
  // `scratch` after decoding them there (then end − begin <= kBlock). Valid
  // until the next Read into the same scratch.
  const float* Read(size_t begin, size_t end, Scratch* scratch) const;

  // The index of the first NaN or Inf, or size() when every value is finite.
  size_t FindNonFinite() const;

  // Value `index` (for messages; not for loops).
  float At(size_t index) const;

 private:
  const float* values_ = nullptr;
  const SlicedBytes* bytes_ = nullptr;
  DType type_ = DType::kFloat32;
  size_t size_ = 0;
};

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_ENGINE_GRADIENT_VIEW_H_
