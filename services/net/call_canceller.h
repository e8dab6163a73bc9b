// CallCanceller: cancels the gRPC calls that other threads have in flight.
// A call to a peer that vanished without closing its connection (a pod
// deleted, a node cut off) waits for keepalive to notice (seconds) or for
// its deadline; a thread that must not wait that long, such as a worker
// leaving after SIGTERM that joins its heartbeat thread, cancels the call
// instead.
//
// What callers may rely on:
//   - A call registers its ClientContext with a Scope before it starts and
//     for as long as it runs; Cancel() cancels every registered call, and
//     every call registered later until Reset(), so a call that was about
//     to start when Cancel() ran ends too. A cancelled call returns
//     CANCELLED at once.
//   - A null canceller in a Scope is allowed (nothing to cancel with).
//   - Thread-safe.

#ifndef GAPTRAIN_SERVICES_NET_CALL_CANCELLER_H_
#define GAPTRAIN_SERVICES_NET_CALL_CANCELLER_H_

#include <grpcpp/grpcpp.h>

#include <mutex>
#include <set>

namespace gaptrain {

class CallCanceller {
 public:
  class Scope {
   public:
    Scope(CallCanceller* canceller, grpc::ClientContext* context);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    CallCanceller* const canceller_;
    grpc::ClientContext* const context_;
  };

  void Cancel();
  void Reset();
  bool cancelled() const;

 private:
  mutable std::mutex mu_;
  bool cancelled_ = false;
  std::set<grpc::ClientContext*> in_flight_;
};

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_NET_CALL_CANCELLER_H_
