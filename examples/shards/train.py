#!/usr/bin/env python3
"""Tar shards streamed by a gaptrain job: the job's data is `format:
shards`, read by this script alone as an IterableDataset over shards
(tar_shards.py, gaptrain.ShardedDataset). The job says how many shards
there are (`shards`, which every trainer checks) and how many samples they
hold (`trainSamples`, the schedule's epoch); the coordinator gives each
trainer whole shards, each epoch's shard order shuffled, every shard trained
once. The first trainer declares the model (`fromTrainer`); the same script
is the job's evaluator (GAPTRAIN_ROLE=evaluator) on the test shard.
The shards are spec.data.path (make_shards.py writes them), or with
--store s3://BUCKET/PREFIX objects in an S3-compatible store.
  python3 examples/shards/train.py [--store s3://BUCKET/PREFIX] [--result-dir DIR]"""

import argparse
import os
import sys

import torch
from torch import nn
from torchvision import transforms

try:
    import gaptrain
except ImportError:  # run from a checkout without `pip install ./python`
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.realpath(__file__)), "..", "..",
                                    "python"))
    import gaptrain

from tar_shards import TarShards  # noqa: E402

MEAN, STD = 0.2860, 0.3530  # Fashion-MNIST's training pixels
TRANSFORM = transforms.Compose([transforms.ToTensor(), transforms.Normalize((MEAN,), (STD,))])


def mlp():
    """784-256-10, the images flattened."""
    return nn.Sequential(nn.Flatten(), nn.Linear(28 * 28, 256), nn.ReLU(), nn.Linear(256, 10))


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", default="",
                        help="read the shards from s3://BUCKET/PREFIX instead of the path")
    parser.add_argument("--result-dir", default="",
                        help="write the result as JSON to DIR/<host name>.json")
    args, rest = parser.parse_known_args(argv)
    options = gaptrain.parse_options(rest, role=gaptrain.role(rest))
    evaluator = options.role == "evaluator"
    try:
        dataset = TarShards(args.store or options.data_path, "test" if evaluator else "train",
                            TRANSFORM)
    except (OSError, ValueError) as e:
        raise gaptrain.OptionsError(e)
    torch.manual_seed(0)  # the first trainer's initial values become the job's
    model = mlp()
    if evaluator:
        result = gaptrain.evaluate(model, list(dataset), options=options)
    else:
        result = gaptrain.train(model, dataset, nn.CrossEntropyLoss(), options=options)
    print(result)
    if args.result_dir:
        result.save(os.path.join(args.result_dir, options.host_name + ".json"))


if __name__ == "__main__":
    gaptrain.run_main(main)
