// ChannelRenewal: when a client should make its gRPC channel again.
//
// A channel to HOST:PORT looks HOST up when it starts, and again when its
// connection fails, at most every GRPC_ARG_DNS_MIN_TIME_BETWEEN_RESOLUTIONS_MS
// (grpc_keepalive.h makes that 0.5 s). But a lookup that FAILS, as the
// name of a Kubernetes headless Service does while its only pod is being
// replaced, sends gRPC's resolver into a backoff of its own (1 s growing
// 1.6 times per failure up to 2 minutes; no channel argument shortens it
// in gRPC 1.51): the longer the server was away, the later after it serves
// again the channel looks. Measured with gRPC 1.51 (a channel calling
// every 100 ms, a name in a hosts file that was gone for 12 s): it reached
// the new server 3.5 s after it served; made again every second, 0.1-0.2 s
// after. So a client whose calls keep failing on the network makes its
// channel again, at most once per `interval` (0.5 s; with 1 s a trainer
// reached a moved coordinator 1.8 s after it served, with 0.5 s 1.4 s, and
// 0.5 s once connection attempts got 1 s, grpc_keepalive.h). Another
// channel to the same address shares the old one's connection (gRPC's
// subchannel pool), so a renewal that was not needed costs little: one
// lookup of the name.
//
// What callers may rely on:
//   - Renew(outcome, now) is true when calls have failed on the network
//     (UNAVAILABLE, DEADLINE_EXCEEDED) since at least `interval` ago, and
//     the last renewal it asked for is at least `interval` old; the caller
//     then makes the channel again. Any other outcome, OK or an answer from
//     the server (NOT_FOUND, ...), ends the outage; CANCELLED (the caller's
//     own doing) changes nothing.
//   - Deterministic: the caller passes the time. Not thread-safe.

#ifndef GAPTRAIN_SERVICES_NET_CHANNEL_RENEWAL_H_
#define GAPTRAIN_SERVICES_NET_CHANNEL_RENEWAL_H_

#include <chrono>
#include <optional>

#include "services/base/status.h"

namespace gaptrain {

constexpr std::chrono::milliseconds kChannelRenewalInterval{500};

class ChannelRenewal {
 public:
  using Clock = std::chrono::steady_clock;

  explicit ChannelRenewal(std::chrono::milliseconds interval = kChannelRenewalInterval)
      : interval_(interval) {}

  // A call's outcome; true when the channel should be made again now.
  bool Renew(const Status& outcome, Clock::time_point now = Clock::now());

  // Whether calls are failing on the network now.
  bool failing() const { return failing_since_.has_value(); }

 private:
  const std::chrono::milliseconds interval_;
  // Since the outage began, or since the last renewal.
  std::optional<Clock::time_point> failing_since_;
};

}  // namespace gaptrain

#endif  // GAPTRAIN_SERVICES_NET_CHANNEL_RENEWAL_H_
