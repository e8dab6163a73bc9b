"""The trainer's side of the coordinator (services/worker/coordinator_session.cc):
registering, heartbeats with the task's progress every third of the lease,
every verb (NextTask, CompleteTask, ReleaseTask) retried on transient
failures and registering again when the coordinator lost this worker, and
Leave."""

import logging
import math
import threading
import time

import grpc

from gaptrain import rpc
from gaptrain._proto import gaptrain_pb2 as pb
from gaptrain._proto import gaptrain_pb2_grpc as pb_grpc

log = logging.getLogger("gaptrain")

# The most bytes of ReleaseTask's message the coordinator takes.
MAX_RELEASE_MESSAGE_BYTES = 1024


def release_message(text):
    """`text` as ReleaseTask takes it: one line (control characters become
    spaces), cut to MAX_RELEASE_MESSAGE_BYTES of UTF-8 on a character
    boundary."""
    line = "".join(" " if ord(c) < 0x20 or ord(c) == 0x7f else c for c in str(text))
    data = line.encode("utf-8", "replace")  # a lone surrogate becomes "?"
    return data[:MAX_RELEASE_MESSAGE_BYTES].decode("utf-8", "ignore")


class CoordinatorSession:
    """Registration, heartbeats with progress, every verb retried, leaving."""

    def __init__(self, opts, stop, metrics=None):
        self._opts = opts
        self._metrics = metrics
        self._reconnecting = False  # a call failed: the next success is a reconnect
        self._stop = stop
        self._channel = rpc.channel(opts.coordinator, opts.coordinator_ca)
        self._stub = pb_grpc.CoordinatorStub(self._channel)
        self._renewal = rpc.ChannelRenewal()  # under _mu
        self._metadata = rpc.bearer(opts.token)
        self._mu = threading.Lock()
        self.worker_id = 0
        self.registration = None
        self.generation = 0  # moves when the coordinator took this worker's task back
        self._progress = pb.HeartbeatRequest()
        self._failing = False
        self._hb_stop = threading.Event()
        self._hb_wake = threading.Event()  # stop_heartbeats or heartbeat_now
        self._hb_thread = None
        self._backoff = rpc.Backoff(opts.host_name)

    def _call(self, verb, request, timeout=rpc.COORDINATOR_DEADLINE):
        """The coordinator's `verb` (its RPC's name) on the current channel."""
        method = getattr(self._stub, verb)
        try:
            reply = method(request, timeout=timeout, metadata=self._metadata)
        except grpc.RpcError as e:
            if e.code() in rpc.TRANSIENT:
                self._reconnecting = True
            self._note_outcome(e.code())
            raise
        self._note_outcome(None)
        if self._reconnecting:
            self._reconnecting = False
            if self._metrics is not None:
                self._metrics.record_reconnect("coordinator")
        return reply

    def _note_outcome(self, code):
        """Calls failing on the network for a while make the channel again
        (rpc.ChannelRenewal: a coordinator whose Service name did not
        resolve yet is otherwise looked up again only on gRPC's own backoff,
        up to 2 minutes). A call in flight on the old channel fails and is
        retried."""
        with self._mu:
            if not self._renewal.renew(code):
                return
            old = self._channel
            self._channel = rpc.channel(self._opts.coordinator, self._opts.coordinator_ca)
            self._stub = pb_grpc.CoordinatorStub(self._channel)
        log.info("coordinator %s: unreachable for %.1f s; making the channel again",
                 self._opts.coordinator, rpc.RENEW_SECONDS)
        old.close()

    def _register_once(self, previous_id):
        role = (pb.WORKER_ROLE_EVALUATOR if getattr(self._opts, "role", "trainer") == "evaluator"
                else pb.WORKER_ROLE_TRAINER)
        reply = self._call("Register", pb.RegisterRequest(
            host=self._opts.host_name, role=role, previous_id=previous_id))
        with self._mu:
            if previous_id != 0 and not reply.resumed:
                self.generation += 1
            self.worker_id = reply.worker_id
            self.registration = reply
            self._failing = False
        return reply

    def register(self):
        backoff = rpc.Backoff(self._opts.host_name)
        while True:
            try:
                reply = self._register_once(self.worker_id)
                log.info("registered as worker %d of job %s (master %s)", reply.worker_id,
                         reply.job_name, reply.master_address)
                return reply
            except grpc.RpcError as e:
                err = rpc.error(e)
                if err.code not in rpc.TRANSIENT:
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

    def call(self, verb, make_request):
        """A verb retried on transient failures, registering again when the
        coordinator lost this worker."""
        backoff = rpc.Backoff(self._opts.host_name)
        reregistrations = 0
        while True:
            old_id = self.worker_id
            try:
                return self._call(verb, make_request(old_id))
            except grpc.RpcError as e:
                err = rpc.error(e)
            if err.code in rpc.TRANSIENT:
                self._note_failure(verb, err)
            elif err.code in rpc.LOST_MEMBERSHIP and reregistrations < 3:
                reregistrations += 1
                log.warning("coordinator: %s refused (%s); registering again", verb, err)
                try:
                    self._reregister(old_id)
                    continue
                except grpc.RpcError as e:
                    err = rpc.error(e)
                    if err.code not in rpc.TRANSIENT:
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
            if self._metrics is not None:
                self._metrics.set_master_version(self._progress.master_version)

    def reset_master_version(self, version):
        with self._mu:
            self._progress.master_version = version
            if self._metrics is not None:
                self._metrics.set_master_version(version)

    def start_heartbeats(self):
        self._hb_thread = threading.Thread(target=self._heartbeat_loop, name="gaptrain-heartbeat",
                                           daemon=True)
        self._hb_thread.start()

    def heartbeat_now(self):
        """Sends the next heartbeat now: the master said the job's length is
        reached, which the coordinator learns from the version a heartbeat
        reports (its answer then ends the job)."""
        self._hb_wake.set()

    def stop_heartbeats(self):
        self._hb_stop.set()
        self._hb_wake.set()
        if self._hb_thread is not None:
            self._hb_thread.join(timeout=1.0)  # a heartbeat in flight is not awaited longer

    def heartbeat_period(self):
        """Seconds between heartbeats: a third of the lease, 0.2-10 s."""
        lease = self.registration.lease_seconds if self.registration else 3
        return min(max(lease / 3.0, 0.2), 10.0)

    def _heartbeat_loop(self):
        backoff = rpc.Backoff(self._opts.host_name)
        wait = self.heartbeat_period()
        while True:
            self._hb_wake.wait(wait)
            self._hb_wake.clear()
            if self._hb_stop.is_set():
                return
            with self._mu:
                request = pb.HeartbeatRequest()
                request.CopyFrom(self._progress)
                request.worker_id = self.worker_id
                resync = self._failing
            if request.worker_id == 0:
                wait = self.heartbeat_period()
                continue
            try:
                reply = self._call("Heartbeat", request, timeout=max(self.heartbeat_period(), 1))
            except grpc.RpcError as e:
                err = rpc.error(e)
                if self._hb_stop.is_set():
                    return
                if err.code in rpc.TRANSIENT:
                    self._note_failure("Heartbeat", err)
                    wait = min(self.heartbeat_period(), backoff.next())
                elif err.code in rpc.LOST_MEMBERSHIP:
                    log.warning("coordinator: heartbeat refused (%s); registering again", err)
                    try:
                        self._reregister(request.worker_id)
                        wait = self.heartbeat_period()
                    except grpc.RpcError:
                        wait = min(self.heartbeat_period(), backoff.next())
                else:
                    log.error("coordinator: heartbeat refused: %s", err)
                    wait = self.heartbeat_period()
                continue
            backoff.reset()
            if resync:  # after an outage: register again with the same id
                try:
                    self._reregister(request.worker_id)
                except grpc.RpcError as e:
                    log.warning("coordinator: registering again failed: %s", rpc.error(e))
            if reply.phase in (pb.JOB_PHASE_SUCCEEDED, pb.JOB_PHASE_FAILED):
                log.info("coordinator: the job has %s", "succeeded"
                         if reply.phase == pb.JOB_PHASE_SUCCEEDED else "failed")
                self._stop.stop(rpc.Stop.JOB_ENDED)
            wait = self.heartbeat_period()

    def leave(self, reason, message, deadline):
        """Leave by the monotonic `deadline`; True when the coordinator answered."""
        self.stop_heartbeats()
        if self.worker_id == 0:
            return True
        backoff = rpc.Backoff(self._opts.host_name)
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            try:
                reply = self._call("Leave", pb.LeaveRequest(
                    worker_id=self.worker_id, reason=reason, message=message), timeout=left)
                log.info("left the job (%s)%s", pb.LeaveReason.Name(reason),
                         ", already gone" if reply.already_gone else "")
                return True
            except grpc.RpcError as e:
                err = rpc.error(e)
                if err.code in rpc.LOST_MEMBERSHIP:
                    return True  # gone already
                if err.code not in rpc.TRANSIENT:
                    log.warning("could not leave the job: %s", err)
                    return False
            time.sleep(min(backoff.next(), max(0.0, deadline - time.monotonic())))

    def close(self):
        self._channel.close()

    def next_task(self):
        return self.call("NextTask", lambda wid: pb.NextTaskRequest(worker_id=wid))

    def report_evaluation(self, accuracy, loss, version, metrics=()):
        """The evaluator's result, with `metrics` (name, value) beside accuracy
        and loss; the job's phase after it."""
        return self.call("ReportEvaluation", lambda wid: pb.ReportEvaluationRequest(
            worker_id=wid, accuracy=accuracy, loss=loss, version=version,
            metrics=[pb.EvalMetric(name=n, value=v) for n, v in metrics])).phase

    def release_task(self, task_id, message):
        """Hands task `task_id` back untrained because the dataset's store
        cannot be reached (`message`: what the dataset raised, made one line
        of at most 1024 bytes); the coordinator queues it at the front and
        this worker stays in the job. The reply says already_released for a
        retry the coordinator had answered before."""
        text = release_message(message)
        return self.call("ReleaseTask", lambda wid: pb.ReleaseTaskRequest(
            worker_id=wid, task_id=task_id, reason=pb.RELEASE_REASON_DATA_UNAVAILABLE,
            message=text))

    def complete_task(self, task_id, reached):
        """`reached`: {(master shard, incarnation): newest version a push of
        the task reached there} (MasterSession.reached())."""
        return self.call("CompleteTask", lambda wid: pb.CompleteTaskRequest(
            worker_id=wid, task_id=task_id,
            reached=[pb.MasterPosition(shard=s, incarnation=i, version=v)
                     for (s, i), v in sorted(reached.items())]))
