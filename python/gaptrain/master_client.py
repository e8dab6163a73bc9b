"""The trainer's side of one master (services/worker/master_link.cc):
Describe and the layout check, Pull and PushPull (Push + Pull in sync mode
and for an older master) in the job's wire type (gaptrain/wire.py), and a
master restart noticed by its incarnation. FlatModel holds the model's
parameters in one flat buffer the model follows (parameter_mirror.py);
with spec.master.shards S > 1 each MasterClient is one shard's, over its
own channel, and pulls into and pushes from its range of that buffer (a
view: no copy); master_session.py calls them all at once.

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
from gaptrain.shard_plan import plan_shards
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


class FlatModel:
    """The model as the masters hold it: its float32 parameters in one flat
    buffer, `flat`, that they follow (parameter_mirror.py: views of it on
    the CPU, one copy to a GPU after each pull that brought new values:
    `mirror.load()`), and its module buffers (module_buffers.py)."""

    def __init__(self, named_params, named_buffers=()):
        self.named = list(named_params)
        params = [p for _, p in self.named]
        for p in params:
            if p.dtype != torch.float32:
                raise rpc.GaptrainError("the model's parameters must be float32 (%s)" % p.dtype)
        self.sizes = [p.numel() for p in params]
        self.size = sum(self.sizes)
        device = parameter_device(params)
        # Pinned, a GPU's copy from it is one direct transfer.
        self.flat = torch.empty(self.size, dtype=torch.float32,
                                pin_memory=device is not None and device.type == "cuda")
        self.mirror = ParameterMirror(params, self.flat)
        self.buffers = ModuleBuffers(named_buffers)

    def check(self, master_layout):
        """Raises GaptrainError unless the master's layout is this model's."""
        check_layout(master_layout, self.named)
        self.buffers.check(master_layout)

    def layout(self):
        """The model's ModelLayout, as DeclareModel sends it."""
        layout = pb.ModelLayout()
        for name, p in self.named:
            layout.tensors.add(name=name, shape=list(p.shape))
        for name, shape, dtype in self.buffers.layout:
            layout.buffers.add(name=name, shape=list(shape), dtype=dtype)
        return layout


class MasterClient:
    """One master at a time (`connect` again when the coordinator names
    another): the whole of θ, or one shard's range [begin, end) of it.
    `flat` is that range of the model's buffer (a view), which its pulls
    write and its pushes echo; `send` takes the whole gradient and sends
    the range's values."""

    def __init__(self, opts, stop, session, model):
        self.opts = opts
        self.stop = stop
        self.session = session  # the coordinator session: the worker id
        self.model = model  # FlatModel
        self._metadata = rpc.bearer(opts.token)
        self.size = model.size  # the whole model's values
        self.begin, self.end = 0, model.size
        self.flat = model.flat
        self.buffers = model.buffers
        self.shard = pb.ShardRange()  # what Describe said (count 0 or 1: all of θ)
        self._channel = None
        self._stub = None
        self._renewal = rpc.ChannelRenewal()
        self.address = ""
        self.described_version = 0  # Describe's version at connect
        self.known_version = -1  # -1: pull a whole copy
        self.base_version = 0
        self.incarnation = 0
        self.run_changed = False  # an answer came from a new run (the session clears it)
        self.pulled_with_push = False  # the last push brought the next parameters
        self._push_pull = True
        self.rule = ""  # the master's update rule, from Describe ("sync", "dana-slim", ...)
        self.echo = False
        self.echo_type = pb.FLOAT32
        # Within one push of a batch to several shards (master_session.py).
        self.has_batch = False  # applied (or accumulated) the batch in hand
        self.reply = None  # its PushResponse to the last push
        self.pulled = None  # that push's pulled parameters (wire.Pulled) or None

    @property
    def name(self):
        """'master ADDRESS', with the shard when θ is sharded (for messages)."""
        if self.shard.count > 1:
            return "master shard %d (%s)" % (self.shard.index, self.address)
        return "master %s" % self.address

    def connect(self, address, declare=True):
        """Describe the master at `address` and check it holds this model;
        False when stopped meanwhile. A master that waits for its model
        (spec.model.fromTrainer) gets this one declared when `declare` (a
        trainer): its shard's part of the values, and the buffers to the
        shard that holds them (0); it is waited for otherwise (the
        evaluator). Sets `shard`, `begin`, `end` and `flat` from Describe."""
        self._open(address)
        backoff = rpc.Backoff(self.opts.host_name)
        declared = False
        while True:
            try:
                d = self._stub.Describe(pb.DescribeRequest(), timeout=rpc.COORDINATOR_DEADLINE,
                                        metadata=self._metadata)
                if not d.awaiting_model:
                    break
                if declare and not declared:
                    adopted = self._declare(d.shard)
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
        self.model.check(d.layout)
        self.shard.CopyFrom(d.shard)
        if d.shard.count > 1:
            self.begin, self.end = d.shard.begin, d.shard.end
        else:
            self.begin, self.end = 0, self.size
        # The range's values, in place (a range past the model is refused
        # by the session's check of all shards).
        self.flat = self.model.flat[self.begin:self.end]
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
        self.run_changed = False
        self.described_version = d.version
        self.known_version = -1
        self.pulled_with_push = False
        self.has_batch = False
        if d.shard.count > 1:
            log.info("master %s: job %s, rule %s, version %d, shard %d of %d: parameters "
                     "[%d, %d) of %d", address, d.job_name, d.rule, d.version, d.shard.index,
                     d.shard.count, self.begin, self.end, self.size)
        else:
            log.info("master %s: job %s, rule %s, version %d, %d parameters", address,
                     d.job_name, d.rule, d.version, self.size)
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

    def _declare(self, shard):
        """This model as the job's (spec.model.fromTrainer), to a master
        that says it is shard `shard.index` of `shard.count` (count 0 or 1:
        all of θ): the whole layout, the range's current values (PlanShards'
        range, offsets from 0 within it) and, to shard 0, the buffers', in
        chunks; True when the master adopted it."""
        count = max(shard.count, 1)
        try:
            plan = plan_shards(self.model.sizes, count)
        except ValueError as e:
            raise rpc.GaptrainError("master %s holds shard %d of %d: %s" % (
                self.address, shard.index, count, e))
        if shard.index >= count:
            raise rpc.GaptrainError("master %s says it is shard %d of %d" % (
                self.address, shard.index, count))
        begin, end = plan[shard.index]
        layout = self.model.layout()
        data = self.model.flat.numpy()[begin:end]
        size = end - begin
        buffers = self.buffers.pack() if shard.index == 0 else b""
        chunk = wire.DEFAULT_CHUNK_VALUES

        def messages():
            for offset in range(0, max(size, 1), chunk):
                m = pb.ModelDeclaration(worker_id=self.session.worker_id, total_values=size,
                                        offset=offset,
                                        values=data[offset:offset + chunk].tobytes())
                if offset == 0:
                    m.layout.CopyFrom(layout)
                    m.buffer_values = buffers
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
        """An answer's run: another run than the last seen (a restart)
        sets `run_changed` and makes the next pull whole."""
        if incarnation and self.incarnation and incarnation != self.incarnation:
            log.warning("%s: a new run (%d); pulling a whole copy", self.name, incarnation)
            self.known_version = -1
            self.pulled_with_push = False
            self.run_changed = True
        if incarnation:
            self.incarnation = incarnation

    def accept(self, pulled):
        """A pull's answer (its values already in `flat`) booked: the
        version the next gradient is computed on."""
        self.note_incarnation(pulled.incarnation)
        self.known_version = pulled.version
        self.base_version = pulled.version

    def pull(self, observer=False):
        """The newest parameters of this master's range into `flat` and
        booked (accept); returns the wire.Pulled. Raises Error or
        GaptrainError. An `observer` (the evaluator) reads θ itself and
        need not be a member. Touches only this client and its range."""
        request = pb.PullRequest(worker_id=self.session.worker_id,
                                 known_version=self.known_version,
                                 wire_type=self.opts.wire_type, observer=observer)
        try:
            stream = self._pull(request, timeout=rpc.MASTER_DEADLINE, metadata=self._metadata)
            pulled = wire.read_parameter_chunks(stream, self.flat)
        except wire.LayoutMismatch as e:
            raise rpc.GaptrainError("%s: %s" % (self.name, e))
        except (grpc.RpcError, wire.MalformedReply) as e:
            self.known_version = -1  # the buffer may hold part of a reply
            raise rpc.error(e)
        self.accept(pulled)
        return pulled

    def push(self, gradient, loss, while_waiting=None):
        """Pushes this master's range of `gradient` (the whole model's flat
        gradient) as computed on `flat`, with the echo when the rule needs
        it; `reply` and `pulled` (a PushPull's parameters, in `flat`, not
        yet booked) hold the answer. Raises Error or GaptrainError; after
        a failure the next pull is whole. Touches only this client and its
        range."""
        self.pulled_with_push = False
        self.reply, self.pulled = None, None
        # The parameters this gradient was computed on; the push copies
        # them into its bytes before anything could change them.
        echo = self.flat if self.echo else None
        try:
            self.reply, self.pulled = self.send(gradient[self.begin:self.end], loss, echo,
                                                while_waiting=while_waiting)
        except wire.LayoutMismatch as e:
            raise rpc.GaptrainError("%s: %s" % (self.name, e))
        except (grpc.RpcError, wire.MalformedReply) as e:
            self.known_version = -1  # pull a whole copy before computing again
            raise rpc.error(e)
        return self.reply

    def send(self, gradient, loss, echo, while_waiting=None):
        """Pushes `gradient` (this master's values); (PushResponse, the
        pulled parameters or None). Raises
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
