"""The model's gradient as one flat float32 tensor, ready to push, without
concatenating the parameters' gradients every step: their `.grad` tensors
are made views of one buffer, backward accumulates straight into it, and
zero() clears it in place. A `.grad` that the user's code replaced is
noticed and the gradients are zeroed and concatenated one by one, as
before."""

import torch


class FlatGradient:
    def __init__(self, params):
        self._params = list(params)
        size = sum(p.numel() for p in self._params)
        self._flat = torch.zeros(size, dtype=torch.float32)
        self._views = []
        offset = 0
        for p in self._params:
            view = self._flat[offset:offset + p.numel()].view_as(p)
            offset += p.numel()
            if p.dtype == torch.float32 and p.device == view.device:
                if p.grad is not None:
                    view.copy_(p.grad)
                p.grad = view
            self._views.append(view)

    def _bound(self):
        return all(p.grad is not None and p.grad.data_ptr() == v.data_ptr()
                   for p, v in zip(self._params, self._views))

    def zero(self, model):
        """model.zero_grad(set_to_none=False), in one call on the buffer while
        every `.grad` is its view (one call per tensor cost 0.3 ms a step,
        each releasing and taking back the GIL)."""
        if self._bound():
            self._flat.zero_()
        else:
            model.zero_grad(set_to_none=False)

    def gradient(self):
        """The flat gradient: the buffer itself while every `.grad` is still
        its view (read it before the next backward), else a concatenation."""
        if self._bound():
            return self._flat
        grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in self._params]
        return torch.cat([g.detach().reshape(-1).to("cpu", torch.float32) for g in grads])
