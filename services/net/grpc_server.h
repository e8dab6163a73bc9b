// StartGrpcServer: the gRPC server of gaptrain-master and
// gaptrain-coordinator, started as their shared flags say (ServerFlags):
// TLS when --tls-cert and --tls-key are given, keepalive for both ends
// (grpc_keepalive.h), gRPC's health service, listening on --listen.

#ifndef GAPTRAIN_SERVICES_NET_GRPC_SERVER_H_
#define GAPTRAIN_SERVICES_NET_GRPC_SERVER_H_

#include <grpcpp/grpcpp.h>

#include <functional>
#include <memory>

#include "services/base/status.h"
#include "services/net/server_flags.h"

namespace gaptrain {

// Serves `service` (which must outlive *server). `configure` (may be
// empty) adds a server's own arguments to the builder before it starts
// (the master's bulk-transfer limits). *port is the port bound (--listen's
// port 0 picks one). Errors name the flag: --tls-cert, --tls-key, or
// --listen when nothing could be bound.
Status StartGrpcServer(const ServerFlags& flags, grpc::Service* service,
                       const std::function<void(grpc::ServerBuilder*)>& configure,
                       std::unique_ptr<grpc::Server>* server, int* port);

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_NET_GRPC_SERVER_H_
