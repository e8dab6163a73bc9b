"""Values on the wire: little-endian float32, or bfloat16 (the top half of a
float32, rounded to nearest, ties to even), exactly as services/numeric's
FloatToBf16 rounds, so a Python trainer's bytes equal a C++ worker's."""

import sys

import numpy
import torch

from gaptrain import chunk_bytes
from gaptrain._proto import gaptrain_pb2 as pb

# The C++ client's chunk size (services/master/master_client.h): 1 MiB of fp32.
DEFAULT_CHUNK_VALUES = 256 * 1024

if sys.byteorder != "little":  # pragma: no cover
    raise ImportError("gaptrain's wire is little-endian; this machine is not")


def value_size(wire_type):
    """Bytes per value: 4 for FLOAT32, 2 for BFLOAT16."""
    if wire_type == pb.FLOAT32:
        return 4
    if wire_type == pb.BFLOAT16:
        return 2
    raise ValueError("unknown wire type %r" % (wire_type,))


def floats_to_bf16(values):
    """float32 tensor -> int16 tensor of bf16 bit patterns (round to nearest,
    ties to even; finite inputs, as FloatToBf16)."""
    bits = values.detach().to(torch.float32).contiguous().view(torch.int32).to(torch.int64)
    bits = bits & 0xFFFFFFFF  # unsigned, as the C++ uint32_t
    bits = bits + 0x7FFF + ((bits >> 16) & 1)
    top = (bits >> 16) & 0xFFFF
    return torch.where(top >= 0x8000, top - 0x10000, top).to(torch.int16)


def bf16_to_floats(halves):
    """int16 tensor of bf16 bit patterns -> float32 tensor."""
    bits = halves.to(torch.int32) << 16  # the sign bit lands where it belongs
    return bits.view(torch.float32)


def encode_buffer(values, wire_type):
    """A 1-D float32 tensor's wire bytes as a buffer (a memoryview), without
    a copy when the tensor already holds them (contiguous float32)."""
    values = values.detach().to(torch.float32).contiguous()
    if wire_type == pb.BFLOAT16:
        values = floats_to_bf16(values)
    else:
        value_size(wire_type)  # refuses an unknown type
    return memoryview(values.numpy()).cast("B")


def decode_into(data, wire_type, out):
    """Wire bytes (any buffer) into the 1-D float32 tensor `out`, which has
    room for exactly their values: one copy, straight from the buffer."""
    size = value_size(wire_type)
    if len(data) % size != 0:
        raise ValueError("%d bytes is not a whole number of %d-byte values" % (len(data), size))
    if len(data) // size != out.numel():
        raise ValueError("%d values for a tensor of %d" % (len(data) // size, out.numel()))
    if not len(data):
        return
    # numpy reads a read-only buffer (the received bytes) without copying;
    # torch.frombuffer would warn that it is not writable.
    if wire_type == pb.BFLOAT16:
        halves = numpy.frombuffer(data, dtype="<u2")
        out.numpy()[:] = (halves.astype(numpy.uint32) << 16).view(numpy.float32)
    else:
        out.numpy()[:] = numpy.frombuffer(data, dtype="<f4")


def gradient_chunks(gradient, *, worker_id, base_version, wire_type, loss=0.0, echo=None,
                    echo_type=pb.FLOAT32, chunk_values=DEFAULT_CHUNK_VALUES):
    """Push's request stream: consecutive slices of a flat gradient (and of the
    echoed copy, when given), with the same header in every chunk, as
    serialized GradientChunks built with one copy of the values
    (chunk_bytes.py)."""
    n = gradient.numel()
    grad_bytes = encode_buffer(gradient, wire_type)
    echo_bytes = encode_buffer(echo, echo_type) if echo is not None else None
    gsize = value_size(wire_type)
    esize = value_size(echo_type)
    chunks = []
    for offset in range(0, n, chunk_values):
        count = min(chunk_values, n - offset)
        header = pb.GradientChunk(
            worker_id=worker_id, base_version=base_version, total_values=n, offset=offset,
            wire_type=wire_type, echo_type=echo_type, loss=loss)
        values = grad_bytes[offset * gsize:(offset + count) * gsize]
        echoed = (echo_bytes[offset * esize:(offset + count) * esize]
                  if echo_bytes is not None else None)
        chunks.append(chunk_bytes.gradient_chunk(header, values, echoed))
    return chunks


class MalformedReply(Exception):
    """A pull's stream that does not add up to the model (DATA_LOSS). `push`:
    a PushPull's outcome when its first chunk came (the push was applied)."""

    def __init__(self, message, push=None):
        super().__init__(message)
        self.push = push


class LayoutMismatch(Exception):
    """The master's model has another number of values than the trainer's."""


class Pulled:
    """What a pull's stream said: version, incarnation, whether values came,
    and the push outcome of a PushPull's first chunk."""

    def __init__(self):
        self.version = 0
        self.incarnation = 0
        self.modified = False
        self.push = None


def read_parameter_chunks(chunks, out, *, expect_push=False):
    """Reads a pull's chunks (serialized ParameterChunks, as a raw call
    receives them) into the float32 tensor `out` (all of it, or none when
    the version was current). Returns a Pulled. A stream that
    breaks (any exception while iterating) after a PushPull's first chunk
    raises MalformedReply carrying the push's outcome."""
    result = Pulled()
    try:
        _read(chunks, out, expect_push, result)
    except (MalformedReply, LayoutMismatch) as e:
        if isinstance(e, MalformedReply) and e.push is None:
            e.push = result.push
        raise
    except Exception as e:
        if result.push is None:
            raise
        raise MalformedReply("the pull after the push broke: %s" % e, push=result.push)
    return result


def _read(chunks, out, expect_push, result):
    n = out.numel()
    received = 0
    first = True
    for data in chunks:
        try:  # the values stay in the received bytes
            chunk, values = chunk_bytes.parameter_chunk(data)
        except chunk_bytes.Malformed as e:
            raise MalformedReply("pull: a chunk that does not parse: %s" % e)
        if first:
            if expect_push:
                if not chunk.HasField("push"):
                    raise MalformedReply("push-pull: the first chunk has no push outcome")
                result.push = chunk.push
            result.version = chunk.version
            result.incarnation = chunk.incarnation
            first = False
            if chunk.total_values != n:
                raise LayoutMismatch(
                    "the master's model has %d values, this trainer's %d" % (chunk.total_values, n))
        if not len(values):
            continue  # not modified
        if chunk.version != result.version or chunk.offset != received:
            raise MalformedReply("pull: malformed chunk at offset %d" % chunk.offset)
        size = value_size(chunk.wire_type)
        count = len(values) // size
        if len(values) % size != 0:
            raise MalformedReply("pull: chunk at offset %d is not whole values" % chunk.offset)
        if received + count > n:
            raise MalformedReply("pull: chunk at offset %d runs past the model" % chunk.offset)
        decode_into(values, chunk.wire_type, out[received:received + count])
        received += count
    if first:
        raise MalformedReply("pull: the master sent no chunk")
    if received not in (0, n):
        raise MalformedReply("pull: the stream ended after %d of %d values" % (received, n))
    result.modified = received == n and n > 0
