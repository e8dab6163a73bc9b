#include "services/master/buffer_pool.h"

namespace gaptrain {

std::shared_ptr<BufferPool> BufferPool::Create(size_t values, size_t max_idle) {
  return std::shared_ptr<BufferPool>(new BufferPool(values, max_idle));
}

std::shared_ptr<std::vector<float>> BufferPool::Acquire() {
  std::unique_ptr<std::vector<float>> buffer;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!idle_.empty()) {
      buffer = std::move(idle_.back());
      idle_.pop_back();
    }
  }
  if (buffer == nullptr) buffer = std::make_unique<std::vector<float>>(values_);
  std::weak_ptr<BufferPool> pool = weak_from_this();
  return std::shared_ptr<std::vector<float>>(buffer.release(), [pool](std::vector<float>* b) {
    if (auto p = pool.lock()) {
      p->Release(b);
    } else {
      delete b;
    }
  });
}

void BufferPool::Release(std::vector<float>* buffer) {
  std::unique_ptr<std::vector<float>> owned(buffer);
  std::lock_guard<std::mutex> lock(mu_);
  if (idle_.size() < max_idle_) idle_.push_back(std::move(owned));
}

}  // namespace gaptrain
