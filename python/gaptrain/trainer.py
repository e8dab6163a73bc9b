"""The trainer loop and `train()`: a user's model, dataset and loss as a
gaptrain trainer, with gaptrain-worker's protocol and fault semantics
(docs/worker.md): tasks from the coordinator (coordinator_client.py),
parameters and gradients to and from the master (master_client.py), each
task's next batch collated while the current one trains (batch_prefetch.py),
the batch in flight finished only if it fits the grace period after SIGTERM,
/healthz and /metrics served meanwhile (http_server.py, metrics.py)."""

import logging
import math
import os
import signal
import threading
import time

import grpc
import torch

from gaptrain import batch_prefetch
from gaptrain import heap_policy
from gaptrain import job_role
from gaptrain import module_buffers
from gaptrain import options as options_mod
from gaptrain import rpc
from gaptrain import wire
from gaptrain.coordinator_client import CoordinatorSession
from gaptrain.dana_slim import DanaSlimMomentum
from gaptrain.epoch_order import epoch_permutation
from gaptrain.flat_gradient import FlatGradient
from gaptrain.http_server import HttpServer
from gaptrain.master_client import MasterClient
from gaptrain.metrics import WorkerMetrics
from gaptrain.parameter_mirror import parameter_device, to_device
from gaptrain.rpc import Error, GaptrainError, Stop, TRANSIENT, LOST_MEMBERSHIP
from gaptrain._proto import gaptrain_pb2 as pb

log = logging.getLogger("gaptrain")

MAX_RECOMPUTES = 3


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

    def as_dict(self):
        """The result as JSON-ready values (last_loss aside: losses ends with it)."""
        return {"worker_id": self.worker_id, "batches": self.batches, "samples": self.samples,
                "skipped": self.skipped, "tasks": self.tasks, "losses": self.losses,
                "reason": self.reason, "master_version": self.master_version}

    def __repr__(self):
        return ("TrainResult(worker %d: %d batches, %d samples, %d skipped, %d tasks, last loss "
                "%s, %s)" % (self.worker_id, self.batches, self.samples, self.skipped, self.tasks,
                             self.last_loss, self.reason))


class Trainer:
    def __init__(self, model, dataset, loss_fn, opts, batch_size=None, stop=None, metrics=None,
                 builder=None):
        self.model = model
        self.dataset = dataset
        self.loss_fn = loss_fn
        self.opts = opts
        self.batch_size_override = batch_size
        self.stop = stop or Stop()
        self.metrics = metrics or WorkerMetrics()
        self.session = CoordinatorSession(opts, self.stop, self.metrics)
        self.result = TrainResult()
        self.master = None  # a MasterClient once registered
        self._params = [p for _, p in model.named_parameters()]
        self._master_failing = False  # the next success is a reconnect
        self._avg = {"pull": 0.0, "compute": 0.0, "push": 0.0}
        self._task = None
        self._task_done = 0
        # Batches are built ahead by it (batch_prefetch.py).
        self._builder = builder or batch_prefetch.ThreadBuilder(dataset)
        self._slim = None  # DanaSlimMomentum under the dana-slim rule
        self._pushes_since_buffers = 0  # since the module's buffers were last sent

    # -- the loop --------------------------------------------------------
    def _average(self, phase, seconds):
        getattr(self.metrics, "record_" + phase)(seconds)
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
        job_role.run(self._setup, self._loop, self._finish)
        return self.result

    def _setup(self):
        reg = job_role.register(self.session, self.stop)
        if reg is None:
            return False  # stopped while registering
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
        self.master = MasterClient(self.opts, self.stop, self.session,
                                   self.model.named_parameters(), self.model.named_buffers())
        self._gradient = FlatGradient(self._params)
        self._shuffle_seed = reg.shuffle_seed
        self._order_epoch = None
        self._order = None
        if self.opts.threads > 0:
            torch.set_num_threads(self.opts.threads)
        if not self.master.connect(reg.master_address):
            return False
        self.master.adopt_buffers()
        if self.master.rule == "dana-slim":
            self._slim = DanaSlimMomentum(self.master.size, self.opts.momentum,
                                          self.opts.weight_decay)
            log.info("DANA-Slim momentum on this trainer (momentum %g, weight decay %g)",
                     self.opts.momentum, self.opts.weight_decay)
        return True

    def _loop(self):
        while not self.stop.stopped:
            address = self.session.registration.master_address
            if address != self.master.address:
                if not self.master.connect(address):
                    return
            try:
                nxt = self.session.next_task()
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
        self.master.pulled_with_push = False
        self._task = task
        self._task_done = 0
        reached = {}  # incarnation -> newest version a push of this task reached
        last_loss = None
        self.session.set_progress(task.task_id, 0)
        batches = batch_prefetch.BatchPrefetch(self._order, task.begin, task.end,
                                               self.batch_size, self._builder)
        for first in range(task.begin, task.end, self.batch_size):
            if self.stop.stopped:
                return  # abandoned: Leave gives it back
            if self.session.generation != generation:
                log.warning("task %d abandoned: the coordinator took it back", task.task_id)
                self._task = None
                return
            last = min(task.end, first + self.batch_size)
            # take() starts building the next batch, during this one's
            # compute and push; only a pushed batch counts (_task_done), so
            # one built ahead is never handed back as trained.
            outcome, loss, reply = self._train_batch(batches.take(first), generation)
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
        if self._pushes_since_buffers:
            self._send_buffers()
        try:
            self.session.complete_task(task.task_id, reached)
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

    def _send_buffers(self):
        self._pushes_since_buffers = 0
        self.master.send_buffers(self.result.worker_id)

    def _master_failed(self):
        self._master_failing = True

    def _master_answered(self):
        if self._master_failing:  # a call succeeded after failed ones
            self._master_failing = False
            self.metrics.record_reconnect("master")

    def _train_batch(self, batch, generation):
        """Trains on `batch`: (indices, inputs, targets)."""
        backoff = rpc.Backoff(self.opts.host_name)
        recomputes = 0
        master = self.master
        indices, inputs, targets = batch
        inputs = to_device(inputs, master.mirror.device)
        targets = to_device(targets, master.mirror.device)
        while True:
            if not self._fits_in_grace(sum(self._avg.values())):
                return "stopped", None, None
            if self.session.generation != generation:
                return "lost", None, None
            if not master.pulled_with_push:
                start = time.monotonic()
                try:
                    master.pull()
                except Error as e:
                    if e.code != grpc.StatusCode.NOT_FOUND and e.code not in TRANSIENT:
                        raise
                    if e.code in TRANSIENT:
                        self._master_failed()
                    log.debug("master: Pull failed (%s); retrying", e)
                    if not self.stop.sleep(backoff.next()):
                        return "stopped", None, None
                    continue
                self._master_answered()
                self._average("pull", time.monotonic() - start)
            master.pulled_with_push = False
            if not self._fits_in_grace(self._avg["compute"] + self._avg["push"]):
                return "stopped", None, None

            start = time.monotonic()
            self.model.train()
            self._gradient.zero(self.model)
            loss_t = self.loss_fn(self.model(inputs), targets)
            loss_t.backward()
            loss = float(loss_t.detach())
            gradient = self._gradient.gradient()
            self._average("compute", time.monotonic() - start)
            if not math.isfinite(loss):
                log.warning("batch skipped: its loss is %s", loss)
                return "skipped", None, None
            if not self._fits_in_grace(self._avg["push"]):
                return "stopped", None, None
            if self._slim is not None:
                gradient = self._slim.update(gradient, master.flat)

            # The parameters this gradient was computed on; the push copies
            # them into its bytes before anything could change them.
            echo = master.flat if master.echo else None
            start = time.monotonic()
            try:
                reply, pulled = master.send(gradient, loss, echo,
                                            while_waiting=self._gradient.clear_early)
            except wire.LayoutMismatch as e:
                raise GaptrainError(str(e))
            except (grpc.RpcError, wire.MalformedReply) as e:
                err = rpc.error(e)
                master.known_version = -1  # pull a whole copy before computing again
                if err.code in TRANSIENT:
                    # Whether it was applied is unknown: recompute on fresh
                    # parameters rather than apply the same gradient twice.
                    self._master_failed()
                    log.debug("master: push failed (%s); pulling again", err)
                    if not self.stop.sleep(backoff.next()):
                        return "stopped", None, None
                    continue
                self.metrics.record_push_rejected(err.code.name.lower())
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
                if err.code == grpc.StatusCode.ALREADY_EXISTS:  # sync: the step has ours
                    log.warning("master: %s; batch skipped", err)
                    return "skipped", None, None
                if err.code == grpc.StatusCode.INVALID_ARGUMENT:
                    log.error("master refused the push: %s; batch skipped", err)
                    return "skipped", None, None
                raise GaptrainError("master refused the push: %s" % err)
            self._master_answered()
            self._average("push", time.monotonic() - start)
            self.session.set_master_version(reply.version)
            master.note_incarnation(reply.incarnation)
            if self._slim is not None:
                self._slim.accept()
            if pulled is not None and pulled.modified:
                master.accept(pulled)
                master.pulled_with_push = True
            if master.rule == "sync" and reply.outcome == pb.PushResponse.ACCUMULATED:
                self._wait_for_next_step(master.base_version)
            self.metrics.record_batch(len(indices), loss)
            self.result.batches += 1
            self.result.samples += len(indices)
            self.result.last_loss = loss
            self.result.losses.append(loss)
            self.result.master_version = max(self.result.master_version, reply.version)
            self._pushes_since_buffers += 1
            if self._pushes_since_buffers >= module_buffers.PUSHES_PER_SEND:
                self._send_buffers()
            return "trained", loss, reply

    def _wait_for_next_step(self, pushed_on):
        """Sync mode: the push waits for the step's other gradients, so pull
        until the step's update is out (gaptrain-worker's WaitForNextStep);
        the next batch then starts from it."""
        backoff = rpc.Backoff(self.opts.host_name, initial=0.001, cap=0.1)
        while not self.stop.stopped:
            try:
                self.master.pull()
                if self.master.base_version > pushed_on:
                    self.master.pulled_with_push = True  # current: no pull before the next batch
                    return
            except Error as e:
                log.debug("master: Pull while waiting for the step failed (%s)", e)
            if not self.stop.sleep(backoff.next()):
                return

    def _finish(self, status):
        if status is not None:
            log.error("trainer stopped: %s", status)
        reason, deadline = job_role.leave_terms(status, self.stop, self.opts.grace_seconds)
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
        self._builder.shutdown()
        if self.master is not None:
            self.master.close()


def train(model, dataset, loss_fn, batch_size=None, argv=None, environ=None, options=None,
          batch_process=True):
    """Trains `model` on `dataset` with `loss_fn(model(inputs), targets)` as a
    trainer of the gaptrain job named by gaptrain-worker's flags or, for
    those absent, the environment the operator and `gaptrain run` set
    ($GAPTRAIN_JOB, $GAPTRAIN_COORDINATOR, $GAPTRAIN_TOKEN_FILE or
    $GAPTRAIN_TOKEN, $GAPTRAIN_HTTP_PORT, $GAPTRAIN_HOST_NAME,
    $GAPTRAIN_GRACE_SECONDS, ...; options.py). `argv` defaults to
    sys.argv[1:] (unknown flags are left alone), `environ` to os.environ;
    `options`, from gaptrain.parse_options(), replaces both. `batch_size`
    defaults to the job's. Serves /healthz and /metrics on the HTTP port
    meanwhile. Like gaptrain-worker, sets glibc to keep freed memory for
    the process (heap_policy.py). The dataset is read one batch ahead, in a
    child process forked at the start (on Linux; as a DataLoader worker, so
    the dataset must not need this process's threads or a GPU), or on a
    thread with `batch_process=False` (batch_prefetch.py). Returns a TrainResult when the job
    ended or the trainer was preempted (SIGTERM); raises GaptrainError after
    leaving the job with FAILED on an error retrying cannot fix, and
    OptionsError for bad settings."""
    opts = options if options is not None else options_mod.parse(argv, environ)
    heap_policy.use_training_heap_policy()
    device = parameter_device(list(model.parameters()))
    metrics = WorkerMetrics(device=str(device) if device is not None else "several")
    # Forked before this process has a gRPC channel or a thread of its own.
    builder = batch_prefetch.start_builder(dataset, batch_process)
    try:
        http = HttpServer(metrics, opts.http_address, opts.http_port, opts.ports_file)
    except OSError as e:
        builder.shutdown()
        raise GaptrainError("--http-port %d (or $GAPTRAIN_HTTP_PORT): cannot serve /metrics on "
                            "%s: %s" % (opts.http_port, opts.http_address, e))
    log.info("worker %s (trainer) of job %s: metrics on http://%s:%d/metrics", opts.host_name,
             opts.job_name, opts.http_address, http.port)
    try:
        return _train(model, dataset, loss_fn, batch_size, opts, metrics, builder)
    finally:
        http.stop()
        builder.shutdown()


def _train(model, dataset, loss_fn, batch_size, opts, metrics, builder):
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
        return Trainer(model, dataset, loss_fn, opts, batch_size=batch_size, stop=stop,
                       metrics=metrics, builder=builder).run()
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
        for t in watchdog:
            t.cancel()
