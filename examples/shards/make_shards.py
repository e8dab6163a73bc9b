#!/usr/bin/env python3
"""Fashion-MNIST as tar shards of PNG files, the layout WebDataset reads:
OUT/train-000000.tar ... and OUT/test-000000.tar, each a tar of samples
KEY.png (the image) and KEY.cls (its label, as text), a sample's files
next to each other. Written from the IDX files already on this machine
(nothing is downloaded); the training images are dealt to the shards in one
fixed shuffled order, so every shard mixes the classes, and every run
writes the same bytes.
  python3 examples/shards/make_shards.py --out runs/fashion-mnist-shards \\
      [--shards 30] [--data ../shared/data/fashion-mnist] [--train-samples N] \\
      [--test-samples N]"""

import argparse
import io
import os
import random
import sys
import tarfile

HERE = os.path.dirname(os.path.realpath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "image_folder"))
from make_image_folder import parse_with_data_arguments, split_images  # noqa: E402


def images(data, split, limit):
    """(index, PNG bytes, label) of the first `limit` images (0: all)."""
    for i, image, label in split_images(data, split, limit):
        png = io.BytesIO()
        image.save(png, "PNG")
        yield i, png.getvalue(), label


def add(tar, name, data):
    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.mode = len(data), 0, 0o644
    tar.addfile(info, io.BytesIO(data))


def write_shards(samples, out, split, shards):
    """`samples` dealt to `shards` tar files in a fixed shuffled order;
    the samples in each."""
    samples = list(samples)
    random.Random(0).shuffle(samples)
    counts = []
    for s in range(shards):
        mine = samples[s::shards]
        with tarfile.open(os.path.join(out, "%s-%06d.tar" % (split, s)), "w",
                          format=tarfile.USTAR_FORMAT) as tar:
            for i, png, label in mine:
                add(tar, "%05d.png" % i, png)
                add(tar, "%05d.cls" % i, b"%d" % label)
        counts.append(len(mine))
    return counts


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="the directory to write the shards to")
    parser.add_argument("--shards", type=int, default=30, help="training shards [30]")
    args = parse_with_data_arguments(parser, argv)
    if args.shards < 1:
        parser.error("--shards: must be >= 1")
    os.makedirs(args.out, exist_ok=True)
    if any(n.endswith(".tar") for n in os.listdir(args.out)):
        parser.error("--out: %s already holds shards" % args.out)
    for split, limit, shards in (("train", args.train_samples, args.shards),
                                 ("test", args.test_samples, 1)):
        counts = write_shards(images(args.data, split, limit), args.out, split, shards)
        print("%s: %d samples in %d shards (%d to %d each) in %s"
              % (split, sum(counts), shards, min(counts), max(counts), args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
