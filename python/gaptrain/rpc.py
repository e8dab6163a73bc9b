"""What the coordinator's and the master's clients share: gRPC channels as
gaptrain-worker makes them, which failures earn another attempt, the
backoff between attempts, errors, and the stop flag every wait sleeps on."""

import random
import threading
import time

import grpc
import grpc.experimental  # ChannelOptions: not imported by grpc itself

from gaptrain import wire

# Failures that earn another attempt (services/worker/retry.cc, IsTransient).
TRANSIENT = frozenset([
    grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.CANCELLED,
    grpc.StatusCode.ABORTED, grpc.StatusCode.DATA_LOSS, grpc.StatusCode.UNKNOWN,
    grpc.StatusCode.INTERNAL,
])
# Failures on the network (the server away, or its name not found).
NETWORK = frozenset([grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED])
# The coordinator no longer counts this worker: register again.
LOST_MEMBERSHIP = frozenset([grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.NOT_FOUND])

# The C++ worker's channels (services/net/grpc_keepalive.cc): reconnect
# within 0.5 s, notice a silent peer within about 4 s.
CHANNEL_OPTIONS = [
    ("grpc.keepalive_time_ms", 2000),
    ("grpc.keepalive_timeout_ms", 2000),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.max_pings_without_data", 0),
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 1000),
    ("grpc.max_reconnect_backoff_ms", 500),
    ("grpc.dns_min_time_between_resolutions_ms", 500),
    ("grpc.max_receive_message_length", 64 << 20),
    ("grpc.max_send_message_length", 64 << 20),
]
# The master's channel adds what services/master/bulk_transfer.cc gives
# model-sized streams (wide HTTP/2 windows, large frames and write buffers),
# and runs unary-stream calls (Pull, and PushPull with a one-chunk gradient:
# master_client.py) on the calling thread: grpc Python otherwise starts
# threads for every call, about 1 ms a step on a two-core machine.
MASTER_CHANNEL_OPTIONS = CHANNEL_OPTIONS + [
    ("grpc.http2.lookahead_bytes", 64 << 20),
    ("grpc.http2.max_frame_size", (1 << 24) - 1),
    ("grpc.http2.write_buffer_size", 8 << 20),
    (grpc.experimental.ChannelOptions.SingleThreadedUnaryStream, 1),
]
# How long calls fail on the network before a client makes its channel
# again, and how often at most (ChannelRenewal).
RENEW_SECONDS = 0.5
COORDINATOR_DEADLINE = 10.0
MASTER_DEADLINE = 30.0


class GaptrainError(RuntimeError):
    """An error retrying cannot fix; the trainer left the job with FAILED."""


class Error(Exception):
    """An RPC's failure as (code, message)."""

    def __init__(self, code, message):
        super().__init__("%s: %s" % (code.name, message))
        self.code = code
        self.message = message


def error(e):
    """An RpcError or a malformed reply as an Error; anything else as is."""
    if isinstance(e, grpc.RpcError):
        return Error(e.code(), e.details() or "")
    if isinstance(e, wire.MalformedReply):
        return Error(grpc.StatusCode.DATA_LOSS, str(e))
    return e


class Stop:
    """Set once: preempted (SIGTERM) or the job ended. Every wait sleeps on it."""

    PREEMPTED = "preempted"
    JOB_ENDED = "job ended"

    def __init__(self):
        self._event = threading.Event()
        self.reason = None
        self.time = None

    def stop(self, reason):
        if not self._event.is_set():
            self.reason = reason
            self.time = time.monotonic()
            self._event.set()

    @property
    def stopped(self):
        return self._event.is_set()

    def sleep(self, seconds):
        """False when stopped meanwhile."""
        return not self._event.wait(seconds)


class ChannelRenewal:
    """When a client makes its channel again (gaptrain-worker's
    services/net/channel_renewal.h). A channel whose lookup of the server's
    name failed (a Kubernetes Service's name while its pod is not ready, or
    is replaced) retries the lookup on a backoff of gRPC's own, 1 s growing
    1.6 times per failure up to 2 minutes, which no channel option shortens
    in gRPC 1.51: 16 s of failures after a few. So calls that keep failing
    on the network for `interval` make a new channel, at most once per
    `interval`; a new channel to the same address shares the old one's
    connection when it has one, so an unneeded renewal costs a lookup."""

    def __init__(self, interval=RENEW_SECONDS):
        self._interval = interval
        self._failing_since = None
        self._renewed_at = None

    def renew(self, code, now=None):
        """The last call ended with `code` (None: it succeeded). True when
        the caller should make its channel again; any answer from the server
        ends the outage, and CANCELLED (the caller's own) changes nothing."""
        if code == grpc.StatusCode.CANCELLED:
            return False
        if code not in NETWORK:  # every answered call: no clock read
            self._failing_since = None
            return False
        now = time.monotonic() if now is None else now
        if self._failing_since is None:
            self._failing_since = now
        if now - self._failing_since < self._interval:
            return False
        if self._renewed_at is not None and now - self._renewed_at < self._interval:
            return False
        self._renewed_at = now
        return True


class Backoff:
    """100 ms doubling to 0.5 s, half of each delay random (docs/worker.md)."""

    def __init__(self, seed, initial=0.1, cap=0.5):
        self._rng = random.Random(seed)
        self._initial, self._cap = initial, cap
        self._next = initial

    def reset(self):
        self._next = self._initial

    def next(self):
        d = self._next
        self._next = min(self._cap, self._next * 2)
        return d / 2 + self._rng.random() * d / 2


def channel(address, ca_file, options=CHANNEL_OPTIONS):
    if ca_file:
        with open(ca_file, "rb") as f:
            creds = grpc.ssl_channel_credentials(root_certificates=f.read())
        return grpc.secure_channel(address, creds, options=options)
    return grpc.insecure_channel(address, options=options)


def bearer(token):
    """The call metadata carrying the job token."""
    return (("authorization", "Bearer " + token),) if token else ()
