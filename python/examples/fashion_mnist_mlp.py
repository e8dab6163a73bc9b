#!/usr/bin/env python3
"""A user's own PyTorch code as a gaptrain trainer: an MLP written as a plain
nn.Module, Fashion-MNIST read from its IDX gzip files without torchvision,
cross-entropy. Nothing gaptrain-specific is inside the model or dataset.

Run it where gaptrain-worker would run, with the same flags:
  GAPTRAIN_TOKEN=... python3 fashion_mnist_mlp.py --job job.yaml \\
      --coordinator 127.0.0.1:7071 --data ../shared/data/fashion-mnist

With `--model mlp` (the default) the job's model is `builtin: mlp`
(784-256-128-10), whose flat layout this module has; with `--model cnn` it
is the TorchScript of SmallCNN (python/README.md, "Models")."""

import argparse
import gzip
import json
import logging
import struct
import sys

import torch
from torch import nn

import gaptrain


def read_idx(path):
    """An IDX file (gzip'd or not) as a uint8 tensor of its shape."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    zero, dtype, ndim = struct.unpack(">HBB", data[:4])
    if zero != 0 or dtype != 0x08:
        raise ValueError("%s: not an IDX file of unsigned bytes" % path)
    shape = struct.unpack(">" + "I" * ndim, data[4:4 + 4 * ndim])
    return torch.frombuffer(bytearray(data[4 + 4 * ndim:]), dtype=torch.uint8).reshape(shape)


class FashionMNIST(torch.utils.data.Dataset):
    """(image as 1x28x28 float in [0, 1], label) pairs."""

    def __init__(self, directory, split="train"):
        prefix = "train" if split == "train" else "t10k"
        self.images = read_idx("%s/%s-images-idx3-ubyte.gz" % (directory, prefix))
        self.labels = read_idx("%s/%s-labels-idx1-ubyte.gz" % (directory, prefix)).long()

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return self.images[i].unsqueeze(0).float() / 255.0, self.labels[i]


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(28 * 28, 256)
        self.fc2 = nn.Linear(256, 128)
        self.fc3 = nn.Linear(128, 10)

    def forward(self, x):
        x = torch.flatten(x, 1)
        x = torch.relu(self.fc1(x))
        x = torch.relu(self.fc2(x))
        return self.fc3(x)


class SmallCNN(nn.Module):
    """Not one of gaptrain's built-in models: a job trains it by naming its
    TorchScript file (spec.model.torchscript), which gives the master its
    layout: torch.jit.script(SmallCNN()).save("small_cnn.pt")."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 5)
        self.conv2 = nn.Conv2d(8, 16, 5)
        self.fc = nn.Linear(16 * 4 * 4, 10)

    def forward(self, x):
        x = torch.max_pool2d(torch.relu(self.conv1(x)), 2)
        x = torch.max_pool2d(torch.relu(self.conv2(x)), 2)
        return self.fc(torch.flatten(x, 1))


MODELS = {"mlp": MLP, "cnn": SmallCNN}


def main(argv):
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", required=True, help="the Fashion-MNIST directory")
    parser.add_argument("--model", choices=sorted(MODELS), default="mlp",
                        help="mlp (the job's model: builtin mlp) or cnn (the job's model: "
                             "this module's TorchScript)")
    parser.add_argument("--result", default="", help="write the TrainResult as JSON here")
    args, rest = parser.parse_known_args(argv)
    logging.basicConfig(level=logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    result = gaptrain.train(MODELS[args.model](), FashionMNIST(args.data), nn.CrossEntropyLoss(), argv=rest)
    if args.result:
        with open(args.result, "w") as f:
            json.dump({"worker_id": result.worker_id, "batches": result.batches,
                       "samples": result.samples, "skipped": result.skipped,
                       "tasks": result.tasks, "losses": result.losses,
                       "reason": result.reason, "master_version": result.master_version}, f)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
