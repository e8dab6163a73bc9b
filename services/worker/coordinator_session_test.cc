// CoordinatorSession's exit against a coordinator that stops answering
// without closing the connection (its node cut off): leaving must neither
// wait for the heartbeat in flight nor retry past its deadline. And a
// heartbeat asked for now goes at once.

#include "services/worker/coordinator_session.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>

#include "services/coordinator/coordinator_client.h"
#include "services/worker/stop_flag.h"

namespace gaptrain {
namespace {

using Clock = std::chrono::steady_clock;

// Registers workers, then answers nothing else: Heartbeat and Leave hang
// until the client gives up on them.
class StuckCoordinator final : public proto::Coordinator::Service {
 public:
  explicit StuckCoordinator(uint32_t lease_seconds = 3) : lease_seconds_(lease_seconds) {}

  grpc::Status Register(grpc::ServerContext*, const proto::RegisterRequest*,
                        proto::RegisterResponse* response) override {
    response->set_worker_id(7);
    response->set_role(proto::WORKER_ROLE_TRAINER);
    response->set_lease_seconds(lease_seconds_);
    return grpc::Status::OK;
  }
  grpc::Status Heartbeat(grpc::ServerContext* context, const proto::HeartbeatRequest*,
                         proto::HeartbeatResponse*) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++heartbeats_;
    }
    cv_.notify_all();
    return Hang(context);
  }
  grpc::Status Leave(grpc::ServerContext* context, const proto::LeaveRequest*,
                     proto::LeaveResponse*) override {
    return Hang(context);
  }

  // Blocks until a heartbeat has arrived (and hangs).
  bool WaitForHeartbeat(std::chrono::seconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [this] { return heartbeats_ > 0; });
  }

 private:
  // Until the client cancels, its deadline passes, or the server shuts
  // down (all of which cancel the server's side).
  static grpc::Status Hang(grpc::ServerContext* context) {
    while (!context->IsCancelled()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    return grpc::Status(grpc::StatusCode::CANCELLED, "gone");
  }

  const uint32_t lease_seconds_;
  std::mutex mu_;
  std::condition_variable cv_;
  int heartbeats_ = 0;
};

// `service` on a free loopback port, written to *port.
std::unique_ptr<grpc::Server> Serve(grpc::Service* service, int* port) {
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), port);
  builder.RegisterService(service);
  return builder.BuildAndStart();
}

TEST(CoordinatorSessionTest, LeaveCancelsAStuckHeartbeatAndGivesUpAtItsDeadline) {
  StuckCoordinator service;
  int port = 0;
  std::unique_ptr<grpc::Server> server = Serve(&service, &port);
  ASSERT_NE(server, nullptr);

  CoordinatorClient::Options client_options;
  client_options.deadline_seconds = 60;  // a stuck call would hold the session this long
  CoordinatorClient client(grpc::CreateChannel("127.0.0.1:" + std::to_string(port),
                                               grpc::InsecureChannelCredentials()),
                           client_options);
  CoordinatorSession::Options options;
  options.host = "stuck-test";
  options.heartbeat_seconds = 0.05;
  StopFlag stop;
  CoordinatorSession session(&client, options, &stop, nullptr);
  ASSERT_TRUE(session.Register().ok());
  session.StartHeartbeats();
  ASSERT_TRUE(service.WaitForHeartbeat(std::chrono::seconds(30)));  // now in flight

  const auto start = Clock::now();
  const Status left = session.Leave(proto::LEAVE_REASON_PREEMPTED, "",
                                    Clock::now() + std::chrono::milliseconds(500));
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  EXPECT_EQ(left.code(), Status::Code::kDeadlineExceeded) << left.ToString();
  // Half a second of Leave; without the cancel, the heartbeat alone held
  // it for its 60 s deadline, and each Leave attempt for as long.
  EXPECT_LT(seconds, 30.0);
  std::printf("Leave against a stuck coordinator returned after %.2f s\n", seconds);
  server->Shutdown(std::chrono::system_clock::now());
}

// HeartbeatNow sends the next heartbeat at once, not at its period (10 s
// for a 300 s lease): a trainer whose push came after the job's
// maxUpdates reports the version right away.
TEST(CoordinatorSessionTest, HeartbeatNowDoesNotWaitForThePeriod) {
  StuckCoordinator service(/*lease_seconds=*/300);
  int port = 0;
  std::unique_ptr<grpc::Server> server = Serve(&service, &port);
  ASSERT_NE(server, nullptr);
  CoordinatorClient client(grpc::CreateChannel("127.0.0.1:" + std::to_string(port),
                                               grpc::InsecureChannelCredentials()),
                           CoordinatorClient::Options());
  CoordinatorSession::Options options;
  options.host = "kicked-test";
  StopFlag stop;
  CoordinatorSession session(&client, options, &stop, nullptr);
  ASSERT_TRUE(session.Register().ok());
  session.StartHeartbeats();
  session.HeartbeatNow();
  EXPECT_TRUE(service.WaitForHeartbeat(std::chrono::seconds(5)));
  session.StopHeartbeats();
  server->Shutdown(std::chrono::system_clock::now());
}

// How a worker leaves: FAILED after an error, PREEMPTED within the
// grace period's LeaveDeadline after a SIGTERM, FINISHED otherwise.
TEST(CoordinatorSessionTest, LeaveTermsFollowHowTheLoopEnded) {
  using Clock = CoordinatorSession::Clock;
  StopFlag running;
  const Clock::time_point before = Clock::now();
  LeaveTerms t = LeaveTermsAfter(Status::Unavailable("gone"), running, 20);
  EXPECT_EQ(t.reason, proto::LEAVE_REASON_FAILED);
  EXPECT_GE(t.deadline, before + std::chrono::seconds(10));
  t = LeaveTermsAfter(Status::OK(), running, 20);
  EXPECT_EQ(t.reason, proto::LEAVE_REASON_FINISHED);
  EXPECT_GE(t.deadline, before + std::chrono::seconds(10));

  StopFlag preempted;
  preempted.Stop(StopReason::kPreempted);
  t = LeaveTermsAfter(Status::OK(), preempted, 20);
  EXPECT_EQ(t.reason, proto::LEAVE_REASON_PREEMPTED);
  EXPECT_LE(t.deadline, Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(kLeaveSeconds)));
  StopFlag ended;
  ended.Stop(StopReason::kJobEnded);
  EXPECT_EQ(LeaveTermsAfter(Status::OK(), ended, 20).reason, proto::LEAVE_REASON_FINISHED);
}

}  // namespace
}  // namespace gaptrain
