// ParameterLayout: how a model's tensors lie in one flat float32 buffer.
// Tensors are packed back to back in declaration order (no padding), so the
// worker's LibTorch parameters can be views into the same buffer and a
// gradient leaves the worker without a gather copy.

#ifndef GAPTRAIN_SERVICES_ENGINE_PARAMETER_LAYOUT_H_
#define GAPTRAIN_SERVICES_ENGINE_PARAMETER_LAYOUT_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "services/base/status.h"

namespace gaptrain {

struct TensorSpec {
  std::string name;            // e.g. "conv1.weight"
  std::vector<int64_t> shape;  // e.g. {6, 1, 5, 5}; {} is a scalar
  size_t offset = 0;           // first element in the flat buffer
  size_t size = 0;             // product of shape
};

class ParameterLayout {
 public:
  ParameterLayout() = default;

  // Appends a tensor after the last one. Fails on an empty or duplicate name
  // or a negative dimension.
  Status Add(const std::string& name, const std::vector<int64_t>& shape);

  const std::vector<TensorSpec>& tensors() const { return tensors_; }
  size_t num_tensors() const { return tensors_.size(); }
  // Total number of parameters P.
  size_t size() const { return size_; }

  // Index of the tensor holding flat element `index` (< size()).
  size_t TensorIndexOf(size_t index) const;

  bool operator==(const ParameterLayout& other) const;

  // "" when equal, else what differs first, naming this layout `mine` and
  // the other `theirs` ("tensor 2 is fc.weight [10, 84] here, fc.weight
  // [10, 64] there").
  std::string DifferenceFrom(const ParameterLayout& other, const std::string& mine = "here",
                             const std::string& theirs = "there") const;
  bool operator!=(const ParameterLayout& other) const { return !(*this == other); }

 private:
  std::vector<TensorSpec> tensors_;
  size_t size_ = 0;
};

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_ENGINE_PARAMETER_LAYOUT_H_
