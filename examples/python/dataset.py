"""The dataset: Fashion-MNIST read from its IDX gzip files (the layout of
`spec.data.format: mnist-idx`), a torchvision-style map-style Dataset in
plain PyTorch, with a random horizontal flip and a random 28x28 crop of the
image padded by 2 pixels, done with torch ops."""

import gzip
import os
import struct

import torch


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


def _find(root, stem):
    for name in (stem + ".gz", stem):
        path = os.path.join(root, name)
        if os.path.exists(path):
            return path
    raise FileNotFoundError("%s: no %s(.gz)" % (root, stem))


class RandomFlipAndCrop:
    """A random horizontal flip (p = 0.5), then a random crop of the image
    padded by `pad` zero pixels back to its size: a CxHxW float tensor in,
    one of the same shape out."""

    def __init__(self, pad=2, generator=None):
        self.pad = pad
        self.generator = generator

    def __call__(self, image):
        if torch.rand((), generator=self.generator) < 0.5:
            image = torch.flip(image, dims=[2])
        if self.pad:
            h, w = image.shape[1:]
            padded = torch.nn.functional.pad(image, (self.pad,) * 4)
            top, left = torch.randint(0, 2 * self.pad + 1, (2,), generator=self.generator).tolist()
            image = padded[:, top:top + h, left:left + w]
        return image


def pixel_stats(images):
    """The mean and population standard deviation of uint8 `images`, in
    [0, 1] units: what gaptrain's C++ loader normalises with."""
    x = images.to(torch.float64) / 255.0
    return x.mean().item(), x.std(unbiased=False).item()


class FashionMNIST(torch.utils.data.Dataset):
    """(1x28x28 float image, label) pairs of the train or test split,
    `transform` applied to each image. Images are normalised as gaptrain's
    C++ trainers and evaluator feed them, (x/255 - mean) / std with the
    train split's mean and population std: the job's evaluator is the C++
    worker, so a model trained on other inputs would be evaluated on inputs
    it never saw."""

    def __init__(self, root, train=True, transform=None):
        prefix = "train" if train else "t10k"
        self.images = read_idx(_find(root, prefix + "-images-idx3-ubyte"))
        self.labels = read_idx(_find(root, prefix + "-labels-idx1-ubyte")).long()
        if len(self.images) != len(self.labels):
            raise ValueError("%s: %d images, %d labels" % (root, len(self.images),
                                                           len(self.labels)))
        train_images = self.images if train else read_idx(_find(root, "train-images-idx3-ubyte"))
        self.mean, self.std = pixel_stats(train_images)
        if self.std == 0:
            self.std = 1.0
        self.transform = transform

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        image = (self.images[i].unsqueeze(0).float() / 255.0 - self.mean) / self.std
        if self.transform is not None:
            image = self.transform(image)
        return image, self.labels[i]
