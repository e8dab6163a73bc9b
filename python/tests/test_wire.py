"""The wire conversion against what the C++ side writes and reads."""

import os
import random
import struct
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import torch  # noqa: E402

from gaptrain import wire  # noqa: E402
from gaptrain._proto import gaptrain_pb2 as pb  # noqa: E402

# (float32 bits, FloatToBf16) printed by services/numeric/bfloat16.h's
# FloatToBf16 (a C++ program compiled against it): signed zeros, ties to
# even both ways, rounding that carries into the exponent, overflow to Inf,
# subnormals, infinities.
CPP_GOLDEN = [
    (0x00000000, 0x0000), (0x80000000, 0x8000), (0x3f800000, 0x3f80), (0xbf800000, 0xbf80),
    (0x40490fdb, 0x4049), (0xc02df854, 0xc02e), (0x3a83126f, 0x3a83), (0x477fe000, 0x4780),
    (0x7149f2ca, 0x714a), (0x8da24260, 0x8da2), (0x3f808000, 0x3f80), (0x3f818000, 0x3f82),
    (0x7f7fffff, 0x7f80), (0x000116c2, 0x0001), (0x80000001, 0x8000), (0x3dcccccd, 0x3dcd),
    (0x47f12065, 0x47f1), (0x7f800000, 0x7f80), (0xff800000, 0xff80),
]


def encode(values, wire_type):
    """A tensor's wire bytes."""
    return wire.encode_buffer(values, wire_type).tobytes()


def decode(data, wire_type):
    """Wire bytes as a float32 tensor."""
    out = torch.empty(len(data) // wire.value_size(wire_type), dtype=torch.float32)
    wire.decode_into(data, wire_type, out)
    return out


def gradient_chunks(gradient, **kwargs):
    """wire.gradient_chunks' bytes parsed back into messages."""
    return [pb.GradientChunk.FromString(c) for c in wire.gradient_chunks(gradient, **kwargs)]


def floats_of_bits(bits):
    return torch.tensor([b - (1 << 32) if b >= 1 << 31 else b for b in bits],
                        dtype=torch.int32).view(torch.float32)


def cpp_float_to_bf16(bits):
    """FloatToBf16's formula on uint32 bits, in Python integers."""
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFFFFFF
    return bits >> 16


class Bf16Test(unittest.TestCase):
    def test_matches_cpp_golden_values(self):
        floats = floats_of_bits([b for b, _ in CPP_GOLDEN])
        got = wire.floats_to_bf16(floats).view(torch.int16).tolist()
        self.assertEqual([g & 0xFFFF for g in got], [h for _, h in CPP_GOLDEN])
        data = encode(floats, pb.BFLOAT16)
        self.assertEqual(list(struct.unpack("<%dH" % len(CPP_GOLDEN), data)),
                         [h for _, h in CPP_GOLDEN])

    def test_matches_cpp_formula_on_random_finite_floats(self):
        rng = random.Random(7)
        bits = []
        while len(bits) < 20000:
            b = rng.getrandbits(32)
            if (b >> 23) & 0xFF != 0xFF:  # finite only, as FloatToBf16 asks
                bits.append(b)
        got = wire.floats_to_bf16(floats_of_bits(bits)).tolist()
        self.assertEqual([g & 0xFFFF for g in got], [cpp_float_to_bf16(b) for b in bits])

    def test_bf16_to_floats_is_the_top_half(self):
        halves = torch.tensor([0x3f80, 0xbf80 - 0x10000, 0x7f80, 0x0001, 0x4049],
                              dtype=torch.int16)
        self.assertEqual(wire.bf16_to_floats(halves).view(torch.int32).tolist(),
                         [0x3f800000, 0xbf800000 - (1 << 32), 0x7f800000, 0x00010000,
                          0x40490000])

    def test_round_trip_rounds_once(self):
        x = torch.randn(1000)
        once = decode(encode(x, pb.BFLOAT16), pb.BFLOAT16)
        twice = decode(encode(once, pb.BFLOAT16), pb.BFLOAT16)
        self.assertTrue(torch.equal(once, twice))
        self.assertLess(((once - x).abs() / x.abs().clamp(min=1e-30)).max().item(), 2 ** -8)


class Fp32Test(unittest.TestCase):
    def test_little_endian_float32(self):
        x = torch.tensor([1.0, -2.5, 3.14159265], dtype=torch.float32)
        self.assertEqual(encode(x, pb.FLOAT32), struct.pack("<3f", *x.tolist()))
        self.assertTrue(torch.equal(decode(encode(x, pb.FLOAT32), pb.FLOAT32), x))

    def test_decode_refuses_partial_values(self):
        with self.assertRaises(ValueError):
            decode(b"\x00\x00\x80", pb.FLOAT32)


class GradientChunksTest(unittest.TestCase):
    def check(self, wire_type, echo_type, n=1000, chunk_values=300):
        g = torch.randn(n)
        echo = torch.randn(n)
        chunks = gradient_chunks(g, worker_id=3, base_version=17, wire_type=wire_type, loss=0.5,
                                 echo=echo, echo_type=echo_type, chunk_values=chunk_values)
        self.assertEqual([c.offset for c in chunks], list(range(0, n, chunk_values)))
        for c in chunks:  # the header is equal in every chunk, as the master asks
            self.assertEqual((c.worker_id, c.base_version, c.total_values, c.wire_type,
                              c.echo_type, c.loss), (3, 17, n, wire_type, echo_type, 0.5))
        values = b"".join(c.values for c in chunks)
        echoes = b"".join(c.echo for c in chunks)
        self.assertEqual(values, encode(g, wire_type))
        self.assertEqual(echoes, encode(echo, echo_type))
        expected = g if wire_type == pb.FLOAT32 else wire.bf16_to_floats(wire.floats_to_bf16(g))
        self.assertTrue(torch.equal(decode(values, wire_type), expected))

    def test_fp32(self):
        self.check(pb.FLOAT32, pb.FLOAT32)

    def test_bf16_with_bf16_echo(self):
        self.check(pb.BFLOAT16, pb.BFLOAT16)

    def test_exact_multiple_and_one_chunk(self):
        self.check(pb.FLOAT32, pb.FLOAT32, n=600, chunk_values=300)
        self.check(pb.BFLOAT16, pb.FLOAT32, n=10, chunk_values=wire.DEFAULT_CHUNK_VALUES)

    def test_bf16_chunk_values(self):
        chunk = gradient_chunks(torch.ones(5), worker_id=1, base_version=2,
                                wire_type=pb.BFLOAT16)[0]
        self.assertEqual(chunk.values, struct.pack("<5H", *[0x3f80] * 5))
        self.assertFalse(chunk.echo)

    def test_serialized_chunks_are_the_messages(self):
        g, echo = torch.randn(1000), torch.randn(1000)
        for wire_type, echo_arg in ((pb.FLOAT32, None), (pb.BFLOAT16, echo), (pb.FLOAT32, echo)):
            raw = wire.gradient_chunks(g, worker_id=3, base_version=1 << 40, wire_type=wire_type,
                                       loss=0.25, echo=echo_arg, echo_type=pb.FLOAT32,
                                       chunk_values=300)
            values, echoes = encode(g, wire_type), encode(echo, pb.FLOAT32)
            size = wire.value_size(wire_type)
            self.assertEqual(len(raw), 4)
            for offset, r in zip(range(0, 1000, 300), raw):
                count = min(300, 1000 - offset)
                message = pb.GradientChunk(
                    worker_id=3, base_version=1 << 40, total_values=1000, offset=offset,
                    wire_type=wire_type, echo_type=pb.FLOAT32, loss=0.25,
                    values=values[offset * size:(offset + count) * size])
                if echo_arg is not None:
                    message.echo = echoes[offset * 4:(offset + count) * 4]
                self.assertEqual(pb.GradientChunk.FromString(r), message)


def parameter_chunks(x, wire_type, chunk_values, version=9, push=None):
    data = encode(x, wire_type)
    size = wire.value_size(wire_type)
    out = []
    for offset in range(0, x.numel(), chunk_values):
        count = min(chunk_values, x.numel() - offset)
        out.append(pb.ParameterChunk(version=version, total_values=x.numel(), offset=offset,
                                     wire_type=wire_type, incarnation=4,
                                     values=data[offset * size:(offset + count) * size]))
    if push is not None:
        out[0].push.CopyFrom(push)
    return out


def serialized(chunks):
    """Chunks as a raw call receives them."""
    return [c.SerializeToString() for c in chunks]


class ReadParameterChunksTest(unittest.TestCase):
    def test_fp32_and_bf16(self):
        x = torch.randn(1001)
        for wire_type in (pb.FLOAT32, pb.BFLOAT16):
            out = torch.zeros(1001)
            r = wire.read_parameter_chunks(serialized(parameter_chunks(x, wire_type, 250)), out)
            self.assertTrue(r.modified)
            self.assertEqual((r.version, r.incarnation), (9, 4))
            self.assertTrue(torch.equal(out, decode(encode(x, wire_type), wire_type)))

    def test_not_modified(self):
        out = torch.full((10,), 7.0)
        r = wire.read_parameter_chunks(
            serialized([pb.ParameterChunk(version=3, total_values=10, wire_type=pb.FLOAT32)]), out)
        self.assertFalse(r.modified)
        self.assertTrue(torch.equal(out, torch.full((10,), 7.0)))

    def test_push_pull_outcome(self):
        push = pb.PushResponse(outcome=pb.PushResponse.APPLIED, version=10, incarnation=4)
        out = torch.zeros(20)
        r = wire.read_parameter_chunks(
            serialized(parameter_chunks(torch.ones(20), pb.FLOAT32, 8, 10, push)), out,
            expect_push=True)
        self.assertEqual((r.push, r.version, r.modified), (push, 10, True))
        with self.assertRaises(wire.MalformedReply):
            wire.read_parameter_chunks(serialized(parameter_chunks(torch.ones(20), pb.FLOAT32, 8)),
                                       out, expect_push=True)

    def test_bytes_that_do_not_parse(self):
        with self.assertRaises(wire.MalformedReply):
            wire.read_parameter_chunks([b"\x2a\xff"], torch.zeros(5))  # values past the end

    def test_bad_streams(self):
        x = torch.randn(100)
        out = torch.zeros(100)
        with self.assertRaises(wire.LayoutMismatch):
            wire.read_parameter_chunks(serialized(parameter_chunks(x, pb.FLOAT32, 50)),
                                       torch.zeros(99))
        with self.assertRaises(wire.MalformedReply):
            wire.read_parameter_chunks([], out)
        with self.assertRaises(wire.MalformedReply):  # truncated
            wire.read_parameter_chunks(serialized(parameter_chunks(x, pb.FLOAT32, 50)[:1]), out)
        chunks = parameter_chunks(x, pb.FLOAT32, 50)
        chunks[1].offset = 40
        with self.assertRaises(wire.MalformedReply):  # out of order
            wire.read_parameter_chunks(serialized(chunks), out)

    def test_broken_stream_after_push_keeps_the_outcome(self):
        push = pb.PushResponse(outcome=pb.PushResponse.APPLIED, version=10)
        chunks = serialized(parameter_chunks(torch.ones(20), pb.FLOAT32, 8, 10, push))

        def stream():
            yield chunks[0]
            raise RuntimeError("connection reset")

        with self.assertRaises(wire.MalformedReply) as e:
            wire.read_parameter_chunks(stream(), torch.zeros(20), expect_push=True)
        self.assertEqual(e.exception.push.version, 10)


if __name__ == "__main__":
    unittest.main()
