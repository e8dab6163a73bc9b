"""gaptrain.Trainer: a trainer of a gaptrain job whose training loop is the
caller's, and train(), that loop written once for a model, a dataset and a
loss. The protocol and fault semantics are gaptrain-worker's
(docs/worker.md): tasks from the coordinator (coordinator_client.py),
parameters and gradients to and from the master, or every shard of θ's
masters at once (master_session.py, master_client.py), each
task's next batch collated while the current one trains
(batch_prefetch.py), the batch in flight finished only if it fits the grace
period after SIGTERM (preemption.py), /healthz and /metrics served meanwhile
(http_server.py, metrics.py).

The loop is the caller's, as with DDP or torchft: batches() yields the
batches of the trainer's tasks with θ pulled into the model and its
gradients zeroed; the caller computes a loss and its backward as it likes
(several inputs or outputs, auxiliary losses, autocast, clipping) and
step() pushes the gradient, which the master applies with the job's rule
and optimizer. A batch whose push's fate is unknown (the master went away)
comes again on fresh parameters, so no gradient is applied twice and every
batch of a task is trained once before the task counts as done.

A dataset whose store is away (a refused connection, a timeout: what
data_errors.py classifies) does not end the trainer: it hands its task back
to the coordinator (ReleaseTask), which queues it at the front, credits
nothing of it and shows why in the job's status; the trainer waits (0.5 s
doubling to 10 s) and asks for a task again, and the job goes on once the
store returns. Any other error of the dataset ends the trainer (FAILED)."""

import json
import logging
import math
import time

import grpc
import torch

from gaptrain import batch_prefetch
from gaptrain import data_errors
from gaptrain import heap_policy as heap_policy_mod
from gaptrain import job_role
from gaptrain import master_session
from gaptrain import options as options_mod
from gaptrain import rpc
from gaptrain.compute_threads import set_compute_threads
from gaptrain.coordinator_client import CoordinatorSession
from gaptrain.epoch_order import epoch_permutation
from gaptrain.flat_gradient import FlatGradient
from gaptrain.http_server import HttpServer
from gaptrain.master_session import MasterSession
from gaptrain.master_optimizer import MasterOptimizer
from gaptrain.metrics import WorkerMetrics
from gaptrain.parameter_mirror import parameter_device, to_device
from gaptrain.preemption import PreemptionSignals
from gaptrain.sharded_dataset import is_sharded
from gaptrain.rpc import Error, GaptrainError, Stop, LOST_MEMBERSHIP
from gaptrain._proto import gaptrain_pb2 as pb

log = logging.getLogger("gaptrain")

# What _take_batch() returns once a task's batches are all read.
_TASK_READ = "task read"

# What step() made of a batch.
_TRAINED, _SKIPPED, _AGAIN, _STOPPED = "trained", "skipped", "again", "stopped"
# A batch's outcome after the master session's answer to a failed push.
_AFTER_FAILURE = {master_session.AGAIN: _AGAIN, master_session.SKIP: _SKIPPED,
                  master_session.STOPPED: _STOPPED}


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
        self.data_errors = 0  # batches its store could not give: each task handed back

    def as_dict(self):
        """The result as JSON-ready values (last_loss aside: losses ends with it)."""
        return {"worker_id": self.worker_id, "batches": self.batches, "samples": self.samples,
                "skipped": self.skipped, "tasks": self.tasks, "losses": self.losses,
                "reason": self.reason, "master_version": self.master_version,
                "data_errors": self.data_errors}

    def save(self, path):
        """Writes as_dict() to `path` as JSON."""
        with open(path, "w") as f:
            json.dump(self.as_dict(), f)

    def __repr__(self):
        return ("TrainResult(worker %d: %d batches, %d samples, %d skipped, %d tasks, last loss "
                "%s, %s)" % (self.worker_id, self.batches, self.samples, self.skipped, self.tasks,
                             self.last_loss, self.reason))


class Trainer:
    """A trainer of the gaptrain job named by gaptrain-worker's flags or,
    for those absent, the environment the operator and `gaptrain run` set
    (options.py), whose loop is the caller's:

        with gaptrain.Trainer(model, train_set) as trainer:
            for inputs, targets in trainer.batches():
                loss = F.cross_entropy(model(inputs), targets)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                trainer.step(loss)
        print(trainer.result)

    What it does to the process while it runs, each of which the caller may
    decline: SIGTERM and SIGINT stop it (preemption.py; with
    handle_signals=False call preempt() from your own handler), glibc keeps
    freed memory for the process (heap_policy.py; heap_policy=False), and
    the dataset is collated in a child process forked at start()
    (batch_process=False: on a thread). Always: the model's CPU parameters
    become views of the buffer pulls write (their `.data`; the Parameter
    objects stay) and their `.grad` views of one gradient buffer
    (parameter_mirror.py, flat_gradient.py)."""

    def __init__(self, model, dataset, batch_size=None, *, options=None, argv=None,
                 environ=None, handle_signals=True, heap_policy=True, batch_process=True):
        """`dataset` is map-style, its samples collated as a DataLoader
        collates them; `batch_size` defaults to the job's. `argv` defaults
        to sys.argv[1:] (unknown flags are left alone), `environ` to
        os.environ; `options` (gaptrain.parse_options()) replaces both. Bad
        settings raise OptionsError. Nothing is started yet: start(), a
        `with` block or batches() start it."""
        self.opts = options if options is not None else options_mod.parse(argv, environ)
        self.model = model
        self.dataset = dataset
        self.batch_size_override = batch_size
        self.stop = Stop()
        device = parameter_device(list(model.parameters()))
        self.metrics = WorkerMetrics(device=str(device) if device is not None else "several")
        self.result = TrainResult()
        self.optimizer = MasterOptimizer(self)
        self.master = None  # a MasterSession once registered
        self._handle_signals = handle_signals
        self._heap_policy = heap_policy
        self._batch_process = batch_process
        self._params = [p for _, p in model.named_parameters()]
        self._started = False
        self._entered = False  # in a `with` block
        self._closed = False
        self._error = None  # what step() raised, for leaving with FAILED
        self._signals = None
        self._http = None
        self._builder = None
        self._prefetch = None  # the current task's BatchPrefetch
        self.session = None
        self._compute_seconds = 0.0  # moving average, for the grace decision
        self._task = None
        self._task_done = 0
        # The pause after a store that is away before asking for a task again.
        self._data_backoff = rpc.Backoff(self.opts.host_name, initial=0.5, cap=10.0)
        self._release_unsupported = False  # the coordinator predates ReleaseTask
        self._pending = None  # the yielded batch's (samples, start)
        self._outcome = None  # step()'s (what, loss, reply) for it

    # -- the process around the loop ---------------------------------------
    def __enter__(self):
        self.start()
        self._entered = True
        return self

    def __exit__(self, exc_type, exc, tb):
        self.close(exc)
        return False

    def start(self):
        """Forks the batch builder (before any gRPC channel exists), serves
        /healthz and /metrics, installs the signal handlers. Idempotent."""
        if self._started:
            return
        self._started = True
        if self._heap_policy:
            heap_policy_mod.use_training_heap_policy()
        self._builder = batch_prefetch.start_builder(self.dataset, self._batch_process)
        try:
            self._http = HttpServer(self.metrics, self.opts.http_address, self.opts.http_port,
                                    self.opts.ports_file)
        except OSError as e:
            self._builder.shutdown()
            self._closed = True
            raise GaptrainError("--http-port %d (or $GAPTRAIN_HTTP_PORT): cannot serve /metrics "
                                "on %s: %s" % (self.opts.http_port, self.opts.http_address, e))
        log.info("worker %s (trainer) of job %s: metrics on http://%s:%d/metrics",
                 self.opts.host_name, self.opts.job_name, self.opts.http_address,
                 self._http.port)
        if self._handle_signals:
            self._signals = PreemptionSignals(self.stop, self.opts.grace_seconds)
            self._signals.install()
        self.session = CoordinatorSession(self.opts, self.stop, self.metrics)

    def preempt(self):
        """What SIGTERM does: the batch in flight is finished if it fits the
        grace period, the task handed back, and batches() ends. Safe from a
        signal handler or another thread."""
        self.stop.stop(Stop.PREEMPTED)

    def close(self, error=None):
        """Leaves the job (FAILED with `error`, or with what step() raised;
        else PREEMPTED after preempt(), FINISHED otherwise), handing a task
        in hand back, and stops what start() started. Idempotent; batches()
        calls it when it ends."""
        if self._closed or not self._started:
            self._closed = True
            return
        self._closed = True
        status = error if error is not None else self._error
        try:
            self._leave(status)
        finally:
            if self._builder is not None:
                self._builder.shutdown()
            if self.master is not None:
                self.master.close()
            if self._http is not None:
                self._http.stop()
            if self._signals is not None:
                self._signals.restore()

    def _leave(self, status):
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

    # -- the caller's loop ---------------------------------------------------
    def batches(self):
        """The batches of this trainer's tasks until the job ends or the
        trainer is preempted, each as the dataset's samples collate, on the
        model's device, with the master's θ in the model, its gradients
        zeroed and the model in train mode. Call step() for each; a batch
        not stepped is skipped (its samples count as covered), and one whose
        push failed in a way that may have lost it comes again. Leaves the
        job when it ends (close()); an error retrying cannot fix leaves with
        FAILED and raises a GaptrainError."""
        if self._closed:
            raise GaptrainError("this Trainer is closed: make another")
        self.start()
        try:
            if self._setup():
                yield from self._loop()
        except GeneratorExit:
            # The caller's loop ended early (break, or an exception on its
            # way out): a `with` block's exit leaves, knowing which.
            if not self._entered:
                self.close()
            raise
        except Exception as e:
            self.close(e)
            if isinstance(e, Error) and not isinstance(e, GaptrainError):
                raise GaptrainError(str(e)) from e
            raise
        finally:
            self._pending = None
        self.close()

    def step(self, loss=None):
        """Pushes the gradient the caller's backward left in the model's
        `.grad` (clipped, unscaled, as the caller made it) for the batch
        batches() yielded last; the master applies it. `loss` (a tensor or
        a number) is reported (the loss gauge, the result, the coordinator's
        progress); a non-finite loss skips the batch. True when the push was
        accepted; False when the batch was skipped, or will come again."""
        if self._pending is None or self._outcome is not None:
            raise GaptrainError("step() without a batch from batches() to step: call it once "
                                "per batch, after backward()")
        try:
            self._outcome = self._push(loss)
        except Exception as e:
            self._error = e
            raise
        return self._outcome[0] == _TRAINED

    # -- the protocol ----------------------------------------------------
    def _fits_in_grace(self, seconds):
        if not self.stop.stopped:
            return True
        if self.stop.reason != Stop.PREEMPTED:
            return False
        reserve = min(2.0, self.opts.grace_seconds / 4)
        deadline = self.stop.time + self.opts.grace_seconds - reserve
        return time.monotonic() + 1.5 * seconds <= deadline

    def _setup(self):
        reg = job_role.register(self.session, self.stop)
        if reg is None:
            return False  # stopped while registering
        self.session.start_heartbeats()
        self.result.worker_id = reg.worker_id
        self._positions = self._check_dataset(reg)
        self.batch_size = self.batch_size_override or reg.batch_size
        if self.batch_size <= 0:
            raise GaptrainError("the coordinator sent batch size 0")
        self.master = MasterSession(self.opts, self.stop, self.session, self.metrics,
                                    self.model.named_parameters(), self.model.named_buffers())
        self._gradient = FlatGradient(self._params)
        self._shuffle_seed = reg.shuffle_seed
        self._order_epoch = None
        self._order = None
        if self.opts.threads > 0:
            set_compute_threads(self.opts.threads)
        if not self.master.connect(master_session.master_addresses(reg)):
            return False
        self.master.adopt_buffers()
        return True

    def _check_dataset(self, reg):
        """The positions the coordinator's tasks name: samples of a map-style
        dataset as long as the job's, or shards of a sharded one with as
        many shards."""
        if reg.train_shards:
            if not is_sharded(self.dataset):
                raise GaptrainError(
                    "the job's data is sharded (spec.data.format shards, %d shards): the "
                    "dataset must be a gaptrain.ShardedDataset (num_shards and shard(index)), "
                    "not a %s" % (reg.train_shards, type(self.dataset).__name__))
            if self.dataset.num_shards != reg.train_shards:
                raise GaptrainError(
                    "the coordinator cuts tasks over %d shards (spec.data.shards), this "
                    "trainer's dataset has %d" % (reg.train_shards, self.dataset.num_shards))
            return reg.train_shards
        if is_sharded(self.dataset) and not hasattr(self.dataset, "__len__"):
            raise GaptrainError(
                "this trainer's dataset is sharded (%d shards) but the job's data is not: set "
                "spec.data.format shards and spec.data.shards" % self.dataset.num_shards)
        n = len(self.dataset)
        if reg.train_samples != n:
            raise GaptrainError(
                "the coordinator cuts tasks over %d training samples, this trainer's dataset has "
                "%d" % (reg.train_samples, n))
        return n

    def _loop(self):
        while not self.stop.stopped:
            addresses = master_session.master_addresses(self.session.registration)
            if addresses != self.master.addresses:
                if not self.master.connect(addresses):
                    return
            try:
                nxt = self.session.next_task()
            except Error:
                if self.stop.stopped:
                    return
                raise
            if nxt.outcome == pb.NextTaskResponse.ASSIGNED:
                yield from self._task_batches(nxt.task)
            elif nxt.outcome in (pb.NextTaskResponse.WAIT_FOR_WORKERS,
                                 pb.NextTaskResponse.EPOCH_FINISHING):
                self.stop.sleep(max(nxt.retry_after_ms, 10) / 1000.0)
            elif nxt.outcome == pb.NextTaskResponse.JOB_FINISHED:
                log.info("no more tasks: %s", nxt.reason)
                self.stop.stop(Stop.JOB_ENDED)
            else:
                self.stop.sleep(1.0)

    def _task_batches(self, task):
        n = self._positions
        if task.task_id == 0 or task.begin >= task.end or task.end > n:
            raise GaptrainError(
                "coordinator: task %d covers positions [%d, %d) of epoch %d, not a range within "
                "this trainer's %d training %s" % (
                    task.task_id, task.begin, task.end, task.epoch, n,
                    "shards" if self.session.registration.train_shards else "samples"))
        if self._order_epoch != task.epoch:
            self._order = epoch_permutation(self._shuffle_seed, task.epoch, n)
            self._order_epoch = task.epoch
        generation = self.session.generation
        self.master.forget_pulled()
        self.master.begin_task()  # where its pushes land: master.reached()
        self._task = task
        self._task_done = 0
        last_loss = None
        self.session.set_progress(task.task_id, 0)
        if self.session.registration.train_shards:
            prefetch = batch_prefetch.ShardPrefetch(self._order, task.begin, task.end,
                                                    self.batch_size, self._builder)
            cursor = (0, 0)  # (shard within the task, its next sample)
        else:
            prefetch = batch_prefetch.BatchPrefetch(self._order, task.begin, task.end,
                                                    self.batch_size, self._builder)
            cursor = task.begin
        self._prefetch = prefetch
        while True:
            if self.stop.stopped:
                return  # abandoned: Leave gives it back
            if self.session.generation != generation:
                log.warning("task %d abandoned: the coordinator took it back", task.task_id)
                self._task = None
                return
            # take() starts building the next batch, during this one's
            # compute and push; only a pushed batch counts (_task_done), so
            # one built ahead is never handed back as trained.
            taken = self._take_batch(prefetch, cursor, task)
            if taken is None:
                # Handed back while the store was away (_hand_back), or
                # stopped then: Leave gives back what the trainer holds.
                return
            if taken is _TASK_READ:
                self._task_done = task.end - task.begin
                break
            samples, batch, cursor = taken
            # Positions of the task trained once this batch is: samples
            # up to it, or the shards it finished.
            done = (cursor[0] if isinstance(cursor, tuple) else cursor - task.begin)
            outcome, loss, _ = yield from self._train_batch(samples, batch, generation)
            if outcome == _STOPPED:
                continue
            if outcome == _SKIPPED:
                self.result.skipped += 1
            else:
                last_loss = loss
            self._task_done = done
            self.session.set_progress(task.task_id, self._task_done, last_loss)
        if self.stop.stopped and self._task_done < task.end - task.begin:
            return
        if self.master.buffers_behind:
            self.master.send_buffers()
        try:
            self.session.complete_task(task.task_id, self.master.reached())
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

    def _take_batch(self, prefetch, first, task):
        """prefetch.take(first) as (samples, batch, next position), or
        _TASK_READ past the task's end. None when the dataset says its store
        is away (data_errors.py): the task was handed back (_hand_back) and
        the trainer asks for a task again; None too when stopped. Any other
        error of the dataset is raised."""
        while True:
            try:
                taken = prefetch.take(first)
                self._data_backoff.reset()
                return _TASK_READ if taken is None else taken
            except Exception as e:  # noqa: BLE001 (classified below)
                if not data_errors.store_unavailable(e):
                    raise
                self.result.data_errors += 1
                self.metrics.record_data_error()
                if not self._hand_back(task, first, e):
                    return None

    def _hand_back(self, task, first, error):
        """The dataset's store is away (`error`, at position `first` of
        `task`): the task goes back to the coordinator untrained
        (ReleaseTask: the front of its queue, nothing of it credited, the
        job's status says why), and after a pause (0.5 s doubling to 10 s,
        from 0.5 s again once a batch is read) the trainer asks for a task
        again, typically getting the same one. False then, or when stopped
        meanwhile; True when the batch is to be read again holding the task
        (a coordinator that predates ReleaseTask)."""
        wait = self._data_backoff.next()
        why = "%s: %s" % (type(error).__name__, error)
        if not self._release_unsupported:
            try:
                self.session.release_task(task.task_id, why)
            except Error as e:
                if self.stop.stopped:
                    return False  # Leave gives back what the worker still holds
                if e.code == grpc.StatusCode.UNIMPLEMENTED:
                    self._release_unsupported = True
                    log.warning("the coordinator cannot take a task back (%s): this trainer "
                                "keeps its tasks while the data is away", e)
                elif e.code not in LOST_MEMBERSHIP:
                    raise
                else:
                    log.warning("coordinator: task %d was no longer this trainer's: %s",
                                task.task_id, e)
        if self._release_unsupported:
            log.warning("data unavailable (%s): task %d's batch at position %s is read again in "
                        "%.1f s; nothing of it is trained meanwhile", why, task.task_id, first,
                        wait)
            return self.stop.sleep(wait)
        log.warning("data unavailable (%s): task %d (epoch %d, positions [%d, %d)) handed back "
                    "to the coordinator at position %s, none of it credited (the %d positions trained "
                    "are trained again with it); asking for a task again in %.1f s", why,
                    task.task_id, task.epoch, task.begin, task.end, first, self._task_done, wait)
        self._task = None  # Leave has nothing to hand back
        self._task_done = 0
        self.session.set_progress(0, 0)
        self.stop.sleep(wait)
        return False

    def _while_the_master_applies(self):
        """Work for the moment the push's bytes are out and the master
        applies it: the gradient buffer cleared for the next backward, the
        next batch received from the builder."""
        self._gradient.clear_early()
        if self._prefetch is not None:
            self._prefetch.receive_ahead()

    def _train_batch(self, samples, batch, generation):
        """Yields `batch` on fresh parameters until step() trained or
        skipped it: (outcome, loss, reply)."""
        master = self.master
        batch = to_device(batch, master.device)
        master.new_batch()  # every shard gets this batch's gradient
        while True:
            if not self._fits_in_grace(master.pull_seconds + self._compute_seconds +
                                       master.push_seconds):
                return _STOPPED, None, None
            if self.session.generation != generation:
                return _STOPPED, None, None
            try:
                master.pull()
            except Error as e:
                then = master.after_pull_failure(e)
                if then == master_session.FAIL:
                    raise
                if then == master_session.STOPPED:
                    return _STOPPED, None, None
                continue
            if not self._fits_in_grace(self._compute_seconds + master.push_seconds):
                return _STOPPED, None, None
            self.model.train()
            self._gradient.zero(self.model)
            self._pending = (samples, time.monotonic())
            self._outcome = None
            yield batch
            outcome, self._pending, self._outcome = self._outcome, None, None
            if outcome is None:
                log.debug("batch skipped: the loop did not step() it")
                return _SKIPPED, None, None
            if outcome[0] != _AGAIN:
                return outcome

    def zero_grad(self):
        """The model's gradients zeroed, in one call on the gradient buffer
        (what batches() does before each batch)."""
        if self.master is not None:
            self._gradient.zero(self.model)
        else:
            self.model.zero_grad(set_to_none=False)

    def _push(self, loss_value):
        """step(): the gradient of the pending batch pushed; (outcome, loss,
        reply) with outcome _AGAIN when the batch must be computed again."""
        samples, started = self._pending
        master = self.master
        loss = float(loss_value.detach()) if isinstance(loss_value, torch.Tensor) else (
            math.nan if loss_value is None else float(loss_value))
        gradient = self._gradient.gradient()
        compute = time.monotonic() - started
        self._compute_seconds = compute if self._compute_seconds == 0 else (
            0.9 * self._compute_seconds + 0.1 * compute)
        self.metrics.record_compute(compute)
        if loss_value is not None and not math.isfinite(loss):
            log.warning("batch skipped: its loss is %s", loss)
            return _SKIPPED, None, None
        if not self._fits_in_grace(master.push_seconds):
            return _STOPPED, None, None
        try:
            reply = master.push(gradient, loss, while_waiting=self._while_the_master_applies)
        except Error as err:
            then = master.after_push_failure(err)
            if then == master_session.FAIL:
                raise GaptrainError("master refused the push: %s" % err)
            return _AFTER_FAILURE[then], None, None
        self.metrics.record_batch(samples, loss)
        self.result.batches += 1
        self.result.samples += samples
        if loss_value is not None:
            self.result.last_loss = loss
            self.result.losses.append(loss)
        self.result.master_version = max(self.result.master_version, reply.version)
        return _TRAINED, (loss if loss_value is not None else None), reply


def train(model, dataset, loss_fn, batch_size=None, argv=None, environ=None, options=None,
          batch_process=True, handle_signals=True, heap_policy=True):
    """Trains `model` on `dataset` with `loss_fn(model(inputs), targets)`:
    the loop of a Trainer (its arguments, settings and effects on the
    process) for datasets of (input, target) samples. Returns a TrainResult
    when the job ended or the trainer was preempted (SIGTERM); raises
    GaptrainError after leaving the job with FAILED on an error retrying
    cannot fix, and OptionsError for bad settings."""
    with Trainer(model, dataset, batch_size, options=options, argv=argv, environ=environ,
                 handle_signals=handle_signals, heap_policy=heap_policy,
                 batch_process=batch_process) as trainer:
        for batch in trainer.batches():
            inputs, targets = _pair(batch)
            loss = loss_fn(model(inputs), targets)
            loss.backward()
            trainer.step(loss)
    return trainer.result


def _pair(batch):
    if isinstance(batch, (tuple, list)) and len(batch) == 2:
        return batch
    raise GaptrainError("train() takes datasets of (input, target) samples; this one's batch is "
                        "%s: write the loop with gaptrain.Trainer" % type(batch).__name__)
