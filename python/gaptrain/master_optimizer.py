"""MasterOptimizer: a Trainer's step() as a torch.optim.Optimizer, for
code written around one: torch.cuda.amp.GradScaler's
`scaler.step(trainer.optimizer)` unscales the gradients, skips the step
when they hold an inf or a NaN (the batch is then skipped), and otherwise
calls step(), which pushes them. The master applies the update with the
job's rule and spec.training.optimizer, so this optimizer keeps no state
and has no hyperparameters: a learning-rate scheduler attached to it
changes nothing (the job's spec.training.optimizer.decay does that)."""

import torch


class MasterOptimizer(torch.optim.Optimizer):
    def __init__(self, trainer):
        super().__init__(list(trainer.model.parameters()), {})
        self._trainer = trainer

    def step(self, closure=None, loss=None):
        """Pushes the gradients (Trainer.step(loss)); with a `closure`, the
        loss it returns (computed with gradients enabled) is the batch's.
        Returns the loss."""
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        self._trainer.step(loss)
        return loss

    def zero_grad(self, set_to_none=False):
        """Zeroes the gradients in place (batches() already did, before the
        batch); they stay views of the one buffer a push reads."""
        self._trainer.zero_grad()
