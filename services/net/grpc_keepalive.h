// HTTP/2 keepalive for gaptrain's gRPC connections, in one place for both
// ends, and how soon a client finds its server again. A peer cut off by
// the network (packets dropped, no FIN, no RST) leaves a TCP connection
// that looks open for minutes; pings every kKeepalivePingSeconds that go
// unanswered for kKeepaliveTimeoutSeconds close it, so a client's calls
// fail over to its retries and a server drops the dead peer's streams and
// the buffers they hold. Servers must accept pings that often, or they
// answer with GOAWAY (too_many_pings): apply the server half on every
// server whose clients apply the channel half.

#ifndef GAPTRAIN_SERVICES_NET_GRPC_KEEPALIVE_H_
#define GAPTRAIN_SERVICES_NET_GRPC_KEEPALIVE_H_

#include <grpcpp/grpcpp.h>

namespace gaptrain {

constexpr int kKeepalivePingSeconds = 2;
constexpr int kKeepaliveTimeoutSeconds = 2;
// How soon a channel may look its server's name up again.
constexpr int kMinMillisBetweenResolutions = 500;
// How long one connection attempt may take.
constexpr int kMinConnectMillis = 1000;

// Pings every kKeepalivePingSeconds, even without calls in flight, and
// reconnects after a lost connection within 100 to 500 ms (gRPC's default
// grows to two minutes: a client whose server was down for half a second
// sat idle for seconds). An attempt may take kMinConnectMillis to connect
// (GRPC_ARG_MIN_RECONNECT_BACKOFF_MS is that timeout in gRPC, not a
// delay): at 100 ms, attempts to a freshly started server on a busy
// machine timed out before its HTTP/2 handshake, three in a row, and a
// trainer reached a moved coordinator 1.4 s after it served instead of
// 0.5 s. (An address that drops packets holds a call for 1 s.)
//
// A lost connection also makes the channel look the name up again, but
// gRPC does that at most every 30 s by default: a master that came back at
// a new address behind the same name (a new pod behind a Kubernetes
// Service) got its first update 23 s after it served on a cluster, 29.6 s
// in services/worker/moved_servers_test. Here every
// kMinMillisBetweenResolutions: a lookup per client and half second at
// most, and only while its connection fails. A name that does not resolve
// at all for a while needs more: see channel_renewal.h.
void ApplyKeepaliveArguments(grpc::ChannelArguments* args);
// Pings clients likewise and accepts their pings.
void ApplyKeepaliveArguments(grpc::ServerBuilder* builder);

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_NET_GRPC_KEEPALIVE_H_
