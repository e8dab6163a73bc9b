"""The trainer's side of the master (services/worker/master_link.cc):
Describe and the layout check, Pull and PushPull (Push + Pull in sync mode
and for an older master) in the job's wire type (gaptrain/wire.py), the
parameters held in one flat buffer the model follows
(parameter_mirror.py), and a master restart noticed by its incarnation.

Speed (bench/python_trainer_bench.py): pushes go as serialized chunks
(wire.gradient_chunks) and replies are read from the raw bytes, one copy
of the values each way (chunk_bytes.py). A gradient of one
chunk, the usual case, is sent as a unary-stream call: on the wire a stream
of one request is the same, and the master's channel runs such calls on the
calling thread instead of starting threads per call
(rpc.MASTER_CHANNEL_OPTIONS)."""

import logging

import grpc
import torch

from gaptrain import rpc
from gaptrain import wire
from gaptrain.module_buffers import ModuleBuffers
from gaptrain.parameter_mirror import ParameterMirror, parameter_device
from gaptrain._proto import gaptrain_pb2 as pb
from gaptrain._proto import gaptrain_pb2_grpc as pb_grpc

log = logging.getLogger("gaptrain")

PUSH_PULL = "/gaptrain.proto.Master/PushPull"
PUSH = "/gaptrain.proto.Master/Push"
PULL = "/gaptrain.proto.Master/Pull"


def _layout_of(params):
    return [(name, tuple(p.shape)) for name, p in params]


def check_layout(master_layout, model_params):
    """Raises GaptrainError unless the master's tensors are the model's, in
    order and shape (names may differ: only a warning)."""
    theirs = [(t.name, tuple(t.shape)) for t in master_layout.tensors]
    ours = _layout_of(model_params)
    for i, ((tn, ts), (on, os_)) in enumerate(zip(theirs, ours)):
        if ts != os_:
            raise rpc.GaptrainError(
                "the master holds another model: its tensor %d (%s) has shape %s, this model's "
                "(%s) %s" % (i, tn, list(ts), on, list(os_)))
        if tn != on:
            log.warning("tensor %d is %s on the master and %s here (same shape %s)", i, tn, on,
                        list(ts))
    if len(theirs) != len(ours):
        raise rpc.GaptrainError("the master holds another model: %d tensors, this model has %d" %
                                (len(theirs), len(ours)))


class MasterClient:
    """One master at a time (`connect` again when the coordinator names
    another). `flat` holds the pulled parameters, and the model's
    parameters follow it (parameter_mirror.py: views of it on the CPU, one
    copy to a GPU after each pull that brought new values)."""

    def __init__(self, opts, stop, session, named_params, named_buffers=()):
        self.opts = opts
        self.stop = stop
        self.session = session  # the master version reported in heartbeats
        self._metadata = rpc.bearer(opts.token)
        self._named = list(named_params)
        self._params = [p for _, p in self._named]
        for p in self._params:
            if p.dtype != torch.float32:
                raise rpc.GaptrainError("the model's parameters must be float32 (%s)" % p.dtype)
        self.size = sum(p.numel() for p in self._params)
        device = parameter_device(self._params)
        # Pinned, a GPU's copy from it is one direct transfer.
        self.flat = torch.empty(self.size, dtype=torch.float32,
                                pin_memory=device is not None and device.type == "cuda")
        self.mirror = ParameterMirror(self._params, self.flat)
        self.buffers = ModuleBuffers(named_buffers)
        self._channel = None
        self._stub = None
        self._renewal = rpc.ChannelRenewal()
        self.address = ""
        self.known_version = -1  # -1: pull a whole copy
        self.base_version = 0
        self.incarnation = 0
        self.pulled_with_push = False  # the last push brought the next parameters
        self._push_pull = True
        self.rule = ""  # the master's update rule, from Describe ("sync", "dana-slim", ...)
        self.echo = False
        self.echo_type = pb.FLOAT32

    def connect(self, address, declare=True):
        """Describe the master at `address` and check it holds this model;
        False when stopped meanwhile. A master that waits for its model
        (spec.model.fromTrainer) gets this one declared when `declare` (a
        trainer), and is waited for otherwise (the evaluator)."""
        self._open(address)
        backoff = rpc.Backoff(self.opts.host_name)
        declared = False
        while True:
            try:
                d = self._stub.Describe(pb.DescribeRequest(), timeout=rpc.COORDINATOR_DEADLINE,
                                        metadata=self._metadata)
                if d.shard.count > 1:
                    raise rpc.GaptrainError(
                        "master %s holds shard %d of %d of θ (spec.master.shards): the Python "
                        "SDK talks to one master so far; run gaptrain-worker, or shards: 1"
                        % (address, d.shard.index, d.shard.count))
                if not d.awaiting_model:
                    break
                if declare and not declared:
                    adopted = self._declare()
                    declared = True
                    log.info("master %s: declared the model: %s", address,
                             "the job's model now" if adopted else "it holds this one already")
                    continue  # the master serves it a moment later
            except grpc.RpcError as e:
                err = rpc.error(e)
                if err.code not in rpc.TRANSIENT:
                    raise rpc.GaptrainError("master %s: %s: %s" % (
                        address, "DeclareModel" if declare and not declared else "Describe",
                        err))
                self.note_outcome(err.code)
            if not self.stop.sleep(backoff.next()):
                return False
        self.note_outcome(None)
        check_layout(d.layout, self._named)
        self.buffers.check(d.layout)
        self.rule = d.rule
        # This master may have PushPull, whatever an earlier one said. In
        # sync mode it holds the call until the step is out.
        self._push_pull = True
        self.echo = d.needs_echo
        self.echo_type = d.echo_type
        # Pulled over a bf16 wire, the copy holds bf16 values: send it as bf16.
        if self.echo and self.opts.wire_type == pb.BFLOAT16:
            self.echo_type = pb.BFLOAT16
        self.incarnation = d.incarnation.id
        self.known_version = -1
        self.pulled_with_push = False
        self.session.reset_master_version(d.version)
        log.info("master %s: job %s, rule %s, version %d, %d parameters", address, d.job_name,
                 d.rule, d.version, self.size)
        return True

    def _open(self, address):
        """A channel to the master at `address`, and the calls over it."""
        if self._channel is not None:
            self._channel.close()
        self._channel = rpc.channel(address, self.opts.master_ca, rpc.MASTER_CHANNEL_OPTIONS)
        self._stub = pb_grpc.MasterStub(self._channel)
        # Bytes in, bytes out: chunk_bytes.py serializes and parses.
        self._push_pull_one = self._channel.unary_stream(PUSH_PULL)
        self._push_pull_stream = self._channel.stream_stream(PUSH_PULL)
        self._pull = self._channel.unary_stream(
            PULL, request_serializer=pb.PullRequest.SerializeToString)
        self._push = self._channel.stream_unary(
            PUSH, response_deserializer=pb.PushResponse.FromString)
        self.address = address

    def note_outcome(self, code, now=None):
        """How the last call ended (a grpc.StatusCode, None for success):
        calls failing on the network for a while make the channel again
        (rpc.ChannelRenewal)."""
        if self._renewal.renew(code, now) and self.address:
            log.info("master %s: unreachable for %.1f s; making the channel again",
                     self.address, rpc.RENEW_SECONDS)
            self._open(self.address)

    def _declare(self):
        """This model as the job's (spec.model.fromTrainer): its layout,
        the parameters' current values (self.flat holds them) and the
        buffers', in chunks; True when the master adopted it."""
        layout = pb.ModelLayout()
        for name, p in self._named:
            layout.tensors.add(name=name, shape=list(p.shape))
        for name, shape, dtype in self.buffers.layout:
            layout.buffers.add(name=name, shape=list(shape), dtype=dtype)
        data = self.flat.numpy()
        chunk = wire.DEFAULT_CHUNK_VALUES

        def messages():
            for offset in range(0, max(self.size, 1), chunk):
                m = pb.ModelDeclaration(worker_id=self.session.worker_id, total_values=self.size,
                                        offset=offset,
                                        values=data[offset:offset + chunk].tobytes())
                if offset == 0:
                    m.layout.CopyFrom(layout)
                    m.buffer_values = self.buffers.pack()
                yield m

        reply = self._stub.DeclareModel(messages(), timeout=rpc.MASTER_DEADLINE,
                                        metadata=self._metadata)
        return reply.adopted

    def send_buffers(self, worker_id):
        """The module's buffers to the master (module_buffers.py); best
        effort: a failure is logged, the next send carries newer ones."""
        if not self.buffers:
            return
        try:
            self._stub.PushBuffers(pb.PushBuffersRequest(worker_id=worker_id,
                                                         values=self.buffers.pack()),
                                   timeout=rpc.COORDINATOR_DEADLINE, metadata=self._metadata)
        except grpc.RpcError as e:
            log.debug("master: buffers not sent: %s", rpc.error(e))

    def describe(self):
        """The master's DescribeResponse (raises grpc.RpcError)."""
        return self._stub.Describe(pb.DescribeRequest(), timeout=rpc.COORDINATOR_DEADLINE,
                                   metadata=self._metadata)

    def pull_buffers(self):
        """The master's buffers into the module (the evaluator, before each
        evaluation); raises grpc.RpcError."""
        if not self.buffers:
            return
        r = self._stub.PullBuffers(pb.PullBuffersRequest(), timeout=rpc.COORDINATOR_DEADLINE,
                                   metadata=self._metadata)
        self.buffers.unpack_into_module(r.values)

    def adopt_buffers(self):
        """The master's buffers into the module once trainers have sent
        any (a trainer that replaces another starts from the job's
        statistics); True when taken."""
        if not self.buffers:
            return False
        try:
            r = self._stub.PullBuffers(pb.PullBuffersRequest(), timeout=rpc.COORDINATOR_DEADLINE,
                                       metadata=self._metadata)
        except grpc.RpcError as e:
            log.debug("master: no buffers pulled: %s", rpc.error(e))
            return False
        if r.merges == 0:
            return False  # the model's initial statistics: the module's own
        self.buffers.unpack_into_module(r.values)
        log.info("master: took the job's module buffers (%d sends folded in)", r.merges)
        return True

    def note_incarnation(self, incarnation):
        if incarnation and self.incarnation and incarnation != self.incarnation:
            log.warning("master: a new run (%d); pulling a whole copy", incarnation)
            self.known_version = -1
            self.pulled_with_push = False
            self.session.reset_master_version(0)
        if incarnation:
            self.incarnation = incarnation

    def accept(self, pulled):
        self.session.set_master_version(pulled.version)
        self.note_incarnation(pulled.incarnation)
        if pulled.modified:
            self.mirror.load()
        self.known_version = pulled.version
        self.base_version = pulled.version

    def pull(self, observer=False):
        """The newest parameters into the model; raises Error or GaptrainError.
        An `observer` (the evaluator) reads θ itself and need not be a member."""
        request = pb.PullRequest(worker_id=self.session.worker_id,
                                 known_version=self.known_version,
                                 wire_type=self.opts.wire_type, observer=observer)
        try:
            stream = self._pull(request, timeout=rpc.MASTER_DEADLINE, metadata=self._metadata)
            pulled = wire.read_parameter_chunks(stream, self.flat)
        except wire.LayoutMismatch as e:
            raise rpc.GaptrainError(str(e))
        except (grpc.RpcError, wire.MalformedReply) as e:
            self.known_version = -1  # the buffer may hold part of a reply
            raise rpc.error(e)
        self.accept(pulled)

    def send(self, gradient, loss, echo, while_waiting=None):
        """Pushes; (PushResponse, the pulled parameters or None). Raises
        RpcError, MalformedReply or LayoutMismatch. `while_waiting` is
        called once the gradient's values are in the request's bytes and the
        call has started, before its reply is read: work that may overlap
        the master's update (the gradient itself may then change)."""
        chunks = wire.gradient_chunks(
            gradient, worker_id=self.session.worker_id, base_version=self.base_version,
            wire_type=self.opts.wire_type, loss=loss, echo=echo, echo_type=self.echo_type)
        if self._push_pull:
            try:
                if len(chunks) == 1:
                    stream = self._push_pull_one(chunks[0], timeout=rpc.MASTER_DEADLINE,
                                                 metadata=self._metadata)
                else:
                    stream = self._push_pull_stream(iter(chunks), timeout=rpc.MASTER_DEADLINE,
                                                    metadata=self._metadata)
                if while_waiting is not None:
                    while_waiting()
                try:
                    pulled = wire.read_parameter_chunks(stream, self.flat, expect_push=True)
                except wire.MalformedReply as e:
                    if e.push is None:
                        raise
                    # Applied, but the parameters did not all come: pull again.
                    self.known_version = -1
                    return e.push, None
                return pulled.push, pulled
            except grpc.RpcError as e:
                if e.code() != grpc.StatusCode.UNIMPLEMENTED:
                    raise
                log.info("master: no PushPull (an older master); pushing and pulling in two calls")
                self._push_pull = False
        if while_waiting is not None:
            while_waiting()
        reply = self._push(iter(chunks), timeout=rpc.MASTER_DEADLINE, metadata=self._metadata)
        return reply, None

    def close(self):
        if self._channel is not None:
            self._channel.close()
