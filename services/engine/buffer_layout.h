// BufferLayout: a module's buffers (BatchNorm's running mean and variance,
// its int64 batch count, any registered buffer): names, shapes and element
// types, and how their values lie packed back to back as little-endian
// bytes, in the module's named_buffers() order. Unlike parameters they are
// not trained: trainers send theirs, and the master folds them into its own
// (MergeBufferValues) for the evaluator, checkpoints and export.

#ifndef GAPTRAIN_SERVICES_ENGINE_BUFFER_LAYOUT_H_
#define GAPTRAIN_SERVICES_ENGINE_BUFFER_LAYOUT_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "services/base/status.h"

namespace gaptrain {

enum class BufferDType { kFloat32, kFloat64, kInt64, kInt32, kUint8, kBool };

// "float32", "int64", ... (PyTorch's names without "torch.").
const char* BufferDTypeName(BufferDType dtype);
// Bytes per element.
size_t BufferDTypeSize(BufferDType dtype);
// From a name as BufferDTypeName writes it; false for any other.
bool ParseBufferDType(const std::string& name, BufferDType* dtype);

struct BufferSpec {
  std::string name;            // "bn1.running_mean"
  std::vector<int64_t> shape;  // {} is a scalar (num_batches_tracked)
  BufferDType dtype = BufferDType::kFloat32;
  size_t offset = 0;           // first byte in the packed values
  size_t bytes = 0;            // elements times the element size
};

class BufferLayout {
 public:
  // The most bytes a model's buffers may hold: they travel in one message.
  static constexpr size_t kMaxBytes = size_t{4} << 20;

  // Appends a buffer after the last one. Fails on an empty or duplicate
  // name, a negative dimension, or a total beyond kMaxBytes.
  Status Add(const std::string& name, const std::vector<int64_t>& shape, BufferDType dtype);

  const std::vector<BufferSpec>& buffers() const { return buffers_; }
  bool empty() const { return buffers_.empty(); }
  // The packed values' size.
  size_t bytes() const { return bytes_; }

  // Names, shapes and dtypes, in order.
  bool operator==(const BufferLayout& other) const;
  bool operator!=(const BufferLayout& other) const { return !(*this == other); }

  // "" when equal, else what differs first, naming this layout `mine` and
  // the other `theirs` ("buffer 3 is bn1.running_var [16] float32 here,
  // bn1.num_batches_tracked [] int64 there").
  std::string DifferenceFrom(const BufferLayout& other, const std::string& mine = "here",
                             const std::string& theirs = "there") const;

 private:
  std::vector<BufferSpec> buffers_;
  size_t bytes_ = 0;
};

// Folds a trainer's packed buffer values `incoming` into the master's
// `values` (both layout.bytes() long). Floating buffers move towards the
// incoming ones by `weight` in (0, 1]: values += weight * (incoming -
// values), an exponential average over the trainers' sends (weight 1
// takes them as they are). Integer buffers (a batch count) keep the larger
// of the two; bool and uint8 buffers take the incoming value. A single
// pass over the bytes, no allocation.
void MergeBufferValues(const BufferLayout& layout, const uint8_t* incoming, double weight,
                       uint8_t* values);

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_ENGINE_BUFFER_LAYOUT_H_
