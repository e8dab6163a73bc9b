// Cancellation: lets one thread abandon calls another thread has in flight
// (the operator's shutdown, Reflector::Stop). A call registers what to do
// when cancelled (close its connection) for as long as it runs.
//
// What callers may rely on:
//   - Cancel() is idempotent and thread-safe; it runs every registered
//     callback once, then cancelled() stays true.
//   - A callback registered after Cancel() runs at once, inside Register.
//   - Once Unregister(id) returns, that callback is not running and will
//     not run. Callbacks must not call Register or Unregister.

#ifndef GAPTRAIN_OPERATOR_KUBE_CANCELLATION_H_
#define GAPTRAIN_OPERATOR_KUBE_CANCELLATION_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>

namespace gaptrain {
namespace kube {

class Cancellation {
 public:
  Cancellation() = default;
  Cancellation(const Cancellation&) = delete;
  Cancellation& operator=(const Cancellation&) = delete;

  void Cancel();
  bool cancelled() const { return cancelled_.load(); }

  // Returns an id for Unregister.
  uint64_t Register(std::function<void()> on_cancel);
  void Unregister(uint64_t id);

 private:
  std::atomic<bool> cancelled_{false};
  std::mutex mu_;  // held while callbacks run, so Unregister waits for them
  uint64_t next_id_ = 1;
  std::map<uint64_t, std::function<void()>> callbacks_;
};

// Registers `on_cancel` with each non-null Cancellation for its lifetime.
class CancelScope {
 public:
  CancelScope(Cancellation* a, Cancellation* b, const std::function<void()>& on_cancel);
  ~CancelScope();
  CancelScope(const CancelScope&) = delete;
  CancelScope& operator=(const CancelScope&) = delete;

 private:
  Cancellation* a_;
  Cancellation* b_;
  uint64_t a_id_ = 0;
  uint64_t b_id_ = 0;
};

}  // namespace kube
}  // namespace gaptrain

#endif  // GAPTRAIN_OPERATOR_KUBE_CANCELLATION_H_
