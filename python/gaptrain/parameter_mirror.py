"""The model's parameters and the flat buffer a pull writes, kept equal with
as few copies as the model's device allows:

- on the CPU the parameters become views of the buffer, so a pull writes the
  model's own storage (as services/learn/model.cc aliases LibTorch's
  tensors) and nothing is copied;
- on one GPU they become views of one device buffer, refreshed from the
  host buffer by a single copy after each pull that brought new values (as
  model_device.cc mirrors θ to CUDA);
- spread over several devices, each parameter is copied from its slice.

The trainer never changes the parameters itself (the master applies the
update), so the buffer stays the parameters' only source of values."""

import torch


def parameter_device(params):
    """The device of every parameter, or None when they are on several."""
    devices = {p.device for p in params}
    return devices.pop() if len(devices) == 1 else None


class ParameterMirror:
    def __init__(self, params, host_flat):
        """`params` (a list of tensors) take `host_flat`'s values from now on;
        their current values are copied into it first."""
        self.host = host_flat
        self._params = list(params)
        self.device = parameter_device(self._params) or torch.device("cpu")
        self._device_flat = None
        self._copied = []  # (parameter, its slice of host): several devices
        same = parameter_device(self._params)
        if same is not None and same.type != "cpu":
            self._device_flat = torch.empty(host_flat.numel(), dtype=torch.float32, device=same)
        offset = 0
        with torch.no_grad():
            for p in self._params:
                host_view = host_flat[offset:offset + p.numel()].view_as(p)
                host_view.copy_(p)
                if p.device.type == "cpu":
                    p.data = host_view
                elif self._device_flat is not None:
                    p.data = self._device_flat[offset:offset + p.numel()].view_as(p)
                    p.data.copy_(host_view)
                else:
                    self._copied.append((p, host_view))
                offset += p.numel()

    def load(self):
        """After a pull that changed the host buffer: the parameters on a
        device take its values (nothing to do on the CPU)."""
        with torch.no_grad():
            if self._device_flat is not None:
                self._device_flat.copy_(self.host)
            for p, v in self._copied:
                p.copy_(v)


def to_device(batch, device):
    """`batch` (tensors in tuples, lists and dicts, as a Dataset returns
    them) with its tensors on `device`; anything else as it is."""
    if device.type == "cpu":
        return batch
    if isinstance(batch, torch.Tensor):
        return batch.to(device, non_blocking=batch.is_pinned())
    if isinstance(batch, (tuple, list)):
        return type(batch)(to_device(b, device) for b in batch)
    if isinstance(batch, dict):
        return {k: to_device(v, device) for k, v in batch.items()}
    return batch
