// Job-token authentication for gaptrain's gRPC servers: every call must
// carry "authorization: Bearer <job token>" metadata (and the coordinator's
// /status the status token, with BearerMatches). An empty configured
// token turns the check off (tests, trusted loopback).

#ifndef GAPTRAIN_SERVICES_NET_TOKEN_AUTH_H_
#define GAPTRAIN_SERVICES_NET_TOKEN_AUTH_H_

#include <grpcpp/grpcpp.h>

#include <string>

namespace gaptrain {

// OK, or UNAUTHENTICATED naming what is wrong (missing or wrong token). The
// comparison takes the same time wherever the tokens differ.
grpc::Status AuthorizeBearer(const grpc::ServerContextBase& context, const std::string& token);

// Whether an Authorization value (an HTTP header's, a gRPC metadata's) is
// "Bearer <token>", compared in the same time wherever they differ.
bool BearerMatches(const std::string& authorization, const std::string& token);

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_NET_TOKEN_AUTH_H_
