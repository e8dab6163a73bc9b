#include "services/coordinator/coordinator_client.h"

#include <chrono>

namespace gaptrain {
namespace {

Status FromGrpc(const grpc::Status& status) {
  if (status.ok()) return Status::OK();
  return Status(static_cast<Status::Code>(status.error_code()), status.error_message());
}

}  // namespace

CoordinatorClient::CoordinatorClient(std::shared_ptr<grpc::Channel> channel, Options options)
    : stub_(proto::Coordinator::NewStub(std::move(channel))), options_(std::move(options)) {}

void CoordinatorClient::Prepare(grpc::ClientContext* context) const {
  if (!options_.token.empty()) context->AddMetadata("authorization", "Bearer " + options_.token);
  context->set_deadline(std::chrono::system_clock::now() +
                        std::chrono::milliseconds(
                            static_cast<int64_t>(options_.deadline_seconds * 1000)));
}

Status CoordinatorClient::Register(const std::string& host, proto::WorkerRole role,
                                   uint32_t previous_id, proto::RegisterResponse* response) {
  proto::RegisterRequest request;
  request.set_host(host);
  request.set_role(role);
  request.set_previous_id(previous_id);
  grpc::ClientContext context;
  Prepare(&context);
  return FromGrpc(stub_->Register(&context, request, response));
}

Status CoordinatorClient::Heartbeat(const proto::HeartbeatRequest& request,
                                    proto::HeartbeatResponse* response) {
  grpc::ClientContext context;
  Prepare(&context);
  return FromGrpc(stub_->Heartbeat(&context, request, response));
}

Status CoordinatorClient::NextTask(uint32_t worker, proto::NextTaskResponse* response) {
  proto::NextTaskRequest request;
  request.set_worker_id(worker);
  grpc::ClientContext context;
  Prepare(&context);
  return FromGrpc(stub_->NextTask(&context, request, response));
}

Status CoordinatorClient::CompleteTask(uint32_t worker, uint64_t task,
                                       proto::CompleteTaskResponse* response) {
  proto::CompleteTaskRequest request;
  request.set_worker_id(worker);
  request.set_task_id(task);
  return CompleteTask(request, response);
}

Status CoordinatorClient::CompleteTask(const proto::CompleteTaskRequest& request,
                                       proto::CompleteTaskResponse* response) {
  grpc::ClientContext context;
  Prepare(&context);
  return FromGrpc(stub_->CompleteTask(&context, request, response));
}

Status CoordinatorClient::Leave(uint32_t worker, proto::LeaveReason reason,
                                const std::string& message, proto::LeaveResponse* response) {
  proto::LeaveRequest request;
  request.set_worker_id(worker);
  request.set_reason(reason);
  request.set_message(message);
  grpc::ClientContext context;
  Prepare(&context);
  return FromGrpc(stub_->Leave(&context, request, response));
}

Status CoordinatorClient::ReportEvaluation(const proto::ReportEvaluationRequest& request,
                                           proto::ReportEvaluationResponse* response) {
  grpc::ClientContext context;
  Prepare(&context);
  return FromGrpc(stub_->ReportEvaluation(&context, request, response));
}

Status CoordinatorClient::GetStatus(proto::CoordinatorStatusResponse* response) {
  grpc::ClientContext context;
  Prepare(&context);
  return FromGrpc(stub_->Status(&context, proto::CoordinatorStatusRequest(), response));
}

}  // namespace gaptrain
