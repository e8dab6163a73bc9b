"""The trainer loop: a user's model, dataset and loss as a gaptrain trainer,
with gaptrain-worker's protocol and fault semantics (docs/worker.md)."""

import logging
import math
import os
import random
import signal
import threading
import time

import grpc
import torch

from gaptrain import wire
from gaptrain import options as options_mod
from gaptrain.epoch_order import epoch_permutation
from gaptrain._proto import gaptrain_pb2 as pb
from gaptrain._proto import gaptrain_pb2_grpc as pb_grpc

log = logging.getLogger("gaptrain")

# Failures that earn another attempt (services/worker/retry.cc, IsTransient).
TRANSIENT = frozenset([
    grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.CANCELLED,
    grpc.StatusCode.ABORTED, grpc.StatusCode.DATA_LOSS, grpc.StatusCode.UNKNOWN,
    grpc.StatusCode.INTERNAL,
])
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
COORDINATOR_DEADLINE = 10.0
MASTER_DEADLINE = 30.0
MAX_RECOMPUTES = 3


class GaptrainError(RuntimeError):
    """An error retrying cannot fix; the trainer left the job with FAILED."""


class Error(Exception):
    """An RPC's failure as (code, message)."""

    def __init__(self, code, message):
        super().__init__("%s: %s" % (code.name, message))
        self.code = code


def _error(e):
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


def _channel(address, ca_file):
    if ca_file:
        with open(ca_file, "rb") as f:
            creds = grpc.ssl_channel_credentials(root_certificates=f.read())
        return grpc.secure_channel(address, creds, options=CHANNEL_OPTIONS)
    return grpc.insecure_channel(address, options=CHANNEL_OPTIONS)


class CoordinatorSession:
    """Registration, heartbeats with progress, every verb retried, leaving."""

    def __init__(self, opts, stop):
        self._opts = opts
        self._stop = stop
        self._channel = _channel(opts.coordinator, opts.coordinator_ca)
        self._stub = pb_grpc.CoordinatorStub(self._channel)
        self._metadata = (("authorization", "Bearer " + opts.token),) if opts.token else ()
        self._mu = threading.Lock()
        self.worker_id = 0
        self.registration = None
        self.generation = 0  # moves when the coordinator took this worker's task back
        self._progress = pb.HeartbeatRequest()
        self._failing = False
        self._hb_stop = threading.Event()
        self._hb_thread = None
        self._backoff = Backoff(opts.host_name)

    def _call(self, method, request, timeout=COORDINATOR_DEADLINE):
        return method(request, timeout=timeout, metadata=self._metadata)

    def _register_once(self, previous_id):
        reply = self._call(self._stub.Register, pb.RegisterRequest(
            host=self._opts.host_name, role=pb.WORKER_ROLE_TRAINER, previous_id=previous_id))
        with self._mu:
            if previous_id != 0 and not reply.resumed:
                self.generation += 1
            self.worker_id = reply.worker_id
            self.registration = reply
            self._failing = False
        return reply

    def register(self):
        backoff = Backoff(self._opts.host_name)
        while True:
            try:
                reply = self._register_once(self.worker_id)
                log.info("registered as worker %d of job %s (master %s)", reply.worker_id,
                         reply.job_name, reply.master_address)
                return reply
            except grpc.RpcError as e:
                err = _error(e)
                if err.code not in TRANSIENT:
                    raise err
                log.debug("coordinator: Register failed (%s); retrying", err)
                if not self._stop.sleep(backoff.next()):
                    raise err

    def _reregister(self, old_id):
        reply = self._register_once(old_id)
        if reply.resumed:
            log.info("registered again as worker %d (resumed)", reply.worker_id)
        else:
            log.warning("registered again as worker %d: worker %d was gone (its task went "
                        "back to the queue)", reply.worker_id, old_id)

    def call(self, verb, make_request, method):
        """A verb retried on transient failures, registering again when the
        coordinator lost this worker."""
        backoff = Backoff(self._opts.host_name)
        reregistrations = 0
        while True:
            old_id = self.worker_id
            try:
                return self._call(method, make_request(old_id))
            except grpc.RpcError as e:
                err = _error(e)
            if err.code in TRANSIENT:
                self._note_failure(verb, err)
            elif err.code in LOST_MEMBERSHIP and reregistrations < 3:
                reregistrations += 1
                log.warning("coordinator: %s refused (%s); registering again", verb, err)
                try:
                    self._reregister(old_id)
                    continue
                except grpc.RpcError as e:
                    err = _error(e)
                    if err.code not in TRANSIENT:
                        raise err
            else:
                raise err
            if not self._stop.sleep(backoff.next()):
                raise err

    def _note_failure(self, verb, err):
        with self._mu:
            if not self._failing:
                log.warning("coordinator: %s failed (%s); retrying", verb, err)
            self._failing = True

    def set_progress(self, task_id, samples_done, loss=None):
        with self._mu:
            self._progress.task_id = task_id
            self._progress.samples_done = samples_done
            if loss is not None and math.isfinite(loss):
                self._progress.loss = loss

    def set_master_version(self, version):
        with self._mu:
            self._progress.master_version = max(self._progress.master_version, version)

    def reset_master_version(self, version):
        with self._mu:
            self._progress.master_version = version

    def start_heartbeats(self):
        self._hb_thread = threading.Thread(target=self._heartbeat_loop, name="gaptrain-heartbeat",
                                           daemon=True)
        self._hb_thread.start()

    def stop_heartbeats(self):
        self._hb_stop.set()
        if self._hb_thread is not None:
            self._hb_thread.join(timeout=1.0)  # a heartbeat in flight is not awaited longer

    def _period(self):
        lease = self.registration.lease_seconds if self.registration else 3
        return min(max(lease / 3.0, 0.2), 10.0)

    def _heartbeat_loop(self):
        backoff = Backoff(self._opts.host_name)
        wait = self._period()
        while not self._hb_stop.wait(wait):
            with self._mu:
                request = pb.HeartbeatRequest()
                request.CopyFrom(self._progress)
                request.worker_id = self.worker_id
                resync = self._failing
            if request.worker_id == 0:
                wait = self._period()
                continue
            try:
                reply = self._call(self._stub.Heartbeat, request, timeout=max(self._period(), 1))
            except grpc.RpcError as e:
                err = _error(e)
                if self._hb_stop.is_set():
                    return
                if err.code in TRANSIENT:
                    self._note_failure("Heartbeat", err)
                    wait = min(self._period(), backoff.next())
                elif err.code in LOST_MEMBERSHIP:
                    log.warning("coordinator: heartbeat refused (%s); registering again", err)
                    try:
                        self._reregister(request.worker_id)
                        wait = self._period()
                    except grpc.RpcError:
                        wait = min(self._period(), backoff.next())
                else:
                    log.error("coordinator: heartbeat refused: %s", err)
                    wait = self._period()
                continue
            backoff.reset()
            if resync:  # after an outage: register again with the same id
                try:
                    self._reregister(request.worker_id)
                except grpc.RpcError as e:
                    log.warning("coordinator: registering again failed: %s", _error(e))
            if reply.phase in (pb.JOB_PHASE_SUCCEEDED, pb.JOB_PHASE_FAILED):
                log.info("coordinator: the job has %s", "succeeded"
                         if reply.phase == pb.JOB_PHASE_SUCCEEDED else "failed")
                self._stop.stop(Stop.JOB_ENDED)
            wait = self._period()

    def leave(self, reason, message, deadline):
        """Leave by the monotonic `deadline`; True when the coordinator answered."""
        self.stop_heartbeats()
        if self.worker_id == 0:
            return True
        backoff = Backoff(self._opts.host_name)
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            try:
                reply = self._call(self._stub.Leave, pb.LeaveRequest(
                    worker_id=self.worker_id, reason=reason, message=message), timeout=left)
                log.info("left the job (%s)%s", pb.LeaveReason.Name(reason),
                         ", already gone" if reply.already_gone else "")
                return True
            except grpc.RpcError as e:
                err = _error(e)
                if err.code in LOST_MEMBERSHIP:
                    return True  # gone already
                if err.code not in TRANSIENT:
                    log.warning("could not leave the job: %s", err)
                    return False
            time.sleep(min(backoff.next(), max(0.0, deadline - time.monotonic())))

    def close(self):
        self._channel.close()


def _layout_of(params):
    return [(name, tuple(p.shape)) for name, p in params]


def check_layout(master_layout, model_params):
    """Raises GaptrainError unless the master's tensors are the model's, in
    order and shape (names may differ: only a warning)."""
    theirs = [(t.name, tuple(t.shape)) for t in master_layout.tensors]
    ours = _layout_of(model_params)
    for i, ((tn, ts), (on, os_)) in enumerate(zip(theirs, ours)):
        if ts != os_:
            raise GaptrainError(
                "the master holds another model: its tensor %d (%s) has shape %s, this model's "
                "(%s) %s" % (i, tn, list(ts), on, list(os_)))
        if tn != on:
            log.warning("tensor %d is %s on the master and %s here (same shape %s)", i, tn, on,
                        list(ts))
    if len(theirs) != len(ours):
        raise GaptrainError("the master holds another model: %d tensors, this model has %d" %
                            (len(theirs), len(ours)))


class TrainResult:
    def __init__(self):
        self.worker_id = 0
        self.batches = 0
        self.samples = 0
        self.skipped = 0
        self.tasks = 0
        self.last_loss = None
        self.losses = []  # every pushed batch's loss, in order
        self.reason = ""  # "finished" or "preempted"
        self.master_version = 0

    def __repr__(self):
        return ("TrainResult(worker %d: %d batches, %d samples, %d skipped, %d tasks, last loss "
                "%s, %s)" % (self.worker_id, self.batches, self.samples, self.skipped, self.tasks,
                             self.last_loss, self.reason))


def _collate(dataset, indices):
    if isinstance(dataset, torch.utils.data.TensorDataset):
        index = torch.tensor(indices, dtype=torch.long)
        return tuple(t[index] for t in dataset.tensors)
    return torch.utils.data.default_collate([dataset[i] for i in indices])


class Trainer:
    def __init__(self, model, dataset, loss_fn, opts, batch_size=None, stop=None):
        self.model = model
        self.dataset = dataset
        self.loss_fn = loss_fn
        self.opts = opts
        self.batch_size_override = batch_size
        self.stop = stop or Stop()
        self.session = CoordinatorSession(opts, self.stop)
        self.result = TrainResult()
        self._master_channel = None
        self._master = None
        self.master_address = ""
        self._metadata = (("authorization", "Bearer " + opts.token),) if opts.token else ()
        self._params = [p for _, p in model.named_parameters()]
        self._views = []
        self._known_version = -1
        self._base_version = 0
        self._incarnation = 0
        self._pulled_with_push = False
        self._push_pull = True
        self._avg = {"pull": 0.0, "compute": 0.0, "push": 0.0}
        self._task = None
        self._task_done = 0

    # -- the master ------------------------------------------------------
    def _connect_master(self, address):
        if self._master_channel is not None:
            self._master_channel.close()
        self._master_channel = _channel(address, self.opts.master_ca)
        self._master = pb_grpc.MasterStub(self._master_channel)
        self.master_address = address
        backoff = Backoff(self.opts.host_name)
        while True:
            try:
                d = self._master.Describe(pb.DescribeRequest(), timeout=COORDINATOR_DEADLINE,
                                          metadata=self._metadata)
                break
            except grpc.RpcError as e:
                err = _error(e)
                if err.code not in TRANSIENT:
                    raise GaptrainError("master %s: Describe: %s" % (address, err))
                if not self.stop.sleep(backoff.next()):
                    return False
        check_layout(d.layout, list(self.model.named_parameters()))
        if d.rule == "sync":
            raise GaptrainError("sync mode is not supported by Python trainers yet")
        if d.rule == "dana-slim":
            raise GaptrainError("dana-slim keeps momentum on the worker; Python trainers do "
                                "not support it yet")
        self._echo = d.needs_echo
        self._echo_type = d.echo_type
        # Pulled over a bf16 wire, the copy holds bf16 values: send it as bf16.
        if self._echo and self.opts.wire_type == pb.BFLOAT16:
            self._echo_type = pb.BFLOAT16
        self._incarnation = d.incarnation.id
        self._known_version = -1
        self._pulled_with_push = False
        self.session.reset_master_version(d.version)
        log.info("master %s: job %s, rule %s, version %d, %d parameters", address, d.job_name,
                 d.rule, d.version, self._p)
        return True

    def _note_incarnation(self, incarnation):
        if incarnation and self._incarnation and incarnation != self._incarnation:
            log.warning("master: a new run (%d); pulling a whole copy", incarnation)
            self._known_version = -1
            self._pulled_with_push = False
            self.session.reset_master_version(0)
        if incarnation:
            self._incarnation = incarnation

    def _accept(self, pulled):
        self.session.set_master_version(pulled.version)
        self._note_incarnation(pulled.incarnation)
        if pulled.modified:
            with torch.no_grad():
                for p, v in zip(self._params, self._views):
                    p.copy_(v)
        self._known_version = pulled.version
        self._base_version = pulled.version

    def _pull(self):
        start = time.monotonic()
        request = pb.PullRequest(worker_id=self.session.worker_id,
                                 known_version=self._known_version,
                                 wire_type=self.opts.wire_type)
        try:
            stream = self._master.Pull(request, timeout=MASTER_DEADLINE, metadata=self._metadata)
            pulled = wire.read_parameter_chunks(stream, self._flat)
        except wire.LayoutMismatch as e:
            raise GaptrainError(str(e))
        except (grpc.RpcError, wire.MalformedReply) as e:
            self._known_version = -1  # the buffer may hold part of a reply
            raise _error(e)
        self._average("pull", time.monotonic() - start)
        self._accept(pulled)

    def _send(self, gradient, loss, echo):
        chunks = wire.gradient_chunks(
            gradient, worker_id=self.session.worker_id, base_version=self._base_version,
            wire_type=self.opts.wire_type, loss=loss, echo=echo, echo_type=self._echo_type)
        if self._push_pull:
            try:
                stream = self._master.PushPull(iter(chunks), timeout=MASTER_DEADLINE,
                                               metadata=self._metadata)
                try:
                    pulled = wire.read_parameter_chunks(stream, self._flat, expect_push=True)
                except wire.MalformedReply as e:
                    if e.push is None:
                        raise
                    # Applied, but the parameters did not all come: pull again.
                    self._known_version = -1
                    return e.push, None
                return pulled.push, pulled
            except grpc.RpcError as e:
                if e.code() != grpc.StatusCode.UNIMPLEMENTED:
                    raise
                log.info("master: no PushPull (an older master); pushing and pulling in two calls")
                self._push_pull = False
        reply = self._master.Push(iter(chunks), timeout=MASTER_DEADLINE, metadata=self._metadata)
        return reply, None

    # -- the loop --------------------------------------------------------
    def _average(self, phase, seconds):
        a = self._avg[phase]
        self._avg[phase] = seconds if a == 0 else 0.9 * a + 0.1 * seconds

    def _fits_in_grace(self, seconds):
        if not self.stop.stopped:
            return True
        if self.stop.reason != Stop.PREEMPTED:
            return False
        reserve = min(2.0, self.opts.grace_seconds / 4)
        deadline = self.stop.time + self.opts.grace_seconds - reserve
        return time.monotonic() + 1.5 * seconds <= deadline

    def run(self):
        status = None
        try:
            if self._setup():
                self._loop()
        except (GaptrainError, Error) as e:
            status = e
        except Exception as e:  # a bug in the user's code or ours: leave, then raise
            status = e
        self._finish(status)
        if status is not None:
            if isinstance(status, GaptrainError):
                raise status
            if isinstance(status, Error):
                raise GaptrainError(str(status)) from status
            raise status
        return self.result

    def _setup(self):
        try:
            reg = self.session.register()
        except Error:
            if self.stop.stopped:
                return False  # stopped while registering
            raise
        self.session.start_heartbeats()
        self.result.worker_id = reg.worker_id
        n = len(self.dataset)
        if reg.train_samples != n:
            raise GaptrainError(
                "the coordinator cuts tasks over %d training samples, this trainer's dataset has "
                "%d" % (reg.train_samples, n))
        self.batch_size = self.batch_size_override or reg.batch_size
        if self.batch_size <= 0:
            raise GaptrainError("the coordinator sent batch size 0")
        for p in self._params:
            if p.dtype != torch.float32:
                raise GaptrainError("the model's parameters must be float32 (%s)" % p.dtype)
        self._p = sum(p.numel() for p in self._params)
        self._flat = torch.empty(self._p, dtype=torch.float32)
        offset = 0
        self._views = []
        for p in self._params:
            self._views.append(self._flat[offset:offset + p.numel()].view_as(p))
            offset += p.numel()
        self._shuffle_seed = reg.shuffle_seed
        self._order_epoch = None
        self._order = None
        if self.opts.threads > 0:
            torch.set_num_threads(self.opts.threads)
        return self._connect_master(reg.master_address)

    def _loop(self):
        while not self.stop.stopped:
            address = self.session.registration.master_address
            if address != self.master_address:
                if not self._connect_master(address):
                    return
            try:
                nxt = self.session.call("NextTask",
                                        lambda wid: pb.NextTaskRequest(worker_id=wid),
                                        self.session._stub.NextTask)
            except Error:
                if self.stop.stopped:
                    return
                raise
            if nxt.outcome == pb.NextTaskResponse.ASSIGNED:
                self._run_task(nxt.task)
            elif nxt.outcome in (pb.NextTaskResponse.WAIT_FOR_WORKERS,
                                 pb.NextTaskResponse.EPOCH_FINISHING):
                self.stop.sleep(max(nxt.retry_after_ms, 10) / 1000.0)
            elif nxt.outcome == pb.NextTaskResponse.JOB_FINISHED:
                log.info("no more tasks: %s", nxt.reason)
                self.stop.stop(Stop.JOB_ENDED)
            else:
                self.stop.sleep(1.0)

    def _run_task(self, task):
        n = len(self.dataset)
        if task.task_id == 0 or task.begin >= task.end or task.end > n:
            raise GaptrainError(
                "coordinator: task %d covers positions [%d, %d) of epoch %d, not a range within "
                "this trainer's %d training samples" % (task.task_id, task.begin, task.end,
                                                        task.epoch, n))
        if self._order_epoch != task.epoch:
            self._order = epoch_permutation(self._shuffle_seed, task.epoch, n)
            self._order_epoch = task.epoch
        generation = self.session.generation
        self._pulled_with_push = False
        self._task = task
        self._task_done = 0
        reached = {}  # incarnation -> newest version a push of this task reached
        last_loss = None
        self.session.set_progress(task.task_id, 0)
        for first in range(task.begin, task.end, self.batch_size):
            if self.stop.stopped:
                return  # abandoned: Leave gives it back
            if self.session.generation != generation:
                log.warning("task %d abandoned: the coordinator took it back", task.task_id)
                self._task = None
                return
            last = min(task.end, first + self.batch_size)
            indices = [self._order[p] for p in range(first, last)]
            outcome, loss, reply = self._train_batch(indices, generation)
            if outcome in ("stopped", "lost"):
                continue
            if outcome == "skipped":
                self.result.skipped += 1
            else:
                last_loss = loss
                if reply.incarnation:
                    reached[reply.incarnation] = max(reached.get(reply.incarnation, 0),
                                                     reply.version)
            self._task_done = last - task.begin
            self.session.set_progress(task.task_id, self._task_done, last_loss)
        if self.stop.stopped and self._task_done < task.end - task.begin:
            return
        request = lambda wid: pb.CompleteTaskRequest(
            worker_id=wid, task_id=task.task_id,
            reached=[pb.MasterPosition(incarnation=i, version=v) for i, v in reached.items()])
        try:
            self.session.call("CompleteTask", request, self.session._stub.CompleteTask)
            self.result.tasks += 1
        except Error as e:
            if self.stop.stopped:
                return
            if e.code in LOST_MEMBERSHIP:
                log.warning("coordinator: task %d was not credited: %s", task.task_id, e)
            else:
                raise
        self._task = None
        self.session.set_progress(0, 0, last_loss)

    def _train_batch(self, indices, generation):
        backoff = Backoff(self.opts.host_name)
        recomputes = 0
        inputs, targets = _collate(self.dataset, indices)
        while True:
            if not self._fits_in_grace(sum(self._avg.values())):
                return "stopped", None, None
            if self.session.generation != generation:
                return "lost", None, None
            if not self._pulled_with_push:
                try:
                    self._pull()
                except Error as e:
                    if e.code != grpc.StatusCode.NOT_FOUND and e.code not in TRANSIENT:
                        raise
                    log.debug("master: Pull failed (%s); retrying", e)
                    if not self.stop.sleep(backoff.next()):
                        return "stopped", None, None
                    continue
            self._pulled_with_push = False
            if not self._fits_in_grace(self._avg["compute"] + self._avg["push"]):
                return "stopped", None, None

            start = time.monotonic()
            self.model.train()
            self.model.zero_grad(set_to_none=False)
            loss_t = self.loss_fn(self.model(inputs), targets)
            loss_t.backward()
            loss = float(loss_t.detach())
            grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in self._params]
            gradient = torch.cat([g.detach().reshape(-1).to("cpu", torch.float32) for g in grads])
            self._average("compute", time.monotonic() - start)
            if not math.isfinite(loss):
                log.warning("batch skipped: its loss is %s", loss)
                return "skipped", None, None
            if not self._fits_in_grace(self._avg["push"]):
                return "stopped", None, None

            echo = self._flat.clone() if self._echo else None
            start = time.monotonic()
            try:
                reply, pulled = self._send(gradient, loss, echo)
            except wire.LayoutMismatch as e:
                raise GaptrainError(str(e))
            except (grpc.RpcError, wire.MalformedReply) as e:
                err = _error(e)
                self._known_version = -1  # pull a whole copy before computing again
                if err.code in TRANSIENT:
                    # Whether it was applied is unknown: recompute on fresh
                    # parameters rather than apply the same gradient twice.
                    log.debug("master: push failed (%s); pulling again", err)
                    if not self.stop.sleep(backoff.next()):
                        return "stopped", None, None
                    continue
                if err.code in (grpc.StatusCode.FAILED_PRECONDITION,
                                grpc.StatusCode.OUT_OF_RANGE, grpc.StatusCode.NOT_FOUND):
                    if recomputes >= MAX_RECOMPUTES:
                        log.warning("batch skipped: the master refused it %d times, last: %s",
                                    recomputes + 1, err)
                        return "skipped", None, None
                    recomputes += 1
                    if err.code == grpc.StatusCode.NOT_FOUND and not self.stop.sleep(
                            backoff.next()):
                        return "stopped", None, None
                    continue
                if err.code in (grpc.StatusCode.INVALID_ARGUMENT,
                                grpc.StatusCode.ALREADY_EXISTS):
                    log.error("master refused the push: %s; batch skipped", err)
                    return "skipped", None, None
                raise GaptrainError("master refused the push: %s" % err)
            self._average("push", time.monotonic() - start)
            self.session.set_master_version(reply.version)
            self._note_incarnation(reply.incarnation)
            if pulled is not None and pulled.modified:
                self._accept(pulled)
                self._pulled_with_push = True
            self.result.batches += 1
            self.result.samples += len(indices)
            self.result.last_loss = loss
            self.result.losses.append(loss)
            self.result.master_version = max(self.result.master_version, reply.version)
            return "trained", loss, reply

    def _finish(self, status):
        reason = pb.LEAVE_REASON_FINISHED
        deadline = time.monotonic() + 10
        if status is not None:
            reason = pb.LEAVE_REASON_FAILED
            log.error("trainer stopped: %s", status)
        elif self.stop.reason == Stop.PREEMPTED:
            reason = pb.LEAVE_REASON_PREEMPTED
            # At most a second, within what the grace period left.
            deadline = min(time.monotonic() + 1.0,
                           max(self.stop.time + self.opts.grace_seconds, time.monotonic() + 0.05))
        self.result.reason = ("failed" if status is not None else
                              "preempted" if reason == pb.LEAVE_REASON_PREEMPTED else "finished")
        left = self.session.leave(reason, "" if status is None else str(status), deadline)
        held = ("task %d (epoch %d, positions [%d, %d), %d samples pushed)" %
                (self._task.task_id, self._task.epoch, self._task.begin, self._task.end,
                 self._task_done) if self._task is not None else "no task")
        if left:
            if self._task is not None:
                log.info("handed back %s", held)
        else:
            log.warning("could not reach the coordinator to leave; %s goes back to the queue "
                        "when worker %d's lease runs out", held, self.session.worker_id)
        log.info("trainer done: %r", self.result)
        self.session.close()
        if self._master_channel is not None:
            self._master_channel.close()


def train(model, dataset, loss_fn, batch_size=None, argv=None, environ=None):
    """Trains `model` on `dataset` with `loss_fn(model(inputs), targets)` as a
    trainer of the gaptrain job named by the flags gaptrain-worker takes
    (--job, --coordinator, --token-file or $GAPTRAIN_TOKEN, --grace-seconds,
    --host-name; `argv` defaults to sys.argv[1:], unknown flags are left
    alone). `batch_size` defaults to the job's. Returns a TrainResult when
    the job ended or the trainer was preempted (SIGTERM); raises
    GaptrainError after leaving the job with FAILED on an error retrying
    cannot fix, and OptionsError for bad flags."""
    opts = options_mod.parse(argv, environ)
    stop = Stop()
    watchdog = []
    previous = {}

    def on_signal(signum, frame):
        if stop.stopped:
            return
        log.info("%s: leaving within %g s", signal.Signals(signum).name, opts.grace_seconds)
        stop.stop(Stop.PREEMPTED)
        # Past the grace period, exit as gaptrain-worker does: the lease
        # takes the task back.
        t = threading.Timer(opts.grace_seconds, lambda: os._exit(0))
        t.daemon = True
        t.start()
        watchdog.append(t)

    if threading.current_thread() is threading.main_thread():
        for s in (signal.SIGTERM, signal.SIGINT):
            previous[s] = signal.signal(s, on_signal)
    else:
        log.warning("train() runs outside the main thread: SIGTERM is not handled")
    try:
        return Trainer(model, dataset, loss_fn, opts, batch_size=batch_size, stop=stop).run()
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
        for t in watchdog:
            t.cancel()
