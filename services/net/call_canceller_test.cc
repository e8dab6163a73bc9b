#include "services/net/call_canceller.h"

#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/generic/generic_stub.h>
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <memory>
#include <string>

namespace gaptrain {
namespace {

using std::chrono::seconds;

// Takes one call and never answers it, as a peer that vanished without
// closing the connection.
class HangingServer {
 public:
  HangingServer() {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterAsyncGenericService(&service_);
    cq_ = builder.AddCompletionQueue();
    server_ = builder.BuildAndStart();
    service_.RequestCall(&context_, &stream_, cq_.get(), cq_.get(), this);
  }
  ~HangingServer() {
    server_->Shutdown(std::chrono::system_clock::now());  // cancels what hangs
    cq_->Shutdown();
    void* tag;
    bool ok;
    while (cq_->Next(&tag, &ok)) {
    }
  }

  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  // Blocks until the call has arrived: from then on it is in flight.
  bool WaitForCall() {
    void* tag;
    bool ok = false;
    return cq_->Next(&tag, &ok) && ok;
  }

 private:
  int port_ = 0;
  grpc::AsyncGenericService service_;
  grpc::GenericServerContext context_;
  grpc::GenericServerAsyncReaderWriter stream_{&context_};
  std::unique_ptr<grpc::ServerCompletionQueue> cq_;
  std::unique_ptr<grpc::Server> server_;
};

// A unary call with its own deadline, registered with `canceller` for as
// long as it runs; the future holds its status.
class Call {
 public:
  Call(grpc::GenericStub* stub, CallCanceller* canceller, seconds deadline) {
    context_.set_deadline(std::chrono::system_clock::now() + deadline);
    grpc::Slice empty("");
    request_ = grpc::ByteBuffer(&empty, 1);  // a default ByteBuffer is no message
    scope_ = std::make_unique<CallCanceller::Scope>(canceller, &context_);
    stub->UnaryCall(&context_, "/gaptrain.test/Hang", grpc::StubOptions(), &request_, &response_,
                    [this](grpc::Status status) { done_.set_value(status); });
  }
  // The status, or UNKNOWN "still running" after `timeout`.
  grpc::Status Wait(seconds timeout) {
    std::future<grpc::Status> f = done_.get_future();
    if (f.wait_for(timeout) != std::future_status::ready) {
      return grpc::Status(grpc::StatusCode::UNKNOWN, "still running");
    }
    return f.get();
  }

 private:
  grpc::ClientContext context_;
  grpc::ByteBuffer request_, response_;
  std::promise<grpc::Status> done_;
  std::unique_ptr<CallCanceller::Scope> scope_;
};

TEST(CallCancellerTest, CancelEndsACallInFlight) {
  HangingServer server;
  grpc::GenericStub stub(grpc::CreateChannel(server.address(), grpc::InsecureChannelCredentials()));
  CallCanceller canceller;
  Call call(&stub, &canceller, seconds(300));
  ASSERT_TRUE(server.WaitForCall());
  canceller.Cancel();
  // Without the cancel it would run for 300 s.
  EXPECT_EQ(call.Wait(seconds(60)).error_code(), grpc::StatusCode::CANCELLED);
}

TEST(CallCancellerTest, CallsStartedAfterCancelEndAtOnceUntilReset) {
  HangingServer server;
  grpc::GenericStub stub(grpc::CreateChannel(server.address(), grpc::InsecureChannelCredentials()));
  CallCanceller canceller;
  canceller.Cancel();
  EXPECT_TRUE(canceller.cancelled());
  {
    Call late(&stub, &canceller, seconds(300));
    EXPECT_EQ(late.Wait(seconds(60)).error_code(), grpc::StatusCode::CANCELLED);
  }
  canceller.Reset();
  EXPECT_FALSE(canceller.cancelled());
  // Not cancelled any more: it runs until its own deadline.
  Call after_reset(&stub, &canceller, seconds(1));
  EXPECT_EQ(after_reset.Wait(seconds(60)).error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
}

TEST(CallCancellerTest, ANullCancellerRegistersNothing) {
  grpc::ClientContext context;
  CallCanceller::Scope scope(nullptr, &context);  // does not crash
}

}  // namespace
}  // namespace gaptrain
