"""Writes a tiny TorchScript image classifier for model_test.

usage: make_scripted_model.py OUT.pt [NUM_CLASSES | noparams]

The net maps a [B, 1, 28, 28] float batch to [B, NUM_CLASSES] logits
(default 10): conv 1->4 (3x3, stride 2) + BatchNorm + ReLU, then a linear
layer. BatchNorm gives the module buffers. Weights come from a fixed seed,
so they are reproducible (the zip archive's timestamps are not).

"noparams" writes a module with the right output shape, [B, 10], but no
parameters at all, which Model::LoadTorchScript must reject.

Run by a genrule with Debian's python3-torch (/usr/bin/python3), so no
binary is checked in.
"""

import sys

import torch
from torch import nn


class TinyConvNet(nn.Module):
    def __init__(self, num_classes: int):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, kernel_size=3, stride=2)
        self.bn = nn.BatchNorm2d(4)
        self.fc = nn.Linear(4 * 13 * 13, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.bn(self.conv(x)))
        return self.fc(torch.flatten(x, 1))


class NoParams(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.flatten(x, 1)[:, :10]


def main() -> None:
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    out = sys.argv[1]
    kind = sys.argv[2] if len(sys.argv) == 3 else "10"
    torch.manual_seed(1234)
    module = NoParams() if kind == "noparams" else TinyConvNet(int(kind))
    scripted = torch.jit.script(module)
    torch.jit.save(scripted, out)


if __name__ == "__main__":
    main()
