#include "services/worker/worker_channel.h"

#include "services/master/master_service.h"

namespace gaptrain {

std::shared_ptr<grpc::Channel> CreateWorkerChannel(
    const std::string& target, std::shared_ptr<grpc::ChannelCredentials> credentials,
    ChannelKind kind) {
  grpc::ChannelArguments args;
  if (kind == ChannelKind::kMaster) ApplyBulkTransferArguments(&args);
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 500);
  return grpc::CreateCustomChannel(target, credentials, args);
}

}  // namespace gaptrain
