#include "services/worker/worker_channel.h"

#include "services/master/bulk_transfer.h"
#include "services/master/master_client.h"
#include "services/net/grpc_keepalive.h"

namespace gaptrain {

std::shared_ptr<grpc::Channel> CreateWorkerChannel(
    const std::string& target, std::shared_ptr<grpc::ChannelCredentials> credentials,
    ChannelKind kind) {
  grpc::ChannelArguments args;
  if (kind == ChannelKind::kMaster) ApplyBulkTransferArguments(&args);
  ApplyKeepaliveArguments(&args);
  return grpc::CreateCustomChannel(target, credentials, args);
}

Status ParseWireType(const std::string& name, proto::WireType* type) {
  if (name == "fp32") {
    *type = proto::FLOAT32;
  } else if (name == "bf16") {
    *type = proto::BFLOAT16;
  } else {
    return Status::InvalidArgument("spec.training.wireType: must be one of fp32 | bf16, got '" +
                                   name + "'");
  }
  return Status::OK();
}

Status MasterConnector(const TrainingJob& job, MasterRole role, const std::string& token,
                       double deadline_seconds,
                       std::shared_ptr<grpc::ChannelCredentials> credentials,
                       MasterLink::Connector* connector) {
  MasterClient::Options o;
  GAPTRAIN_RETURN_IF_ERROR(ParseWireType(job.training.wire_type, &o.wire_type));
  if (role == MasterRole::kEvaluator) o.wire_type = proto::FLOAT32;
  o.token = token;
  o.deadline_seconds = deadline_seconds;
  *connector = [o, credentials](const std::string& address) {
    // A factory, not a channel: the client makes it again while the master
    // is unreachable, so a master back at a new address is found at once.
    MasterClient::ChannelFactory make_channel = [address, credentials] {
      return CreateWorkerChannel(address, credentials, ChannelKind::kMaster);
    };
    return std::make_unique<MasterClient>(std::move(make_channel), o);
  };
  return Status::OK();
}

}  // namespace gaptrain
