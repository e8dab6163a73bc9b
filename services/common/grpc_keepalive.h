// HTTP/2 keepalive for gaptrain's gRPC connections, in one place for both
// ends. A peer cut off by the network (packets dropped, no FIN, no RST)
// leaves a TCP connection that looks open for minutes; pings every
// kKeepalivePingSeconds that go unanswered for kKeepaliveTimeoutSeconds
// close it, so a client's calls fail over to its retries and a server
// drops the dead peer's streams and the buffers they hold. Servers must
// accept pings that often, or they answer with GOAWAY (too_many_pings):
// apply the server half on every server whose clients apply the channel
// half.

#ifndef GAPTRAIN_SERVICES_COMMON_GRPC_KEEPALIVE_H_
#define GAPTRAIN_SERVICES_COMMON_GRPC_KEEPALIVE_H_

#include <grpcpp/grpcpp.h>

namespace gaptrain {

constexpr int kKeepalivePingSeconds = 2;
constexpr int kKeepaliveTimeoutSeconds = 2;

// Pings every kKeepalivePingSeconds, even without calls in flight, and
// reconnects after a lost connection within 100 to 500 ms (gRPC's default
// grows to two minutes: a client whose server was down for half a second
// sat idle for seconds).
void ApplyKeepaliveArguments(grpc::ChannelArguments* args);
// Pings clients likewise and accepts their pings.
void ApplyKeepaliveArguments(grpc::ServerBuilder* builder);

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_COMMON_GRPC_KEEPALIVE_H_
