#include "services/net/grpc_server.h"

#include "services/net/grpc_keepalive.h"
#include "services/net/tls_credentials.h"

namespace gaptrain {

Status StartGrpcServer(const ServerFlags& flags, grpc::Service* service,
                       const std::function<void(grpc::ServerBuilder*)>& configure,
                       std::unique_ptr<grpc::Server>* server, int* port) {
  std::shared_ptr<grpc::ServerCredentials> credentials;
  GAPTRAIN_RETURN_IF_ERROR(ServerCredentialsFromFiles(flags.tls_cert, flags.tls_key, &credentials));
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  *port = 0;
  builder.AddListeningPort(flags.listen, credentials, port);
  if (configure) configure(&builder);
  ApplyKeepaliveArguments(&builder);
  builder.RegisterService(service);
  *server = builder.BuildAndStart();
  if (*server == nullptr || *port == 0) {
    *server = nullptr;
    return Status::Unavailable("--listen: cannot serve gRPC on " + flags.listen);
  }
  return Status::OK();
}

}  // namespace gaptrain
