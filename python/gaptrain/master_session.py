"""A trainer's half of the parameter-server protocol, as ps-lite's KVWorker
is one (gaptrain-worker's MasterSession, services/worker/master_session.h):
the training loop pulls θ into its model, computes, pushes, and asks what
a refusal means; this owns everything in between:

- the version a gradient was computed on, and a whole pull after any
  failed call (the flat buffer may hold part of a reply);
- PushPull (the push and the next step's θ in one call), and Push then
  Pull against a master without it (master_client.py);
- what the master's rule needs from a push, as Describe says: the copy θ
  was pulled as (gapSource echo), DANA-Slim's u with the trainer's
  momentum (kept only when a push is applied), and in sync mode a wait
  until the step is out;
- the module's buffers (BatchNorm's statistics): taken from the master at
  start, sent every module_buffers.PUSHES_PER_SEND pushes and at task ends;
- the master's answers after failed ones counted as a reconnect, and the
  pull's and push's moving-average durations (the grace decision);
- the evaluator's side: observer pulls of θ and the buffers, the master's
  version, each retried.

The Trainer keeps the data, the user's compute, retries' waits and the
grace period."""

import logging
import time

import grpc

from gaptrain import module_buffers
from gaptrain import rpc
from gaptrain import wire
from gaptrain.dana_slim import DanaSlimMomentum
from gaptrain.master_client import MasterClient
from gaptrain.rpc import Error, GaptrainError, TRANSIENT
from gaptrain._proto import gaptrain_pb2 as pb

log = logging.getLogger("gaptrain")

# What the training loop does after a failed pull or push.
RETRY = "retry"          # after a wait: the master is away, or does not know this worker yet
RECOMPUTE = "recompute"  # pull again and compute again: refused as stale, from the future,
#                          without its copy, not a member
SKIP = "skip"            # drop the batch: a bug's INVALID_ARGUMENT, a sync step that has it
FAIL = "fail"            # nothing to retry: the token refused, another model


class MasterSession:
    def __init__(self, opts, stop, session, metrics, named_params, named_buffers=()):
        self.opts = opts
        self.stop = stop
        self.session = session  # the coordinator session: versions seen, heartbeats
        self.metrics = metrics
        self.client = MasterClient(opts, stop, session, named_params, named_buffers)
        self.slim = None  # DanaSlimMomentum with the dana-slim rule
        self.pull_seconds = 0.0
        self.push_seconds = 0.0
        self._failing = False  # the next answer is a reconnect
        self._pushes_since_buffers = 0

    # The flat buffer the model's parameters follow, and where they compute.
    @property
    def flat(self):
        return self.client.flat

    @property
    def device(self):
        return self.client.mirror.device

    @property
    def address(self):
        return self.client.address

    def connect(self, address, declare=True):
        """Describes the master at `address` and checks it holds this model
        (a trainer declares it to a master that waits for one, the evaluator
        waits: `declare`); False when stopped meanwhile."""
        if not self.client.connect(address, declare=declare):
            return False
        if self.client.rule == "dana-slim" and self.slim is None:
            self.slim = DanaSlimMomentum(self.client.size, self.opts.momentum,
                                         self.opts.weight_decay)
            log.info("DANA-Slim momentum on this trainer (momentum %g, weight decay %g)",
                     self.opts.momentum, self.opts.weight_decay)
        return True

    def adopt_buffers(self):
        """At start: the job's module buffers once trainers have sent any."""
        self.client.adopt_buffers()

    def forget_pulled(self):
        """The next pull() asks the master (a task's first batch starts from
        θ read after the task's own calls)."""
        self.client.pulled_with_push = False

    def pull(self):
        """θ into the model, unless the last push brought the newest."""
        if self.client.pulled_with_push:
            self.client.pulled_with_push = False
            return
        start = time.monotonic()
        self.client.pull()
        self._answered()
        seconds = time.monotonic() - start
        self.pull_seconds = _average(self.pull_seconds, seconds)
        self.metrics.record_pull(seconds)

    def push(self, gradient, loss, while_waiting=None):
        """Pushes `gradient` (the model's flat gradient; DANA-Slim's u with
        that rule) as computed on the last pulled θ, with `loss`
        (math.nan: none); calls while_waiting() once the bytes are out.
        Returns the master's PushResponse; in sync mode the step it
        entered is out by then. Raises Error (grpc's status) on a failure:
        ask after_push_failure() what it means."""
        client = self.client
        if self.slim is not None:
            gradient = self.slim.update(gradient, client.flat)
        # The parameters this gradient was computed on; the push copies
        # them into its bytes before anything could change them.
        echo = client.flat if client.echo else None
        start = time.monotonic()
        try:
            reply, pulled = client.send(gradient, loss, echo, while_waiting=while_waiting)
        except wire.LayoutMismatch as e:
            raise GaptrainError(str(e))
        except (grpc.RpcError, wire.MalformedReply) as e:
            client.known_version = -1  # pull a whole copy before computing again
            raise rpc.error(e)
        self._answered()
        seconds = time.monotonic() - start
        self.push_seconds = _average(self.push_seconds, seconds)
        self.metrics.record_push(seconds)
        self.session.set_master_version(reply.version)
        if reply.outcome == pb.PushResponse.DISCARDED_FINISHED:
            # Past the job's maxUpdates: the coordinator ends the job once a
            # heartbeat reports the version, so report it now.
            self.session.heartbeat_now()
        client.note_incarnation(reply.incarnation)
        if self.slim is not None:
            self.slim.accept()
        if pulled is not None and pulled.modified:
            client.accept(pulled)
            client.pulled_with_push = True
        # The master holds a sync PushPull until the step is out; an older
        # master (or a step slower than its limit) answers before: poll.
        if (client.rule == "sync" and reply.outcome == pb.PushResponse.ACCUMULATED
                and client.base_version <= reply.version):
            self._wait_for_next_step(reply.version)
        self._pushes_since_buffers += 1
        if self._pushes_since_buffers >= module_buffers.PUSHES_PER_SEND:
            self.send_buffers()
        return reply

    def send_buffers(self):
        """The module's buffers to the master now (best effort)."""
        self._pushes_since_buffers = 0
        self.client.send_buffers(self.session.worker_id)

    @property
    def buffers_behind(self):
        """Whether a push was made since the buffers were last sent."""
        return self._pushes_since_buffers > 0

    def after_pull_failure(self, err):
        """RETRY or FAIL after pull() raised `err` (an Error)."""
        self.client.note_outcome(err.code)
        if err.code in TRANSIENT:
            self._failing = True
            log.debug("master: Pull failed (%s); retrying", err)
            return RETRY
        if err.code == grpc.StatusCode.NOT_FOUND:  # the membership feed is catching up
            log.debug("master: not a member yet (%s); retrying", err)
            return RETRY
        return FAIL

    def after_push_failure(self, err):
        """What the loop does after push() raised `err` (an Error): RETRY,
        RECOMPUTE, SKIP or FAIL; refusals are counted in the metrics."""
        self.client.note_outcome(err.code)
        if err.code in TRANSIENT:
            # Whether it was applied is unknown: recompute on fresh
            # parameters rather than apply the same gradient twice.
            self._failing = True
            log.debug("master: push failed (%s); pulling again", err)
            return RETRY
        self.metrics.record_push_rejected(err.code.name.lower())
        if err.code in (grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.OUT_OF_RANGE,
                        grpc.StatusCode.NOT_FOUND):
            return RECOMPUTE
        if err.code == grpc.StatusCode.ALREADY_EXISTS:  # sync: the step has ours
            log.warning("master: %s; batch skipped", err)
            return SKIP
        if err.code == grpc.StatusCode.INVALID_ARGUMENT:
            log.error("master refused the push: %s; batch skipped", err)
            return SKIP
        return FAIL

    # -- the evaluator's side -------------------------------------------------
    def observe(self, deadline=None):
        """θ and the module buffers (BatchNorm's statistics, the trainers'
        average) into the model as the master holds them now, with an
        observer pull (θ itself, not DANA's look-ahead; no membership);
        transient failures retried until the monotonic `deadline`, or while
        not stopped without one. The version pulled, or None when stopped
        meanwhile."""
        backoff = rpc.Backoff(self.opts.host_name)
        while True:
            try:
                self.client.pull(observer=True)
                self.client.pull_buffers()
                self._answered()
                return self.client.base_version
            except (Error, grpc.RpcError) as e:
                err = rpc.error(e) if isinstance(e, grpc.RpcError) else e
                self.client.note_outcome(err.code)
                if err.code not in TRANSIENT:
                    raise err
                self._failing = True
                wait = backoff.next()
                if deadline is not None:
                    if time.monotonic() + wait > deadline:
                        raise err
                    time.sleep(wait)
                elif not self.stop.sleep(wait):
                    return None

    def version(self):
        """The master's version now (Describe), transient failures retried;
        None when stopped meanwhile."""
        backoff = rpc.Backoff(self.opts.host_name)
        while True:
            try:
                version = self.client.describe().version
                self._answered()
                return version
            except grpc.RpcError as e:
                err = rpc.error(e)
                self.client.note_outcome(err.code)
                if err.code not in TRANSIENT:
                    raise err
                self._failing = True
                if not self.stop.sleep(backoff.next()):
                    return None

    def close(self):
        self.client.close()

    def _answered(self):
        self.client.note_outcome(None)
        if self._failing:  # a call succeeded after failed ones
            self._failing = False
            self.metrics.record_reconnect("master")

    def _wait_for_next_step(self, pushed_on):
        """Sync mode: the push waits for the step's other gradients, so pull
        until the step's update is out; the next batch then starts from it."""
        backoff = rpc.Backoff(self.opts.host_name, initial=0.001, cap=0.1)
        while not self.stop.stopped:
            try:
                self.client.pull()
                if self.client.base_version > pushed_on:
                    self.client.pulled_with_push = True  # current: no pull before the next batch
                    return
            except Error as e:
                log.debug("master: Pull while waiting for the step failed (%s)", e)
            if not self.stop.sleep(backoff.next()):
                return


def _average(average, seconds):
    """A moving average of a call's duration; the first sample sets it."""
    return seconds if average == 0 else 0.9 * average + 0.1 * seconds
