#include "services/engine/buffer_layout.h"

#include <algorithm>
#include <cstring>

namespace gaptrain {
namespace {

std::string Describe(const BufferSpec& b) {
  std::string shape;
  for (int64_t d : b.shape) shape += (shape.empty() ? "" : ", ") + std::to_string(d);
  return b.name + " [" + shape + "] " + BufferDTypeName(b.dtype);
}

// values[i] += weight * (incoming[i] - values[i]) over n elements of T, read
// and written through memcpy (the packed bytes need not be aligned).
template <typename T>
void MoveTowards(const uint8_t* incoming, double weight, size_t n, uint8_t* values) {
  for (size_t i = 0; i < n; ++i) {
    T have, come;
    std::memcpy(&have, values + i * sizeof(T), sizeof(T));
    std::memcpy(&come, incoming + i * sizeof(T), sizeof(T));
    const T merged = static_cast<T>(have + weight * (static_cast<double>(come) - have));
    std::memcpy(values + i * sizeof(T), &merged, sizeof(T));
  }
}

template <typename T>
void KeepLarger(const uint8_t* incoming, size_t n, uint8_t* values) {
  for (size_t i = 0; i < n; ++i) {
    T have, come;
    std::memcpy(&have, values + i * sizeof(T), sizeof(T));
    std::memcpy(&come, incoming + i * sizeof(T), sizeof(T));
    if (come > have) std::memcpy(values + i * sizeof(T), &come, sizeof(T));
  }
}

}  // namespace

const char* BufferDTypeName(BufferDType dtype) {
  switch (dtype) {
    case BufferDType::kFloat32: return "float32";
    case BufferDType::kFloat64: return "float64";
    case BufferDType::kInt64: return "int64";
    case BufferDType::kInt32: return "int32";
    case BufferDType::kUint8: return "uint8";
    case BufferDType::kBool: return "bool";
  }
  return "?";
}

size_t BufferDTypeSize(BufferDType dtype) {
  switch (dtype) {
    case BufferDType::kFloat32: return 4;
    case BufferDType::kFloat64: return 8;
    case BufferDType::kInt64: return 8;
    case BufferDType::kInt32: return 4;
    case BufferDType::kUint8: return 1;
    case BufferDType::kBool: return 1;
  }
  return 0;
}

bool ParseBufferDType(const std::string& name, BufferDType* dtype) {
  for (BufferDType d : {BufferDType::kFloat32, BufferDType::kFloat64, BufferDType::kInt64,
                        BufferDType::kInt32, BufferDType::kUint8, BufferDType::kBool}) {
    if (name == BufferDTypeName(d)) {
      *dtype = d;
      return true;
    }
  }
  return false;
}

Status BufferLayout::Add(const std::string& name, const std::vector<int64_t>& shape,
                         BufferDType dtype) {
  if (name.empty()) return Status::InvalidArgument("buffer name is empty");
  for (const BufferSpec& b : buffers_) {
    if (b.name == name) return Status::InvalidArgument("buffer '" + name + "' is declared twice");
  }
  size_t bytes = BufferDTypeSize(dtype);
  for (int64_t d : shape) {
    if (d < 0) {
      return Status::InvalidArgument("buffer '" + name + "' has a negative dimension " +
                                     std::to_string(d));
    }
    if (d > 0 && bytes > kMaxBytes / static_cast<size_t>(d)) bytes = kMaxBytes + 1;
    else bytes *= static_cast<size_t>(d);
  }
  if (bytes > kMaxBytes - bytes_) {
    return Status::InvalidArgument("buffer '" + name + "': the module's buffers hold more than " +
                                   std::to_string(kMaxBytes >> 20) +
                                   " MiB, more than one message carries");
  }
  buffers_.push_back(BufferSpec{name, shape, dtype, bytes_, bytes});
  bytes_ += bytes;
  return Status::OK();
}

bool BufferLayout::operator==(const BufferLayout& other) const {
  return DifferenceFrom(other).empty();
}

std::string BufferLayout::DifferenceFrom(const BufferLayout& other, const std::string& mine,
                                         const std::string& theirs) const {
  const size_t n = std::min(buffers_.size(), other.buffers_.size());
  for (size_t i = 0; i < n; ++i) {
    const BufferSpec& a = buffers_[i];
    const BufferSpec& b = other.buffers_[i];
    if (a.name != b.name || a.shape != b.shape || a.dtype != b.dtype) {
      return "buffer " + std::to_string(i) + " is " + Describe(a) + " " + mine + ", " +
             Describe(b) + " " + theirs;
    }
  }
  if (buffers_.size() != other.buffers_.size()) {
    return std::to_string(buffers_.size()) + " buffers " + mine + ", " +
           std::to_string(other.buffers_.size()) + " " + theirs;
  }
  return "";
}

void MergeBufferValues(const BufferLayout& layout, const uint8_t* incoming, double weight,
                       uint8_t* values) {
  for (const BufferSpec& b : layout.buffers()) {
    const size_t n = b.bytes / BufferDTypeSize(b.dtype);
    const uint8_t* in = incoming + b.offset;
    uint8_t* out = values + b.offset;
    switch (b.dtype) {
      case BufferDType::kFloat32: MoveTowards<float>(in, weight, n, out); break;
      case BufferDType::kFloat64: MoveTowards<double>(in, weight, n, out); break;
      case BufferDType::kInt64: KeepLarger<int64_t>(in, n, out); break;
      case BufferDType::kInt32: KeepLarger<int32_t>(in, n, out); break;
      case BufferDType::kUint8:
      case BufferDType::kBool: std::memcpy(out, in, b.bytes); break;
    }
  }
}

}  // namespace gaptrain
