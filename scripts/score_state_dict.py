#!/usr/bin/env python3
"""Scores a LeNet-5 state_dict on MNIST's test set in plain PyTorch.

  python3 scripts/score_state_dict.py MODEL.pt MNIST_DIR [--min-accuracy A]

MODEL.pt is what `gaptrain export` (or a cluster job's spec.output) writes:
torch.save of a state_dict. It is loaded with torch.load into a LeNet-5
defined here exactly as gaptrain's builtin `lenet5` (services/learn/model_zoo.cc:
the same modules, names, shapes and forward pass), with strict=True, so a
missing, extra or misshapen tensor is an error. MNIST_DIR holds the four IDX
files (plain, or gzip'd with .gz; the plain file wins). The test images are
normalised as gaptrain's workers normalise them (services/learn/dataset.h,
batch_loader.cc): (x/255 - mean) / std with the train split's exact pixel
mean and population std, each rounded to float32.

Prints one line, `test accuracy 0.9889 (9889/10000), loss 0.0351`, and exits
0; 1 when the accuracy is below --min-accuracy or the model does not load
(the reason on stderr); 2 for bad usage. Needs Python 3 with torch only
(Debian: python3-torch).
"""

import argparse
import gzip
import os
import struct
import sys

import torch
import torch.nn.functional as F
from torch import nn


class LeNet5(nn.Module):
    """LeCun et al. 1998 with ReLU and max pooling, as gaptrain builds it.

    conv1 pads a 28-pixel side by 2, so MNIST sees the paper's 32x32
    geometry and reaches fc1 with 16x5x5 features.
    """

    def __init__(self, channels=1, height=28, width=28, classes=10):
        super().__init__()

        def pad(size):
            return 2 if size == 28 else 0

        def feature_side(size):
            return ((size + 2 * pad(size) - 4) // 2 - 4) // 2

        self.conv1 = nn.Conv2d(channels, 6, 5, padding=(pad(height), pad(width)))
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc1 = nn.Linear(16 * feature_side(height) * feature_side(width), 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, classes)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = x.flatten(1)
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        return self.fc3(x)


def read_idx(directory, name, magic):
    """The body of IDX file `name` (plain, else .gz) and its dimensions."""
    path = os.path.join(directory, name)
    if os.path.exists(path):
        with open(path, "rb") as f:
            data = f.read()
    elif os.path.exists(path + ".gz"):
        with gzip.open(path + ".gz", "rb") as f:
            data = f.read()
    else:
        raise FileNotFoundError(f"{path}: no such file (nor {path}.gz)")
    if len(data) < 8 or struct.unpack(">I", data[:4])[0] != magic:
        raise ValueError(f"{path}: not an IDX file with magic {magic}")
    dims = struct.unpack(">" + "I" * (magic & 0xFF), data[4 : 4 + 4 * (magic & 0xFF)])
    body = data[4 + 4 * len(dims) :]
    count = 1
    for d in dims:
        count *= d
    if len(body) != count:
        raise ValueError(f"{path}: {len(body)} bytes of data, the header says {count}")
    return body, dims


def images(directory, split):
    body, (n, rows, cols) = read_idx(directory, f"{split}-images-idx3-ubyte", 2051)
    return torch.frombuffer(bytearray(body), dtype=torch.uint8).reshape(n, 1, rows, cols)


def labels(directory, split):
    body, (n,) = read_idx(directory, f"{split}-labels-idx1-ubyte", 2049)
    return torch.frombuffer(bytearray(body), dtype=torch.uint8).to(torch.int64)


def normaliser(train):
    """The 256-entry table gaptrain's loader maps a pixel value through."""
    counts = torch.bincount(train.reshape(-1), minlength=256).tolist()
    total = float(sum(counts))
    mean = sum(c * (v / 255.0) for v, c in enumerate(counts)) / total
    var = sum(c * (v / 255.0 - mean) ** 2 for v, c in enumerate(counts)) / total
    std = var**0.5
    # The dataset keeps both as float32; the table is computed in double.
    mean = float(torch.tensor(mean, dtype=torch.float32))
    std = float(torch.tensor(std, dtype=torch.float32)) if std > 0 else 1.0
    return torch.tensor([(v / 255.0 - mean) / std for v in range(256)], dtype=torch.float32)


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", help="the state_dict (.pt) gaptrain export wrote")
    parser.add_argument("data", help="the MNIST directory (IDX files)")
    parser.add_argument("--min-accuracy", type=float, default=0.0,
                        help="exit 1 below this test accuracy, in [0, 1]")
    parser.add_argument("--batch-size", type=int, default=1000)
    args = parser.parse_args(argv)

    torch.set_num_threads(max(1, min(4, os.cpu_count() or 1)))
    try:
        state_dict = torch.load(args.model, map_location="cpu")
        model = LeNet5()
        model.load_state_dict(state_dict, strict=True)
    except Exception as e:  # a missing file, not a state_dict, other tensors
        print(f"score_state_dict: {args.model}: cannot load as gaptrain's lenet5: {e}",
              file=sys.stderr)
        return 1
    model.eval()

    try:
        table = normaliser(images(args.data, "train"))
        test_images = images(args.data, "t10k")
        test_labels = labels(args.data, "t10k")
    except (OSError, ValueError) as e:
        print(f"score_state_dict: {e}", file=sys.stderr)
        return 1
    if test_images.shape[0] != test_labels.shape[0]:
        print(f"score_state_dict: {test_images.shape[0]} test images, "
              f"{test_labels.shape[0]} labels", file=sys.stderr)
        return 1

    correct, loss_sum, n = 0, 0.0, test_labels.shape[0]
    with torch.no_grad():
        for start in range(0, n, args.batch_size):
            x = table[test_images[start : start + args.batch_size].to(torch.int64)]
            y = test_labels[start : start + args.batch_size]
            logits = model(x)
            loss_sum += F.cross_entropy(logits, y, reduction="sum").item()
            correct += (logits.argmax(1) == y).sum().item()
    accuracy = correct / n
    print(f"test accuracy {accuracy:.4f} ({correct}/{n}), loss {loss_sum / n:.4f}")
    if accuracy < args.min_accuracy:
        print(f"score_state_dict: test accuracy {accuracy:.4f} is below {args.min_accuracy}",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
