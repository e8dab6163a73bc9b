// CoordinatorClient: a worker's (or a tool's, or a test's) typed view of
// the coordinator's gRPC API. It attaches the job token and a deadline to
// every call; errors come back as Status with the server's code and
// message. Made with a ChannelFactory, it makes its channel again while
// calls keep failing on the network (ChannelRenewal: a coordinator back at
// a new address behind a name that did not resolve meanwhile is found
// within a second or so). Thread-safe.

#ifndef GAPTRAIN_SERVICES_COORDINATOR_COORDINATOR_CLIENT_H_
#define GAPTRAIN_SERVICES_COORDINATOR_COORDINATOR_CLIENT_H_

#include <grpcpp/grpcpp.h>

#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "proto/gaptrain.grpc.pb.h"
#include "services/base/status.h"
#include "services/net/call_canceller.h"
#include "services/net/channel_renewal.h"

namespace gaptrain {

class CoordinatorClient {
 public:
  struct Options {
    std::string token;
    double deadline_seconds = 10;  // per call
  };

  // A channel to the coordinator; the same target, credentials and
  // arguments every time.
  using ChannelFactory = std::function<std::shared_ptr<grpc::Channel>()>;

  // Every call goes over `channel`.
  CoordinatorClient(std::shared_ptr<grpc::Channel> channel, Options options);
  // Calls go over a channel from `make_channel`, made again as above.
  CoordinatorClient(ChannelFactory make_channel, Options options);

  Status Register(const std::string& host, proto::WorkerRole role, uint32_t previous_id,
                  proto::RegisterResponse* response);
  // `canceller` (optional) may cancel the call from another thread.
  Status Heartbeat(const proto::HeartbeatRequest& request, proto::HeartbeatResponse* response,
                   CallCanceller* canceller = nullptr);
  Status NextTask(uint32_t worker, proto::NextTaskResponse* response);
  Status CompleteTask(uint32_t worker, uint64_t task, proto::CompleteTaskResponse* response);
  // With where the task's pushes landed (MasterPosition per master run).
  Status CompleteTask(const proto::CompleteTaskRequest& request,
                      proto::CompleteTaskResponse* response);
  // Hands a task back untrained (a Python trainer whose data is away).
  Status ReleaseTask(const proto::ReleaseTaskRequest& request,
                     proto::ReleaseTaskResponse* response);
  // `deadline_seconds` > 0 replaces Options::deadline_seconds for this
  // call: a worker leaving after SIGTERM has little time.
  Status Leave(uint32_t worker, proto::LeaveReason reason, const std::string& message,
               proto::LeaveResponse* response, double deadline_seconds = 0);
  Status ReportEvaluation(const proto::ReportEvaluationRequest& request,
                          proto::ReportEvaluationResponse* response);
  Status GetStatus(proto::CoordinatorStatusResponse* response);

 private:
  void Prepare(grpc::ClientContext* context, double deadline_seconds = 0) const;
  // The stub over the current channel; held by the call, so that a renewal
  // on another thread does not pull it away.
  std::shared_ptr<proto::Coordinator::Stub> Stub() const;
  // A call's outcome as a Status; renews the channel when it is time.
  Status Finish(const grpc::Status& status);

  const ChannelFactory make_channel_;  // null: the channel is fixed
  const Options options_;
  mutable std::mutex mu_;
  std::shared_ptr<proto::Coordinator::Stub> stub_;  // guarded by mu_
  ChannelRenewal renewal_;                           // guarded by mu_
};

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_COORDINATOR_COORDINATOR_CLIENT_H_
