#include "operator/kube/cancellation.h"

#include <utility>

namespace gaptrain {
namespace kube {

void Cancellation::Cancel() {
  std::lock_guard<std::mutex> lock(mu_);
  if (cancelled_.exchange(true)) return;
  for (auto& entry : callbacks_) entry.second();
}

uint64_t Cancellation::Register(std::function<void()> on_cancel) {
  std::lock_guard<std::mutex> lock(mu_);
  if (cancelled_.load()) on_cancel();
  const uint64_t id = next_id_++;
  callbacks_.emplace(id, std::move(on_cancel));
  return id;
}

void Cancellation::Unregister(uint64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  callbacks_.erase(id);
}

CancelScope::CancelScope(Cancellation* a, Cancellation* b,
                         const std::function<void()>& on_cancel)
    : a_(a), b_(b) {
  if (a_ != nullptr) a_id_ = a_->Register(on_cancel);
  if (b_ != nullptr) b_id_ = b_->Register(on_cancel);
}

CancelScope::~CancelScope() {
  if (a_ != nullptr) a_->Unregister(a_id_);
  if (b_ != nullptr) b_->Unregister(b_id_);
}

}  // namespace kube
}  // namespace gaptrain
