#!/usr/bin/env python3
"""Writes the TorchScript of model.py's FashionCNN, which the job names in
spec.model.torchscript so that the master knows the model's parameters:
  python3 examples/python/export_model.py [PATH]
PATH defaults to fashion_cnn.pt next to this script
(examples/python/fashion_cnn.pt, the path the example jobs name)."""

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from model import FashionCNN  # noqa: E402

DEFAULT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fashion_cnn.pt")


def main(argv):
    path = argv[0] if argv else DEFAULT
    torch.manual_seed(0)
    torch.jit.script(FashionCNN()).save(path)
    print("wrote %s" % path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
