"""The module's buffers (BatchNorm's running statistics, its batch count,
any registered buffer) as the master keeps them
(services/master/model_buffers.h): their names, shapes and dtypes checked
against the master's layout, their values packed as little-endian bytes
back to back in named_buffers() order (services/engine/buffer_layout.h).
A trainer sends its own every PUSHES_PER_SEND pushes and when a task ends;
at start it takes the master's once trainers have sent any, so the
evaluator and `gaptrain export` see the statistics the model trained with.
"""

import torch

from gaptrain import rpc
from gaptrain._proto import gaptrain_pb2 as pb

# services/worker/trainer.h's kPushesPerBufferSend.
PUSHES_PER_SEND = 16

DTYPES = {
    torch.float32: pb.TENSOR_DTYPE_FLOAT32,
    torch.float64: pb.TENSOR_DTYPE_FLOAT64,
    torch.int64: pb.TENSOR_DTYPE_INT64,
    torch.int32: pb.TENSOR_DTYPE_INT32,
    torch.uint8: pb.TENSOR_DTYPE_UINT8,
    torch.bool: pb.TENSOR_DTYPE_BOOL,
}
_NAMES = {v: str(k).replace("torch.", "") for k, v in DTYPES.items()}


def _describe(name, shape, dtype):
    return "%s %s %s" % (name, list(shape), _NAMES.get(dtype, "dtype %d" % dtype))


class ModuleBuffers:
    """The buffers of one module, in named_buffers() order."""

    def __init__(self, named_buffers):
        self._named = [(n, b) for n, b in named_buffers if b is not None]
        for name, b in self._named:
            if b.dtype not in DTYPES:
                raise rpc.GaptrainError(
                    "buffer %s is %s; buffers may be float32, float64, int64, int32, uint8 or "
                    "bool" % (name, b.dtype))
        self.layout = [(n, tuple(b.shape), DTYPES[b.dtype]) for n, b in self._named]
        self.bytes = sum(b.numel() * b.element_size() for _, b in self._named)

    def __bool__(self):
        return bool(self._named)

    def check(self, master_layout):
        """Raises GaptrainError unless the master's buffers (a ModelLayout's
        `buffers`) are these, in order, shape and dtype."""
        theirs = [(b.name, tuple(b.shape), b.dtype) for b in master_layout.buffers]
        for i, (t, o) in enumerate(zip(theirs, self.layout)):
            if t != o:
                raise rpc.GaptrainError(
                    "the master holds a model with other buffers: buffer %d is %s on the master, "
                    "%s here" % (i, _describe(*t), _describe(*o)))
        if len(theirs) != len(self.layout):
            raise rpc.GaptrainError(
                "the master holds a model with other buffers: %d buffers on the master, %d here"
                % (len(theirs), len(self.layout)))

    def pack(self):
        """The values, packed (self.bytes bytes)."""
        return b"".join(b.detach().to("cpu").contiguous().numpy().tobytes()
                        for _, b in self._named)

    def unpack_into_module(self, data):
        """Copies packed values into the module's buffers (on their devices)."""
        if len(data) != self.bytes:
            raise rpc.GaptrainError("the master's buffers are %d bytes, this model's %d" %
                                    (len(data), self.bytes))
        at = 0
        with torch.no_grad():
            for _, b in self._named:
                n = b.numel() * b.element_size()
                if n:
                    values = torch.frombuffer(bytearray(data[at:at + n]), dtype=b.dtype)
                    b.copy_(values.reshape(b.shape))
                at += n
