#include "services/master/model_buffers.h"

#include <cmath>
#include <cstring>
#include <utility>

namespace gaptrain {
namespace {

template <typename T>
bool AllFinite(const uint8_t* bytes, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    T v;
    std::memcpy(&v, bytes + i * sizeof(T), sizeof(T));
    if (!std::isfinite(v)) return false;
  }
  return true;
}

}  // namespace

ModelBuffers::ModelBuffers(BufferLayout layout, std::string values, uint64_t merges)
    : layout_(std::move(layout)), values_(std::move(values)), merges_(merges) {
  values_.resize(layout_.bytes());
}

Status ModelBuffers::Merge(const std::string& values, size_t trainers, uint64_t* merges) {
  if (values.size() != layout_.bytes()) {
    return Status::InvalidArgument("buffers: " + std::to_string(values.size()) +
                                   " bytes, the model's buffers hold " +
                                   std::to_string(layout_.bytes()));
  }
  const auto* incoming = reinterpret_cast<const uint8_t*>(values.data());
  for (const BufferSpec& b : layout_.buffers()) {
    const size_t n = b.bytes / BufferDTypeSize(b.dtype);
    const bool finite = b.dtype == BufferDType::kFloat32   ? AllFinite<float>(incoming + b.offset, n)
                        : b.dtype == BufferDType::kFloat64 ? AllFinite<double>(incoming + b.offset, n)
                                                           : true;
    if (!finite) {
      return Status::InvalidArgument("buffers: " + b.name + " holds a NaN or an infinity");
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  const double weight = merges_ == 0 ? 1.0 : 1.0 / static_cast<double>(trainers > 0 ? trainers : 1);
  MergeBufferValues(layout_, incoming, weight, reinterpret_cast<uint8_t*>(values_.data()));
  ++merges_;
  if (merges != nullptr) *merges = merges_;
  return Status::OK();
}

void ModelBuffers::Read(std::string* values, uint64_t* merges) const {
  std::lock_guard<std::mutex> lock(mu_);
  *values = values_;
  *merges = merges_;
}

}  // namespace gaptrain
