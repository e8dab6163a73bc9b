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
- several masters (spec.master.shards S), each holding a range of θ
  (shard_plan.py): one MasterClient per shard, each over its own channel
  and pulling into and pushing from its range of the one flat buffer.
  Every pull and push goes to all shards at once (shard 0 on the calling
  thread, the others on a pool of S - 1 threads; gRPC releases the GIL
  while it waits), and each shard keeps its own version, run, PushPull
  support and pulled θ. A push one shard refuses and the others apply is
  recomputed and sent to that shard only (new_batch() marks a batch's
  first try). The version the coordinator hears of is the lowest of the
  shards'; a task's completion carries one position per shard and run
  (reached()). The buffers live on shard 0. A declared model
  (fromTrainer) goes to every shard with its range's values;
- the master's answers after failed ones counted as a reconnect, and the
  pull's and push's moving-average durations (the grace decision);
- the evaluator's side: observer pulls of θ (every shard) and the buffers,
  the master's version (the lowest of the shards'), each retried.

One master (S = 1) is the case of one shard holding all of θ.

The Trainer keeps the data, the user's compute, retries' waits and the
grace period."""

import concurrent.futures
import logging
import threading
import time

import grpc

from gaptrain import module_buffers
from gaptrain import rpc
from gaptrain.dana_slim import DanaSlimMomentum
from gaptrain.master_client import FlatModel, MasterClient
from gaptrain.rpc import Error, GaptrainError, TRANSIENT
from gaptrain._proto import gaptrain_pb2 as pb

log = logging.getLogger("gaptrain")

# What the training loop does after a failed pull or push; the session has
# waited where the retry policy asks for it.
AGAIN = "again"          # pull, compute and push the batch again: after a wait when the
#                          master was away or does not know this worker yet, at once after
#                          a refusal as stale, from the future or without its copy
SKIP = "skip"            # drop the batch: a bug's INVALID_ARGUMENT, a sync step that has it,
#                          or refused MAX_RECOMPUTES times
STOPPED = "stopped"      # the worker is stopping: the wait was cut short
FAIL = "fail"            # nothing to retry: the token refused, another model

MAX_RECOMPUTES = 3       # a batch's refusals (stale, not a member) before it is skipped


def master_addresses(registration):
    """The masters a RegisterResponse names: shard i's address at i (a
    coordinator from before shards names one, master_address)."""
    return list(registration.master_addresses) or [registration.master_address]


class MasterSession:
    def __init__(self, opts, stop, session, metrics, named_params, named_buffers=()):
        self.opts = opts
        self.stop = stop
        self.session = session  # the coordinator session: versions seen, heartbeats
        self.metrics = metrics
        self.model = FlatModel(named_params, named_buffers)
        self.clients = []  # one MasterClient per shard, shard i at i
        self.addresses = []
        self._pool = None  # S - 1 threads for shards 1.. (S > 1)
        self.slim = None  # DanaSlimMomentum with the dana-slim rule
        self.pull_seconds = 0.0
        self.push_seconds = 0.0
        self._failing = False  # the next answer is a reconnect
        self._pushes_since_buffers = 0
        self._reached = {}  # (shard, incarnation) -> newest version the task's pushes reached
        self._backoff = rpc.Backoff(opts.host_name)  # the batch in hand's retries
        self._recomputes = 0  # the batch in hand's refusals

    # The flat buffer the model's parameters follow, and where they compute.
    @property
    def flat(self):
        return self.model.flat

    @property
    def device(self):
        return self.model.mirror.device

    @property
    def address(self):
        """Shard 0's address ("" before connect)."""
        return self.addresses[0] if self.addresses else ""

    def connect(self, addresses, declare=True):
        """Describes the masters at `addresses` (shard i's at i; a string:
        one master) and checks they hold this model, their shards in order
        tiling θ (a trainer declares it to masters that wait for one, the
        evaluator waits: `declare`); False when stopped meanwhile."""
        addresses = [addresses] if isinstance(addresses, str) else list(addresses)
        if not addresses:
            raise GaptrainError("the coordinator named no master")
        if len(addresses) != len(self.clients):
            self._close_clients()
            self.clients = [MasterClient(self.opts, self.stop, self.session, self.model)
                            for _ in addresses]
            if len(addresses) > 1:
                self._pool = concurrent.futures.ThreadPoolExecutor(
                    max_workers=len(addresses) - 1, thread_name_prefix="gaptrain-shard")
        self.addresses = addresses
        for client, address in zip(self.clients, addresses):
            if not client.connect(address, declare=declare):
                return False
        self._check_shards()
        first = self.clients[0]
        if first.rule == "dana-slim" and self.slim is None:
            self.slim = DanaSlimMomentum(self.model.size, self.opts.momentum,
                                         self.opts.weight_decay)
            log.info("DANA-Slim momentum on this trainer (momentum %g, weight decay %g)",
                     self.opts.momentum, self.opts.weight_decay)
        self.session.reset_master_version(min(c.described_version for c in self.clients))
        return True

    def _check_shards(self):
        """Raises GaptrainError unless master i says it is shard i of the
        registration's count and the ranges tile the model's parameters."""
        count, p, at = len(self.clients), self.model.size, 0
        for i, c in enumerate(self.clients):
            its_count = max(c.shard.count, 1)
            if (c.shard.index != i or its_count != count or c.begin != at or c.end > p
                    or (c.end <= at and p > 0)):
                raise GaptrainError(
                    "master %s holds shard %d of %d [%d, %d); the registration names it shard %d "
                    "of %d, from parameter %d" % (self.addresses[i], c.shard.index, its_count,
                                                  c.begin, c.end, i, count, at))
            at = c.end
        if at != p:
            raise GaptrainError("the masters' shards end at parameter %d of the model's %d" %
                                (at, p))

    def adopt_buffers(self):
        """At start: the job's module buffers once trainers have sent any
        (they live on shard 0)."""
        self.clients[0].adopt_buffers()

    def forget_pulled(self):
        """The next pull() asks the masters (a task's first batch starts
        from θ read after the task's own calls)."""
        for c in self.clients:
            c.pulled_with_push = False

    def new_batch(self):
        """The next push is a new batch's: every shard gets it (a batch
        pushed again after a refusal goes to the shards without it), and
        its retries and refusals are counted afresh."""
        for c in self.clients:
            c.has_batch = False
        self._backoff.reset()
        self._recomputes = 0

    def begin_task(self):
        """Forgets the last task's positions (reached())."""
        self._reached = {}

    def reached(self):
        """Where the task's pushes are, for its completion: {(shard,
        incarnation): the newest version they reached} (in sync mode an
        accumulated gradient's is the step's next)."""
        return dict(self._reached)

    def pull(self):
        """θ into the model, unless the last push brought the newest from
        every shard."""
        clients = self.clients
        all_pulled = all(c.pulled_with_push for c in clients)
        for c in clients:
            c.pulled_with_push = False
        if all_pulled:
            return
        start = time.monotonic()
        modified = [False] * len(clients)

        def pull_one(k, c):
            modified[k] = c.pull().modified

        failures = self._each(pull_one)
        self._settle(failures, any(modified), pulled=[e is None for e in failures])
        seconds = time.monotonic() - start
        self.pull_seconds = _average(self.pull_seconds, seconds)
        self.metrics.record_pull(seconds)

    def push(self, gradient, loss, while_waiting=None):
        """Pushes `gradient` (the model's flat gradient; DANA-Slim's u with
        that rule) as computed on the last pulled θ, with `loss`
        (math.nan: none), each shard its range, to the shards that do not
        have this batch yet (new_batch()); calls while_waiting() once the
        bytes are out. Returns the masters' PushResponse (with several: the
        lowest version, the largest staleness, the Gap averaged over θ, an
        outcome other than APPLIED when any shard's is); in sync mode the
        step it entered is out by then. Raises Error (grpc's status) on a
        failure, the first shard's: ask after_push_failure() what it means."""
        clients = self.clients
        if self.slim is not None:
            gradient = self.slim.update(gradient, self.model.flat)
        start = time.monotonic()
        had = [c.has_batch for c in clients]
        # Each shard's bytes are out when its call started; while_waiting
        # (which may clear the gradient) waits for all of them.
        out = [threading.Event() for _ in clients]

        def bytes_out(k):
            def sent():
                out[k].set()
                if k == 0:
                    for e in out[1:]:
                        e.wait()
                    if while_waiting is not None:
                        while_waiting()
            return sent

        def push_one(k, c):
            try:
                if not had[k]:
                    c.push(gradient, loss, while_waiting=bytes_out(k))
            finally:
                out[k].set()

        failures = self._each(push_one)
        modified = False
        for k, (c, e) in enumerate(zip(clients, failures)):
            if had[k]:
                c.pulled_with_push = False
                continue
            if e is not None:
                continue
            c.has_batch = True
            reply = c.reply
            c.note_incarnation(reply.incarnation)
            if reply.incarnation:
                # In sync mode an accumulated gradient enters θ with the next step.
                version = reply.version + (reply.outcome == pb.PushResponse.ACCUMULATED)
                key = (k, reply.incarnation)
                self._reached[key] = max(self._reached.get(key, 0), version)
            if c.pulled is not None and c.pulled.modified:
                c.accept(c.pulled)
                c.pulled_with_push = True
                modified = True
        self._settle(failures, modified)
        # Every shard has the batch: the push is done.
        self.new_batch()
        seconds = time.monotonic() - start
        self.push_seconds = _average(self.push_seconds, seconds)
        self.metrics.record_push(seconds)
        reply = self._combined_reply()
        self.session.set_master_version(reply.version)
        if reply.outcome == pb.PushResponse.DISCARDED_FINISHED:
            # Past the job's maxUpdates: the coordinator ends the job once a
            # heartbeat reports the version, so report it now, and wait for
            # its answer (the stop flag) rather than compute batches the
            # master will discard; a heartbeat period at most.
            self.session.heartbeat_now()
            self.stop.sleep(self.session.heartbeat_period())
        if self.slim is not None:
            self.slim.accept()
        # The master holds a sync PushPull until the step is out; an older
        # master (or a step slower than its limit) answers before: poll.
        for c in clients:
            if (c.rule == "sync" and c.reply.outcome == pb.PushResponse.ACCUMULATED
                    and c.base_version <= c.reply.version):
                self._wait_for_next_step(c, c.reply.version)
        self._pushes_since_buffers += 1
        if self._pushes_since_buffers >= module_buffers.PUSHES_PER_SEND:
            self.send_buffers()
        return reply

    def _combined_reply(self):
        """The shards' answers to one push as one (services/worker/
        master_session.cc, CombinedReply)."""
        clients = self.clients
        if len(clients) == 1:
            return clients[0].reply
        combined = pb.PushResponse()
        combined.CopyFrom(clients[0].reply)
        gap = penalty = 0.0
        for c in clients:
            r = c.reply
            if r.outcome != pb.PushResponse.APPLIED:  # a sync step or the job's end
                combined.outcome = r.outcome
            combined.version = min(combined.version, r.version)
            combined.staleness = max(combined.staleness, r.staleness)
            gap += r.gap_mean * (c.end - c.begin)
            penalty += r.penalty_mean * (c.end - c.begin)
        combined.gap_mean = gap / max(self.model.size, 1)
        combined.penalty_mean = penalty / max(self.model.size, 1)
        return combined

    def send_buffers(self):
        """The module's buffers to the master (shard 0) now (best effort)."""
        self._pushes_since_buffers = 0
        self.clients[0].send_buffers(self.session.worker_id)

    @property
    def buffers_behind(self):
        """Whether a push was made since the buffers were last sent."""
        return self._pushes_since_buffers > 0

    def after_pull_failure(self, err):
        """AGAIN (after the backoff's wait), STOPPED or FAIL after pull()
        raised `err` (an Error)."""
        if err.code in TRANSIENT:
            self._failing = True
            log.debug("master: Pull failed (%s); retrying", err)
            return self._wait()
        if err.code == grpc.StatusCode.NOT_FOUND:  # the membership feed is catching up
            log.debug("master: not a member yet (%s); retrying", err)
            return self._wait()
        return FAIL

    def after_push_failure(self, err):
        """What the loop does after push() raised `err` (an Error): AGAIN,
        SKIP, STOPPED or FAIL; refusals are counted in the metrics."""
        if err.code in TRANSIENT:
            # Whether it was applied is unknown: recompute on fresh
            # parameters rather than apply the same gradient twice.
            self._failing = True
            log.debug("master: push failed (%s); pulling again", err)
            return self._wait()
        self.metrics.record_push_rejected(err.code.name.lower())
        if err.code in (grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.OUT_OF_RANGE,
                        grpc.StatusCode.NOT_FOUND):
            if self._recomputes >= MAX_RECOMPUTES:
                log.warning("batch skipped: the master refused it %d times, last: %s",
                            self._recomputes + 1, err)
                return SKIP
            self._recomputes += 1
            # Not a member: the membership feed catches up meanwhile.
            return self._wait() if err.code == grpc.StatusCode.NOT_FOUND else AGAIN
        if err.code == grpc.StatusCode.ALREADY_EXISTS:  # sync: the step has ours
            log.warning("master: %s; batch skipped", err)
            return SKIP
        if err.code == grpc.StatusCode.INVALID_ARGUMENT:
            log.error("master refused the push: %s; batch skipped", err)
            return SKIP
        return FAIL

    def _wait(self):
        """AGAIN after the backoff's next delay, STOPPED if stopped meanwhile."""
        return AGAIN if self.stop.sleep(self._backoff.next()) else STOPPED

    # -- the evaluator's side -------------------------------------------------
    def observe(self, deadline=None):
        """θ and the module buffers (BatchNorm's statistics, the trainers'
        average) into the model as the masters hold them now, with an
        observer pull of every shard (θ itself, not DANA's look-ahead; no
        membership); transient failures retried until the monotonic
        `deadline`, or while not stopped without one. The version pulled
        (the lowest of the shards'), or None when stopped meanwhile."""
        backoff = rpc.Backoff(self.opts.host_name)
        clients = self.clients
        while True:
            modified = [False] * len(clients)

            def pull_one(k, c):
                modified[k] = c.pull(observer=True).modified

            try:
                failures = self._each(pull_one)
                self._settle(failures, any(modified), pulled=[e is None for e in failures])
                self._call(clients[0], clients[0].pull_buffers)
                return min(c.base_version for c in clients)
            except Error as err:
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
        """The masters' version now (Describe; the lowest of the shards'),
        transient failures retried; None when stopped meanwhile."""
        backoff = rpc.Backoff(self.opts.host_name)
        while True:
            try:
                version = min(self._call(c, c.describe).version for c in self.clients)
                self._answered()
                return version
            except Error as err:
                if err.code not in TRANSIENT:
                    raise err
                self._failing = True
                if not self.stop.sleep(backoff.next()):
                    return None

    def close(self):
        self._close_clients()

    def _close_clients(self):
        for c in self.clients:
            c.close()
        if self._pool is not None:
            self._pool.shutdown(wait=False)
            self._pool = None

    # -- calling every shard --------------------------------------------------
    def _each(self, fn):
        """fn(k, client) for every shard k at once: shard 0 on this thread,
        the others on the pool. What each raised (an Error or a
        GaptrainError; None when it returned), in shard order; anything
        else a call raises is raised once all are done."""
        def run(k, c):
            try:
                fn(k, c)
                return None
            except (Error, GaptrainError) as e:
                return e

        clients = self.clients
        if len(clients) == 1:
            return [run(0, clients[0])]
        futures = [self._pool.submit(run, k, c) for k, c in enumerate(clients) if k > 0]
        try:
            first = run(0, clients[0])
        finally:
            concurrent.futures.wait(futures)
        return [first] + [f.result() for f in futures]

    def _settle(self, failures, modified, pulled=None):
        """After a call to every shard (failures: what _each returned):
        each shard's outcome noted (its channel made again after failures
        for a while), the model's device copy refreshed when values came
        (`modified`), the lowest version told to the coordinator session
        (`pulled`: the shards whose pull succeeded; a shard in a new run is
        taken at its new version once pulled); then the first failure
        raised, a GaptrainError before an Error, an Error naming its shard
        when there are several."""
        clients = self.clients
        for c, e in zip(clients, failures):
            c.note_outcome(e.code if isinstance(e, Error) else None)
        if modified:
            self.model.mirror.load()
        lowest = min(c.base_version for c in clients)
        changed = [c for c in clients if c.run_changed]
        if changed and pulled is not None and all(pulled[clients.index(c)] for c in changed):
            for c in changed:
                c.run_changed = False
            self.session.reset_master_version(lowest)
        else:
            self.session.set_master_version(lowest)
        for e in failures:
            if isinstance(e, GaptrainError):
                raise e
        for c, e in zip(clients, failures):
            if e is not None:
                if len(clients) > 1:
                    raise Error(e.code, "%s: %s" % (c.name, e.message))
                raise e
        self._answered()

    def _call(self, client, fn):
        """fn() (a unary call to `client`'s master), its outcome noted;
        raises Error."""
        try:
            result = fn()
        except grpc.RpcError as e:
            err = rpc.error(e)
            client.note_outcome(err.code)
            if len(self.clients) > 1:
                raise Error(err.code, "%s: %s" % (client.name, err.message))
            raise err
        client.note_outcome(None)
        return result

    def _answered(self):
        if self._failing:  # a call succeeded after failed ones
            self._failing = False
            self.metrics.record_reconnect("master")

    def _wait_for_next_step(self, client, pushed_on):
        """Sync mode: the push waits for the step's other gradients, so pull
        `client`'s shard until the step's update is out; the next batch
        then starts from it."""
        backoff = rpc.Backoff(self.opts.host_name, initial=0.001, cap=0.1)
        while not self.stop.stopped:
            try:
                if client.pull().modified:
                    self.model.mirror.load()
                self.session.set_master_version(min(c.base_version for c in self.clients))
                if client.base_version > pushed_on:
                    client.pulled_with_push = True  # current: no pull before the next batch
                    return
            except Error as e:
                log.debug("master: Pull while waiting for the step failed (%s)", e)
            if not self.stop.sleep(backoff.next()):
                return


def _average(average, seconds):
    """A moving average of a call's duration; the first sample sets it."""
    return seconds if average == 0 else 0.9 * average + 0.1 * seconds
