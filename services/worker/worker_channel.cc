#include "services/worker/worker_channel.h"

#include <fstream>
#include <sstream>

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

Status WorkerCredentials(const std::string& flag, const std::string& ca_file,
                         std::shared_ptr<grpc::ChannelCredentials>* credentials) {
  if (ca_file.empty()) {
    *credentials = grpc::InsecureChannelCredentials();
    return Status::OK();
  }
  std::ifstream in(ca_file);
  if (!in) return Status::NotFound(flag + ": cannot read " + ca_file);
  std::ostringstream pem;
  pem << in.rdbuf();
  if (pem.str().empty()) return Status::InvalidArgument(flag + ": " + ca_file + " is empty");
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = pem.str();
  *credentials = grpc::SslCredentials(ssl);
  return Status::OK();
}

}  // namespace gaptrain
