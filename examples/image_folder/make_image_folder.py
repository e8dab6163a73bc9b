#!/usr/bin/env python3
"""Fashion-MNIST as an image folder of PNG files, the layout torchvision's
ImageFolder reads (OUT/train/<class>/<n>.png, OUT/test/<class>/<n>.png),
written from the IDX files already on this machine (nothing is
downloaded). The first N images of each split, in order; the same files on
every run.
  python3 examples/image_folder/make_image_folder.py --out runs/fashion-mnist-png \\
      [--data ../shared/data/fashion-mnist] [--train-samples N] [--test-samples N]"""

import argparse
import gzip
import os
import struct
import sys

from PIL import Image

HERE = os.path.dirname(os.path.realpath(__file__))
# Fashion-MNIST's labels 0-9, as folder names (ImageFolder sorts them, so the
# class indices stay the labels).
CLASSES = ["0-tshirt", "1-trouser", "2-pullover", "3-dress", "4-coat", "5-sandal", "6-shirt",
           "7-sneaker", "8-bag", "9-ankle-boot"]
SPLITS = {"train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
          "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")}


def read_idx(directory, stem):
    """(shape, bytes) of an IDX file of unsigned bytes, gzip'd or not."""
    for name in (stem + ".gz", stem):
        path = os.path.join(directory, name)
        if os.path.exists(path):
            break
    else:
        raise FileNotFoundError("%s: no %s(.gz)" % (directory, stem))
    with (gzip.open if path.endswith(".gz") else open)(path, "rb") as f:
        data = f.read()
    zero, dtype, ndim = struct.unpack(">HBB", data[:4])
    if zero != 0 or dtype != 0x08:
        raise ValueError("%s: not an IDX file of unsigned bytes" % path)
    shape = struct.unpack(">" + "I" * ndim, data[4:4 + 4 * ndim])
    return shape, data[4 + 4 * ndim:]


def split_images(data, split, limit):
    """(index, PIL image, label) of the first `limit` images of `split`
    (0: all), as this script and examples/shards/make_shards.py write them.
    Both files are read and checked before the first is yielded."""
    images_stem, labels_stem = SPLITS[split]
    (count, rows, cols), pixels = read_idx(data, images_stem)
    (label_count,), labels = read_idx(data, labels_stem)
    if label_count != count:
        raise ValueError("%s: %d images, %d labels" % (split, count, label_count))
    size = rows * cols
    for i in range(count if limit == 0 else min(limit, count)):
        yield i, Image.frombytes("L", (cols, rows), pixels[i * size:(i + 1) * size]), labels[i]


def write_split(data, out, split, limit):
    """The first `limit` images of `split` (0: all) as PNG files; how many."""
    n = 0
    for i, image, label in split_images(data, split, limit):
        if n == 0:  # the data read: no empty folders left by a missing file
            for name in CLASSES:
                os.makedirs(os.path.join(out, split, name), exist_ok=True)
        image.save(os.path.join(out, split, CLASSES[label], "%05d.png" % i))
        n += 1
    return n


def parse_with_data_arguments(parser, argv):
    """argv parsed by `parser` with the source's arguments added (--data,
    --train-samples, --test-samples), as this script and
    examples/shards/make_shards.py take them; a bad one exits 2."""
    parser.add_argument("--data", default=os.path.join(HERE, "..", "..", "..", "shared", "data",
                                                       "fashion-mnist"),
                        help="the Fashion-MNIST IDX files [../shared/data/fashion-mnist]")
    parser.add_argument("--train-samples", type=int, default=0, help="the first N (0: all)")
    parser.add_argument("--test-samples", type=int, default=0, help="the first N (0: all)")
    args = parser.parse_args(argv)
    if args.train_samples < 0 or args.test_samples < 0:
        parser.error("--train-samples and --test-samples: must be >= 0")
    return args


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="the image folder to write")
    args = parse_with_data_arguments(parser, argv)
    for split, limit in (("train", args.train_samples), ("test", args.test_samples)):
        if os.path.isdir(os.path.join(args.out, split)) and os.listdir(os.path.join(args.out,
                                                                                   split)):
            parser.error("--out: %s already has a %s folder" % (args.out, split))
        n = write_split(args.data, args.out, split, limit)
        print("%s: %d PNG files in %s" % (split, n, os.path.join(args.out, split)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
