#include "services/engine/parameter_layout.h"

#include <algorithm>

namespace gaptrain {

Status ParameterLayout::Add(const std::string& name,
                            const std::vector<int64_t>& shape) {
  if (name.empty()) return Status::InvalidArgument("tensor name is empty");
  for (const TensorSpec& t : tensors_) {
    if (t.name == name) {
      return Status::InvalidArgument("tensor '" + name + "' is declared twice");
    }
  }
  size_t size = 1;
  for (int64_t d : shape) {
    if (d < 0) {
      return Status::InvalidArgument("tensor '" + name +
                                     "' has a negative dimension " + std::to_string(d));
    }
    size *= static_cast<size_t>(d);
  }
  tensors_.push_back(TensorSpec{name, shape, size_, size});
  size_ += size;
  return Status::OK();
}

size_t ParameterLayout::TensorIndexOf(size_t index) const {
  // First tensor whose end lies beyond index.
  auto it = std::upper_bound(
      tensors_.begin(), tensors_.end(), index,
      [](size_t i, const TensorSpec& t) { return i < t.offset + t.size; });
  return static_cast<size_t>(it - tensors_.begin());
}

std::string ParameterLayout::DifferenceFrom(const ParameterLayout& other, const std::string& mine,
                                            const std::string& theirs) const {
  auto describe = [](const TensorSpec& t) {
    std::string shape;
    for (int64_t d : t.shape) shape += (shape.empty() ? "" : ", ") + std::to_string(d);
    return t.name + " [" + shape + "]";
  };
  const size_t n = std::min(tensors_.size(), other.tensors_.size());
  for (size_t i = 0; i < n; ++i) {
    const TensorSpec& a = tensors_[i];
    const TensorSpec& b = other.tensors_[i];
    if (a.name != b.name || a.shape != b.shape) {
      return "tensor " + std::to_string(i) + " is " + describe(a) + " " + mine + ", " +
             describe(b) + " " + theirs;
    }
  }
  if (tensors_.size() != other.tensors_.size()) {
    return std::to_string(tensors_.size()) + " tensors " + mine + ", " +
           std::to_string(other.tensors_.size()) + " " + theirs;
  }
  return "";
}

bool ParameterLayout::operator==(const ParameterLayout& other) const {
  if (tensors_.size() != other.tensors_.size()) return false;
  for (size_t i = 0; i < tensors_.size(); ++i) {
    const TensorSpec& a = tensors_[i];
    const TensorSpec& b = other.tensors_[i];
    if (a.name != b.name || a.shape != b.shape) return false;
  }
  return true;
}

}  // namespace gaptrain
