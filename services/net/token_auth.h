// Job-token authentication for gaptrain's gRPC servers: every call must
// carry "authorization: Bearer <job token>" metadata. An empty configured
// token turns the check off (tests, trusted loopback).

#ifndef GAPTRAIN_SERVICES_NET_TOKEN_AUTH_H_
#define GAPTRAIN_SERVICES_NET_TOKEN_AUTH_H_

#include <grpcpp/grpcpp.h>

#include <string>

namespace gaptrain {

// OK, or UNAUTHENTICATED naming what is wrong (missing or wrong token). The
// comparison takes the same time wherever the tokens differ.
grpc::Status AuthorizeBearer(const grpc::ServerContextBase& context, const std::string& token);

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_NET_TOKEN_AUTH_H_
