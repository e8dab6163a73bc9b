// Job-token authentication for gRPC servers, as the master does it: every
// call must carry "authorization: Bearer <job token>" metadata. An empty
// configured token turns the check off (tests, trusted loopback).
// (A copy of MasterService's private check; the two could share one in
// services/common.)

#ifndef GAPTRAIN_SERVICES_COORDINATOR_TOKEN_AUTH_H_
#define GAPTRAIN_SERVICES_COORDINATOR_TOKEN_AUTH_H_

#include <grpcpp/grpcpp.h>

#include <string>

namespace gaptrain {

// OK, or UNAUTHENTICATED naming what is wrong (missing or wrong token). The
// comparison takes the same time wherever the tokens differ.
grpc::Status AuthorizeBearer(const grpc::ServerContext& context, const std::string& token);

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_COORDINATOR_TOKEN_AUTH_H_
