// CoordinatorClient: a worker's (or a tool's, or a test's) typed view of
// the coordinator's gRPC API. It attaches the job token and a deadline to
// every call; errors come back as Status with the server's code and
// message. Thread-safe (gRPC stubs are).

#ifndef GAPTRAIN_SERVICES_COORDINATOR_COORDINATOR_CLIENT_H_
#define GAPTRAIN_SERVICES_COORDINATOR_COORDINATOR_CLIENT_H_

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "proto/gaptrain.grpc.pb.h"
#include "services/common/status.h"

namespace gaptrain {

class CoordinatorClient {
 public:
  struct Options {
    std::string token;
    double deadline_seconds = 10;  // per call
  };

  CoordinatorClient(std::shared_ptr<grpc::Channel> channel, Options options);

  Status Register(const std::string& host, proto::WorkerRole role, uint32_t previous_id,
                  proto::RegisterResponse* response);
  Status Heartbeat(const proto::HeartbeatRequest& request, proto::HeartbeatResponse* response);
  Status NextTask(uint32_t worker, proto::NextTaskResponse* response);
  Status CompleteTask(uint32_t worker, uint64_t task, proto::CompleteTaskResponse* response);
  // With where the task's pushes landed (MasterPosition per master run).
  Status CompleteTask(const proto::CompleteTaskRequest& request,
                      proto::CompleteTaskResponse* response);
  Status Leave(uint32_t worker, proto::LeaveReason reason, const std::string& message,
               proto::LeaveResponse* response);
  Status ReportEvaluation(const proto::ReportEvaluationRequest& request,
                          proto::ReportEvaluationResponse* response);
  Status GetStatus(proto::CoordinatorStatusResponse* response);

 private:
  void Prepare(grpc::ClientContext* context) const;

  std::unique_ptr<proto::Coordinator::Stub> stub_;
  Options options_;
};

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_COORDINATOR_COORDINATOR_CLIENT_H_
