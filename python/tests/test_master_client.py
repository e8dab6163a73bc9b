"""The trainer's view of the master without a server (master_client.py): the
model's CPU parameters alias the pulled buffer, keeping their values, so a
pull changes the model with no copy; the layout check."""

import os
import sys
import types
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import torch  # noqa: E402
from torch import nn  # noqa: E402

from gaptrain import wire  # noqa: E402
from gaptrain.master_client import MasterClient  # noqa: E402


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
                              model.named_parameters())
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


if __name__ == "__main__":
    unittest.main()
