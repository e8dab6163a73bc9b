"""DANA-Slim's worker side (dana_slim.py) against the formula of
services/engine/rules/dana_slim_worker.h, element by element: u = g' + γv'
with g' = g + λx and v' = γv + g'; v' kept only when accepted."""

import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import torch  # noqa: E402

from gaptrain.dana_slim import DanaSlimMomentum  # noqa: E402


def reference(g, x, v, momentum, weight_decay):
    """The C++ loop's values, in float64 (the tolerance covers float32)."""
    u, v_next = [], []
    for gj, xj, vj in zip(g, x, v):
        gp = gj + weight_decay * xj
        vn = momentum * vj + gp
        v_next.append(vn)
        u.append(gp + momentum * vn)
    return u, v_next


class DanaSlimTest(unittest.TestCase):
    def test_matches_the_workers_formula_and_keeps_momentum_only_when_accepted(self):
        torch.manual_seed(4)
        slim = DanaSlimMomentum(6, momentum=0.9, weight_decay=1e-2)
        v = [0.0] * 6
        for step in range(4):
            g, x = torch.randn(6), torch.randn(6)
            u_want, v_next = reference(g.tolist(), x.tolist(), v, 0.9, 1e-2)
            u = slim.update(g, x)
            for a, b in zip(u.tolist(), u_want):
                self.assertAlmostEqual(a, b, places=5)
            if step != 2:
                slim.accept()
                v = v_next
            # Step 2's push was refused: its v' is dropped.
            for a, b in zip(slim.velocity.tolist(), v):
                self.assertAlmostEqual(a, b, places=5)

    def test_no_momentum_no_decay_is_the_gradient(self):
        slim = DanaSlimMomentum(3, momentum=0.0, weight_decay=0.0)
        g = torch.tensor([1.0, -2.0, 3.0])
        self.assertEqual(slim.update(g, torch.ones(3)).tolist(), [1.0, -2.0, 3.0])


if __name__ == "__main__":
    unittest.main()
