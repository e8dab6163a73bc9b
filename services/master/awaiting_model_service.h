// AwaitingModelService: the master's gRPC API while it waits for its model
// (spec.model.fromTrainer, and no checkpoint to restore): Describe says so
// (awaiting_model, no layout), DeclareModel adopts the first valid
// declaration and checks later ones against it, and every other verb is
// UNAVAILABLE (clients retry, as during a restart). MasterProcess then
// serves MasterService over an engine built from the adopted model, on the
// same port.
//
// What callers may rely on: Wait() returns the first declaration that
// validated (model_declaration.h), once; a declaration that differs from
// it is refused with FAILED_PRECONDITION naming the difference; every call
// needs the job's token when one is set. Thread-safe.

#ifndef GAPTRAIN_SERVICES_MASTER_AWAITING_MODEL_SERVICE_H_
#define GAPTRAIN_SERVICES_MASTER_AWAITING_MODEL_SERVICE_H_

#include <grpcpp/grpcpp.h>

#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include "proto/gaptrain.grpc.pb.h"
#include "services/master/model_declaration.h"

namespace gaptrain {

class AwaitingModelService final : public proto::Master::Service {
 public:
  struct Options {
    std::string job_name;
    std::string token;  // empty: no authentication
    std::string rule;   // RuleKindName of the job's rule
    bool needs_echo = false;
    proto::WireType echo_type = proto::FLOAT32;
    proto::MasterIncarnation incarnation;
    // spec.master.shards: the range this master will hold, of how many.
    uint32_t shard_index = 0;
    uint32_t shard_count = 1;
  };

  explicit AwaitingModelService(Options options) : options_(std::move(options)) {}

  // Blocks until a declaration was adopted (true, *model set) or Stop()
  // was called (false).
  bool Wait(DeclaredModel* model);
  void Stop();

  grpc::Status Describe(grpc::ServerContext* context, const proto::DescribeRequest* request,
                        proto::DescribeResponse* response) override;
  grpc::Status DeclareModel(grpc::ServerContext* context,
                            grpc::ServerReader<proto::ModelDeclaration>* reader,
                            proto::DeclareModelResponse* response) override;
  grpc::Status Pull(grpc::ServerContext* context, const proto::PullRequest* request,
                    grpc::ServerWriter<proto::ParameterChunk>* writer) override;
  grpc::Status Push(grpc::ServerContext* context, grpc::ServerReader<proto::GradientChunk>* reader,
                    proto::PushResponse* response) override;
  grpc::Status PushPull(
      grpc::ServerContext* context,
      grpc::ServerReaderWriter<proto::ParameterChunk, proto::GradientChunk>* stream) override;
  grpc::Status SetMembers(grpc::ServerContext* context, const proto::SetMembersRequest* request,
                          proto::SetMembersResponse* response) override;
  grpc::Status Checkpoint(grpc::ServerContext* context, const proto::CheckpointRequest* request,
                          proto::CheckpointResponse* response) override;
  grpc::Status PushBuffers(grpc::ServerContext* context, const proto::PushBuffersRequest* request,
                           proto::PushBuffersResponse* response) override;
  grpc::Status PullBuffers(grpc::ServerContext* context, const proto::PullBuffersRequest* request,
                           proto::PullBuffersResponse* response) override;

 private:
  // UNAVAILABLE, or UNAUTHENTICATED without the token.
  grpc::Status Unavailable(const grpc::ServerContextBase* context) const;

  const Options options_;
  std::mutex mu_;
  std::condition_variable changed_;
  // The adopted declaration until Wait() takes it, and its layouts for
  // checking later declarations; guarded by mu_.
  std::optional<DeclaredModel> adopted_;
  std::optional<std::pair<ParameterLayout, BufferLayout>> adopted_layouts_;
  bool stopped_ = false;  // guarded by mu_
};

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_MASTER_AWAITING_MODEL_SERVICE_H_
