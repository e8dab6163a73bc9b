"""The model: a small CNN for 28x28 grey images, written in plain PyTorch.
It is none of gaptrain's built-in models, so the job names its TorchScript
(export_model.py writes it; spec.model.torchscript), from which the master
learns the parameters' names and shapes. A model with BatchNorm works the
same: its running statistics travel as buffers (docs/master.md, "Buffers")."""

import torch
from torch import nn


class FashionCNN(nn.Module):
    """conv 3x3 (16) - pool - conv 3x3 (32) - pool - fc 64 - fc 10; 1x28x28 in, logits out."""

    def __init__(self, classes: int = 10):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.fc1 = nn.Linear(32 * 7 * 7, 64)
        self.fc2 = nn.Linear(64, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.max_pool2d(torch.relu(self.conv1(x)), 2)
        x = torch.max_pool2d(torch.relu(self.conv2(x)), 2)
        x = torch.relu(self.fc1(torch.flatten(x, 1)))
        return self.fc2(x)
