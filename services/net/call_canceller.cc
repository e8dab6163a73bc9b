#include "services/net/call_canceller.h"

namespace gaptrain {

CallCanceller::Scope::Scope(CallCanceller* canceller, grpc::ClientContext* context)
    : canceller_(canceller), context_(context) {
  if (canceller_ == nullptr) return;
  std::lock_guard<std::mutex> lock(canceller_->mu_);
  canceller_->in_flight_.insert(context_);
  // A context cancelled before its call starts cancels the call as it
  // starts (grpc::ClientContext keeps the request).
  if (canceller_->cancelled_) context_->TryCancel();
}

CallCanceller::Scope::~Scope() {
  if (canceller_ == nullptr) return;
  std::lock_guard<std::mutex> lock(canceller_->mu_);
  canceller_->in_flight_.erase(context_);
}

void CallCanceller::Cancel() {
  std::lock_guard<std::mutex> lock(mu_);
  cancelled_ = true;
  // Under the lock: a Scope cannot end, and free its context, meanwhile.
  for (grpc::ClientContext* context : in_flight_) context->TryCancel();
}

void CallCanceller::Reset() {
  std::lock_guard<std::mutex> lock(mu_);
  cancelled_ = false;
}

bool CallCanceller::cancelled() const {
  std::lock_guard<std::mutex> lock(mu_);
  return cancelled_;
}

}  // namespace gaptrain
