"""Push and pull chunks as serialized bytes with their model-sized fields kept
out of protobuf messages, as services/master/chunk_wire.h does in C++.

Through generated messages a 1 MB gradient was copied four times before gRPC
took it (tensor -> bytes, bytes -> message, message -> serialized string) and
a pulled chunk three times before it reached the parameters (parse, the
`values` attribute, decode). Here the small header fields still go through
protobuf, the bulk field is appended (sending) or located (receiving) by hand:
one copy each way. Field order on the wire is free in protobuf, so the master
parses these chunks as it parses any other."""

from gaptrain._proto import gaptrain_pb2 as pb

_LENGTH_DELIMITED = 2

# Field numbers of the bulk fields (proto/gaptrain.proto).
GRADIENT_VALUES = 6  # GradientChunk.values
GRADIENT_ECHO = 8  # GradientChunk.echo
PARAMETER_VALUES = 5  # ParameterChunk.values


class Malformed(ValueError):
    """Bytes that are not a protobuf message."""


def _varint(n):
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _read_varint(data, pos):
    result = shift = 0
    while True:
        if pos >= len(data) or shift > 63:
            raise Malformed("truncated varint at byte %d" % pos)
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7


def bytes_field(number, payload):
    """The tag and length of a bytes field whose payload (any buffer) follows."""
    return _varint((number << 3) | _LENGTH_DELIMITED) + _varint(len(payload))


def gradient_chunk(header, values, echo=None):
    """A serialized GradientChunk: `header` (a GradientChunk without values or
    echo) followed by the values and, when given, the echo (buffers such as
    memoryviews of the encoded tensors, copied once, here)."""
    parts = [header.SerializeToString(), bytes_field(GRADIENT_VALUES, values), values]
    if echo is not None:
        parts += [bytes_field(GRADIENT_ECHO, echo), echo]
    return b"".join(parts)


def split_field(data, number):
    """(the message without field `number`, a memoryview of that field's last
    payload or None): a message's bulk field located without copying it."""
    view = memoryview(data)
    pos, found = 0, None
    while pos < len(data):
        start = pos
        key, pos = _read_varint(data, pos)
        kind = key & 7
        if kind == 0:  # varint
            _, pos = _read_varint(data, pos)
        elif kind == 1:  # 64-bit
            pos += 8
        elif kind == 5:  # 32-bit
            pos += 4
        elif kind == _LENGTH_DELIMITED:
            length, pos = _read_varint(data, pos)
            if key >> 3 == number:
                found = (start, pos, pos + length)
            pos += length
        else:
            raise Malformed("wire type %d at byte %d" % (kind, start))
        if pos > len(data):
            raise Malformed("field at byte %d runs past the message" % start)
    if found is None:
        return data, None
    start, payload, end = found
    return bytes(view[:start]) + bytes(view[end:]), view[payload:end]


def parameter_chunk(data):
    """A serialized ParameterChunk as (the message without its values, a
    memoryview of the values: empty when none came)."""
    rest, values = split_field(data, PARAMETER_VALUES)
    try:
        header = pb.ParameterChunk.FromString(rest)
    except Exception as e:  # protobuf's DecodeError
        raise Malformed(str(e))
    return header, values if values is not None else memoryview(b"")
