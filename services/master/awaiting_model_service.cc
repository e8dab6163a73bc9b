#include "services/master/awaiting_model_service.h"

#include <spdlog/spdlog.h>

#include "services/master/layout_proto.h"
#include "services/net/token_auth.h"

namespace gaptrain {
namespace {

constexpr char kAwaiting[] =
    "the master waits for a trainer to declare the model (spec.model.fromTrainer)";

}  // namespace

bool AwaitingModelService::Wait(DeclaredModel* model) {
  std::unique_lock<std::mutex> lock(mu_);
  changed_.wait(lock, [this] { return adopted_.has_value() || stopped_; });
  if (!adopted_.has_value()) return false;
  *model = std::move(*adopted_);
  adopted_.reset();
  return true;
}

void AwaitingModelService::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopped_ = true;
  }
  changed_.notify_all();
}

grpc::Status AwaitingModelService::Unavailable(const grpc::ServerContextBase* context) const {
  grpc::Status auth = AuthorizeBearer(*context, options_.token);
  if (!auth.ok()) return auth;
  return grpc::Status(grpc::StatusCode::UNAVAILABLE, kAwaiting);
}

grpc::Status AwaitingModelService::Describe(grpc::ServerContext* context,
                                            const proto::DescribeRequest*,
                                            proto::DescribeResponse* response) {
  grpc::Status auth = AuthorizeBearer(*context, options_.token);
  if (!auth.ok()) return auth;
  response->set_job_name(options_.job_name);
  response->set_rule(options_.rule);
  response->set_needs_echo(options_.needs_echo);
  response->set_echo_type(options_.echo_type);
  *response->mutable_incarnation() = options_.incarnation;
  response->set_awaiting_model(true);
  // The range follows from the declared layout: index and count only.
  response->mutable_shard()->set_index(options_.shard_index);
  response->mutable_shard()->set_count(options_.shard_count);
  return grpc::Status::OK;
}

grpc::Status AwaitingModelService::DeclareModel(
    grpc::ServerContext* context, grpc::ServerReader<proto::ModelDeclaration>* reader,
    proto::DeclareModelResponse* response) {
  grpc::Status auth = AuthorizeBearer(*context, options_.token);
  if (!auth.ok()) return auth;
  DeclarationAssembler assembler(options_.shard_index, options_.shard_count);
  proto::ModelDeclaration message;
  uint32_t worker = 0;
  while (reader->Read(&message)) {
    worker = message.worker_id();
    Status s = assembler.Add(message);
    if (!s.ok()) return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, s.message());
  }
  DeclaredModel model;
  Status s = assembler.Finish(&model);
  if (!s.ok()) return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, s.message());
  std::lock_guard<std::mutex> lock(mu_);
  if (adopted_layouts_.has_value()) {
    const std::string difference =
        DeclarationDifference(model, adopted_layouts_->first, adopted_layouts_->second);
    if (!difference.empty()) {
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                          "the master holds another model: " + difference);
    }
    response->set_adopted(false);
    return grpc::Status::OK;
  }
  spdlog::info("worker {} declared the model: {} tensors, {} parameters, {} buffers", worker,
               model.layout.num_tensors(), model.layout.size(),
               model.buffer_layout.buffers().size());
  if (options_.shard_count > 1) {
    spdlog::info("this master holds shard {} of {}: parameters [{}, {})", model.shard.index,
                 model.shard.count, model.shard.begin, model.shard.end);
  }
  adopted_layouts_.emplace(model.layout, model.buffer_layout);
  adopted_ = std::move(model);
  changed_.notify_all();
  response->set_adopted(true);
  return grpc::Status::OK;
}

grpc::Status AwaitingModelService::Pull(grpc::ServerContext* context, const proto::PullRequest*,
                                        grpc::ServerWriter<proto::ParameterChunk>*) {
  return Unavailable(context);
}

grpc::Status AwaitingModelService::Push(grpc::ServerContext* context,
                                        grpc::ServerReader<proto::GradientChunk>*,
                                        proto::PushResponse*) {
  return Unavailable(context);
}

grpc::Status AwaitingModelService::PushPull(
    grpc::ServerContext* context,
    grpc::ServerReaderWriter<proto::ParameterChunk, proto::GradientChunk>*) {
  return Unavailable(context);
}

grpc::Status AwaitingModelService::SetMembers(grpc::ServerContext* context,
                                              const proto::SetMembersRequest*,
                                              proto::SetMembersResponse*) {
  return Unavailable(context);
}

grpc::Status AwaitingModelService::Checkpoint(grpc::ServerContext* context,
                                              const proto::CheckpointRequest*,
                                              proto::CheckpointResponse*) {
  return Unavailable(context);
}

grpc::Status AwaitingModelService::PushBuffers(grpc::ServerContext* context,
                                               const proto::PushBuffersRequest*,
                                               proto::PushBuffersResponse*) {
  return Unavailable(context);
}

grpc::Status AwaitingModelService::PullBuffers(grpc::ServerContext* context,
                                               const proto::PullBuffersRequest*,
                                               proto::PullBuffersResponse*) {
  return Unavailable(context);
}

}  // namespace gaptrain
