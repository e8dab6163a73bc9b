"""DANA-Slim's worker side (services/engine/rules/dana_slim_worker.h, as
gaptrain-worker does it): the trainer keeps its own momentum v and pushes
u = g' + γv' instead of the gradient, with g' = g + λx (weight decay on the
pulled parameters x) and v' = γv + g', so the master's dana-slim rule only
does x ← x − ηu. v' becomes v only when the master accepted the push: a
refused or lost push leaves the momentum as it was."""

import torch


class DanaSlimMomentum:
    def __init__(self, size, momentum, weight_decay):
        self.momentum = float(momentum)
        self.weight_decay = float(weight_decay)
        self.velocity = torch.zeros(size, dtype=torch.float32)
        self._next_velocity = torch.zeros(size, dtype=torch.float32)
        self._u = torch.zeros(size, dtype=torch.float32)

    def update(self, gradient, parameters):
        """u for `gradient` computed at `parameters` (flat float32 tensors on
        the CPU); the returned buffer is reused by the next call."""
        u, v_next = self._u, self._next_velocity
        torch.add(gradient, parameters, alpha=self.weight_decay, out=u)  # g'
        torch.mul(self.velocity, self.momentum, out=v_next)
        v_next.add_(u)  # v' = γv + g'
        u.add_(v_next, alpha=self.momentum)  # u = g' + γv'
        return u

    def accept(self):
        """The push of the last update() was applied: v ← v'."""
        self.velocity, self._next_velocity = self._next_velocity, self.velocity
