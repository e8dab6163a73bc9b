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
    : options_(std::move(options)), stub_(proto::Coordinator::NewStub(std::move(channel))) {}

CoordinatorClient::CoordinatorClient(ChannelFactory make_channel, Options options)
    : make_channel_(std::move(make_channel)),
      options_(std::move(options)),
      stub_(proto::Coordinator::NewStub(make_channel_())) {}

void CoordinatorClient::Prepare(grpc::ClientContext* context, double deadline_seconds) const {
  if (!options_.token.empty()) context->AddMetadata("authorization", "Bearer " + options_.token);
  const double seconds = deadline_seconds > 0 ? deadline_seconds : options_.deadline_seconds;
  context->set_deadline(std::chrono::system_clock::now() +
                        std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000)));
}

std::shared_ptr<proto::Coordinator::Stub> CoordinatorClient::Stub() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stub_;
}

Status CoordinatorClient::Finish(const grpc::Status& status) {
  Status s = FromGrpc(status);
  if (make_channel_ != nullptr) {
    std::lock_guard<std::mutex> lock(mu_);
    // Making a channel does not block. It looks the name up on its first
    // call, a backoff delay from now: connecting at once (GetState(true))
    // spent that lookup too early, while the name still did not resolve,
    // and measured slower (a moved master's first update 2.3-3.7 s after it
    // served, against 0.7-0.9 s).
    if (renewal_.Renew(s)) stub_ = proto::Coordinator::NewStub(make_channel_());
  }
  return s;
}

Status CoordinatorClient::Register(const std::string& host, proto::WorkerRole role,
                                   uint32_t previous_id, proto::RegisterResponse* response) {
  proto::RegisterRequest request;
  request.set_host(host);
  request.set_role(role);
  request.set_previous_id(previous_id);
  grpc::ClientContext context;
  Prepare(&context);
  return Finish(Stub()->Register(&context, request, response));
}

Status CoordinatorClient::Heartbeat(const proto::HeartbeatRequest& request,
                                    proto::HeartbeatResponse* response,
                                    CallCanceller* canceller) {
  grpc::ClientContext context;
  Prepare(&context);
  CallCanceller::Scope scope(canceller, &context);
  return Finish(Stub()->Heartbeat(&context, request, response));
}

Status CoordinatorClient::NextTask(uint32_t worker, proto::NextTaskResponse* response) {
  proto::NextTaskRequest request;
  request.set_worker_id(worker);
  grpc::ClientContext context;
  Prepare(&context);
  return Finish(Stub()->NextTask(&context, request, response));
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
  return Finish(Stub()->CompleteTask(&context, request, response));
}

Status CoordinatorClient::ReleaseTask(const proto::ReleaseTaskRequest& request,
                                      proto::ReleaseTaskResponse* response) {
  grpc::ClientContext context;
  Prepare(&context);
  return Finish(Stub()->ReleaseTask(&context, request, response));
}

Status CoordinatorClient::Leave(uint32_t worker, proto::LeaveReason reason,
                                const std::string& message, proto::LeaveResponse* response,
                                double deadline_seconds) {
  proto::LeaveRequest request;
  request.set_worker_id(worker);
  request.set_reason(reason);
  request.set_message(message);
  grpc::ClientContext context;
  Prepare(&context, deadline_seconds);
  return Finish(Stub()->Leave(&context, request, response));
}

Status CoordinatorClient::ReportEvaluation(const proto::ReportEvaluationRequest& request,
                                           proto::ReportEvaluationResponse* response) {
  grpc::ClientContext context;
  Prepare(&context);
  return Finish(Stub()->ReportEvaluation(&context, request, response));
}

Status CoordinatorClient::GetStatus(proto::CoordinatorStatusResponse* response) {
  grpc::ClientContext context;
  Prepare(&context);
  return Finish(Stub()->Status(&context, proto::CoordinatorStatusRequest(), response));
}

}  // namespace gaptrain
