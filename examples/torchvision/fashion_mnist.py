"""Fashion-MNIST from its IDX files (gzip'd or not: the layout of the
job's `spec.data.format: mnist-idx`) as torchvision's MNIST classes give
it: (PIL image, class) pairs, with `transform` applied to the image.
torchvision.datasets.FashionMNIST itself wants the files unpacked under
ROOT/FashionMNIST/raw/, which a read-only data volume cannot hold."""

import gzip
import os
import struct

import numpy as np
import torch
from PIL import Image

# The training split's pixel mean and standard deviation, in [0, 1] units.
MEAN, STD = 0.2860, 0.3530


def _read_idx(root, stem):
    for name in (stem + ".gz", stem):
        path = os.path.join(root, name)
        if os.path.exists(path):
            opener = gzip.open if name.endswith(".gz") else open
            with opener(path, "rb") as f:
                data = f.read()
            zero, dtype, ndim = struct.unpack(">HBB", data[:4])
            if zero != 0 or dtype != 0x08:
                raise ValueError("%s: not an IDX file of unsigned bytes" % path)
            shape = struct.unpack(">" + "I" * ndim, data[4:4 + 4 * ndim])
            return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(shape)
    raise FileNotFoundError("%s: no %s(.gz)" % (root, stem))


class FashionMNIST(torch.utils.data.Dataset):
    def __init__(self, root, train=True, transform=None):
        prefix = "train" if train else "t10k"
        self.images = _read_idx(root, prefix + "-images-idx3-ubyte")
        self.targets = torch.from_numpy(
            _read_idx(root, prefix + "-labels-idx1-ubyte").astype(np.int64))
        if len(self.images) != len(self.targets):
            raise ValueError("%s: %d images, %d labels" % (root, len(self.images),
                                                           len(self.targets)))
        self.transform = transform

    def __len__(self):
        return len(self.targets)

    def __getitem__(self, i):
        image = Image.fromarray(self.images[i], mode="L")
        if self.transform is not None:
            image = self.transform(image)
        return image, self.targets[i]
