"""The model's gradient pushed without concatenating and zeroed in one call
(flat_gradient.py): equal to the concatenated .grad tensors, also after a
.grad is replaced."""

import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import torch  # noqa: E402
from torch import nn  # noqa: E402

from gaptrain.flat_gradient import FlatGradient  # noqa: E402


def concatenated(model):
    return torch.cat([p.grad.reshape(-1) for p in model.parameters()])


class FlatGradientTest(unittest.TestCase):
    def test_equals_the_concatenated_gradients(self):
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(5, 4), nn.ReLU(), nn.Linear(4, 3))
        reference = nn.Sequential(nn.Linear(5, 4), nn.ReLU(), nn.Linear(4, 3))
        flat = FlatGradient(model.parameters())
        for step in range(3):
            x = torch.randn(7, 5)
            reference.load_state_dict(model.state_dict())
            reference.zero_grad()
            reference(x).pow(2).sum().backward()
            flat.zero(model)
            model(x).pow(2).sum().backward()
            self.assertTrue(torch.equal(flat.gradient(), concatenated(reference)))
            with torch.no_grad():  # the parameters move, as after a pull
                for p in model.parameters():
                    p.add_(0.1)

    def test_a_replaced_grad_is_concatenated(self):
        model = nn.Linear(3, 2)
        flat = FlatGradient(model.parameters())
        model.weight.grad = torch.ones(2, 3)
        model.bias.grad = None  # as set_to_none=True would leave it
        self.assertEqual(flat.gradient().tolist(), [1.0] * 6 + [0.0, 0.0])
        model.bias.grad = torch.ones(2)
        flat.zero(model)  # zero_grad's way: the replaced tensors are zeroed
        self.assertEqual(model.weight.grad.tolist(), [[0.0] * 3] * 2)
        self.assertEqual(flat.gradient().tolist(), [0.0] * 8)

    def test_cleared_early_the_next_step_starts_from_zero(self):
        torch.manual_seed(1)
        model = nn.Linear(3, 2)
        flat = FlatGradient(model.parameters())
        x = torch.randn(4, 3)
        flat.zero(model)
        model(x).sum().backward()
        first = flat.gradient().clone()
        self.assertNotEqual(first.abs().sum().item(), 0.0)
        flat.clear_early()  # the push's bytes hold it; the master works
        self.assertEqual(flat.gradient().abs().sum().item(), 0.0)
        flat.zero(model)  # free: nothing written since
        model(x).sum().backward()
        self.assertTrue(torch.equal(flat.gradient(), first))  # not 2x: no stale sum
        flat.zero(model)  # a backward since the clear: zeroed again
        model(x).sum().backward()
        self.assertTrue(torch.equal(flat.gradient(), first))


if __name__ == "__main__":
    unittest.main()
