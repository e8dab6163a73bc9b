"""The trainer's view of the master without a server (master_client.py): the
model's CPU parameters alias the pulled buffer, keeping their values, so a
pull changes the model with no copy; the layout check; the module's
buffers packed, unpacked and checked (module_buffers.py)."""

import os
import sys
import types
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import grpc  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402

from gaptrain import rpc  # noqa: E402
from gaptrain import wire  # noqa: E402
from gaptrain._proto import gaptrain_pb2 as pb  # noqa: E402
from gaptrain.master_client import FlatModel, MasterClient  # noqa: E402
from gaptrain.module_buffers import ModuleBuffers  # noqa: E402


class _Session:
    def __init__(self):
        self.version = None

    def set_master_version(self, version):
        self.version = version


class MasterClientTest(unittest.TestCase):
    def test_cpu_parameters_alias_the_pulled_buffer(self):
        torch.manual_seed(2)
        model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
        before = torch.cat([p.detach().reshape(-1).clone() for p in model.parameters()])
        x = torch.randn(5, 3)
        out_before = model(x).detach()
        client = MasterClient(types.SimpleNamespace(token="t"), None, _Session(),
                              FlatModel(model.named_parameters()))
        # Same values, now stored in client.flat.
        self.assertTrue(torch.equal(client.flat, before))
        self.assertTrue(torch.equal(model(x).detach(), out_before))
        for p in model.parameters():
            self.assertGreaterEqual(p.data_ptr(), client.flat.data_ptr())
            self.assertLess(p.data_ptr(), client.flat.data_ptr() + 4 * client.flat.numel())
        # A pull writes the buffer; accepting it needs no copy into the model.
        client.flat.fill_(0.5)
        pulled = wire.Pulled()
        pulled.version, pulled.modified = 7, True
        client.accept(pulled)
        self.assertEqual(client.base_version, 7)
        for p in model.parameters():
            self.assertTrue(torch.all(p == 0.5))
        # Training still works through the aliased parameters.
        model(x).sum().backward()
        self.assertIsNotNone(model[0].weight.grad)


class ChannelRenewalTest(unittest.TestCase):
    """Calls failing on the network make the channel again after 0.5 s, at
    most every 0.5 s (a failed lookup of the master's name otherwise backs
    off for up to 2 minutes in gRPC); an answer ends the outage."""

    def test_renews_after_the_interval_at_most_once_per_interval(self):
        r = rpc.ChannelRenewal(interval=0.5)
        down = grpc.StatusCode.UNAVAILABLE
        self.assertFalse(r.renew(down, now=10.0))
        self.assertFalse(r.renew(grpc.StatusCode.DEADLINE_EXCEEDED, now=10.4))
        self.assertTrue(r.renew(down, now=10.5))
        self.assertFalse(r.renew(down, now=10.9))
        self.assertTrue(r.renew(down, now=11.0))
        self.assertFalse(r.renew(grpc.StatusCode.CANCELLED, now=20.0))  # the caller's own
        self.assertFalse(r.renew(None, now=20.0))  # answered: the outage is over
        self.assertFalse(r.renew(down, now=30.0))
        self.assertFalse(r.renew(grpc.StatusCode.FAILED_PRECONDITION, now=30.6))  # an answer
        self.assertFalse(r.renew(down, now=30.7))
        self.assertTrue(r.renew(down, now=31.2))

    def test_the_master_client_makes_its_channel_again(self):
        model = nn.Linear(2, 2)
        opts = types.SimpleNamespace(token="t", master_ca="")
        client = MasterClient(opts, None, _Session(), FlatModel(model.named_parameters()))
        client._open("127.0.0.1:1")
        first = client._channel
        client.note_outcome(grpc.StatusCode.UNAVAILABLE, now=100.0)
        self.assertIs(client._channel, first)
        client.note_outcome(grpc.StatusCode.UNAVAILABLE, now=100.6)
        self.assertIsNot(client._channel, first)
        self.assertEqual(client.address, "127.0.0.1:1")
        client.close()


class ModuleBuffersTest(unittest.TestCase):
    def _bn(self):
        torch.manual_seed(3)
        model = nn.Sequential(nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2))
        model.train()
        model(torch.randn(4, 1, 5, 5))  # statistics and the count move
        return model

    def test_packed_values_round_trip_into_another_module(self):
        model = self._bn()
        buffers = ModuleBuffers(model.named_buffers())
        self.assertEqual(buffers.layout, [("1.running_mean", (2,), pb.TENSOR_DTYPE_FLOAT32),
                                          ("1.running_var", (2,), pb.TENSOR_DTYPE_FLOAT32),
                                          ("1.num_batches_tracked", (), pb.TENSOR_DTYPE_INT64)])
        self.assertEqual(buffers.bytes, 8 + 8 + 8)
        data = buffers.pack()
        self.assertEqual(len(data), 24)
        other = nn.Sequential(nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2))
        ModuleBuffers(other.named_buffers()).unpack_into_module(data)
        for (name, a), (_, b) in zip(model.named_buffers(), other.named_buffers()):
            self.assertTrue(torch.equal(a, b), name)
        self.assertEqual(other[1].num_batches_tracked.item(), 1)
        with self.assertRaises(rpc.GaptrainError):
            ModuleBuffers(other.named_buffers()).unpack_into_module(data[:-1])

    def test_the_masters_buffers_must_be_the_modules(self):
        buffers = ModuleBuffers(self._bn().named_buffers())
        layout = pb.ModelLayout()
        for name, shape, dtype in buffers.layout:
            layout.buffers.add(name=name, shape=list(shape), dtype=dtype)
        buffers.check(layout)  # the same: no error
        layout.buffers[2].dtype = pb.TENSOR_DTYPE_FLOAT32
        with self.assertRaisesRegex(rpc.GaptrainError,
                                    r"buffer 2 is 1.num_batches_tracked \[\] float32 on the "
                                    r"master, 1.num_batches_tracked \[\] int64 here"):
            buffers.check(layout)
        del layout.buffers[2]
        with self.assertRaisesRegex(rpc.GaptrainError, "2 buffers on the master, 3 here"):
            buffers.check(layout)
        self.assertFalse(ModuleBuffers(nn.Linear(2, 2).named_buffers()))

    def test_buffers_of_other_dtypes_are_refused_by_name(self):
        module = nn.Module()
        module.register_buffer("scale", torch.zeros(2, dtype=torch.float16))
        with self.assertRaisesRegex(rpc.GaptrainError, "buffer scale is torch.float16"):
            ModuleBuffers(module.named_buffers())


if __name__ == "__main__":
    unittest.main()
