#include "services/engine/parameter_store.h"

#include <cstring>
#include <utility>

namespace gaptrain {

std::string WorkerStateName(WorkerId worker, const char* what) {
  return "worker/" + std::to_string(worker) + "/" + what;
}

ParameterStore::ParameterStore(ParameterLayout layout)
    : layout_(std::move(layout)), params_(DType::kFloat32, layout_.size()) {}

std::unique_ptr<ParameterStore> ParameterStore::Clone() const {
  auto copy = std::make_unique<ParameterStore>(layout_);
  std::memcpy(copy->params(), params(), params_.bytes());
  copy->version_ = version_;
  copy->scalars_ = scalars_;
  for (const auto& [name, b] : buffers_) {
    FlatBuffer* c = copy->AddBuffer(name, b.dtype());
    std::memcpy(c->data(), b.data(), b.bytes());
  }
  return copy;
}

FlatBuffer* ParameterStore::AddBuffer(const std::string& name, DType dtype) {
  FlatBuffer& b = buffers_[name];
  b = FlatBuffer(dtype, size());
  return &b;
}

FlatBuffer* ParameterStore::buffer(const std::string& name) {
  auto it = buffers_.find(name);
  return it == buffers_.end() ? nullptr : &it->second;
}

const FlatBuffer* ParameterStore::buffer(const std::string& name) const {
  auto it = buffers_.find(name);
  return it == buffers_.end() ? nullptr : &it->second;
}

void ParameterStore::RemoveBuffer(const std::string& name) { buffers_.erase(name); }

double ParameterStore::scalar(const std::string& name) const {
  auto it = scalars_.find(name);
  return it == scalars_.end() ? 0.0 : it->second;
}

size_t ParameterStore::MemoryBytes() const {
  size_t total = params_.bytes();
  for (const auto& [name, b] : buffers_) total += b.bytes();
  return total;
}

}  // namespace gaptrain
