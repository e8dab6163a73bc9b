#!/usr/bin/env python3
"""A user's own PyTorch model and dataset as a gaptrain trainer: FashionCNN
(model.py) on Fashion-MNIST (dataset.py) with a random flip and crop,
cross-entropy, `gaptrain.train`. No required arguments: the operator and
`gaptrain run` start it as it is and pass the settings in the environment
($GAPTRAIN_JOB, $GAPTRAIN_COORDINATOR, $GAPTRAIN_TOKEN_FILE or
$GAPTRAIN_TOKEN, $GAPTRAIN_HTTP_PORT, ...; gaptrain-worker's flags work as
well). The data is the job's spec.data.path (--data-dir overrides it).
  python3 examples/python/train.py [--result PATH]"""

import argparse
import os
import sys

from torch import nn

try:
    import gaptrain
except ImportError:  # run from a checkout without `pip install ./python`
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.realpath(__file__)), "..", "..",
                                    "python"))
    import gaptrain

from dataset import FashionMNIST, RandomFlipAndCrop  # noqa: E402
from model import FashionCNN  # noqa: E402


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--result", default="", help="write the TrainResult as JSON here")
    args, rest = parser.parse_known_args(argv)
    options = gaptrain.parse_options(rest)
    if not options.data_path:
        raise gaptrain.OptionsError("the job has no spec.data.path")
    dataset = FashionMNIST(options.data_path, train=True, transform=RandomFlipAndCrop(pad=2))
    result = gaptrain.train(FashionCNN(), dataset, nn.CrossEntropyLoss(), options=options)
    print(result)
    if args.result:
        result.save(args.result)


if __name__ == "__main__":
    gaptrain.run_main(main)
