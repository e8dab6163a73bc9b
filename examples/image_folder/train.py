#!/usr/bin/env python3
"""A folder of PNG images (torchvision's ImageFolder: one folder per class)
trained by a gaptrain job: the job's data is `format: custom`, read by this
script alone; the job says only how many training images there are
(`trainSamples`, which every trainer checks against len(dataset)), and the
first trainer declares the model (`fromTrainer`). The same script is the
job's evaluator (GAPTRAIN_ROLE=evaluator) on the folder's test split.
The data is spec.data.path: PATH/train and PATH/test, as make_image_folder.py
writes them; or, with --store s3://BUCKET/PREFIX, the same folders as objects
in an S3-compatible store (s3_image_folder.py: the endpoint in
$AWS_ENDPOINT_URL, boto3's credentials).
  python3 examples/image_folder/train.py [--store s3://BUCKET/PREFIX] [--result-dir DIR]"""

import argparse
import os
import sys

import torch
from torch import nn
from torchvision import datasets, transforms

try:
    import gaptrain
except ImportError:  # run from a checkout without `pip install ./python`
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.realpath(__file__)), "..", "..",
                                    "python"))
    import gaptrain

MEAN, STD = 0.2860, 0.3530  # Fashion-MNIST's training pixels
TRAIN_TRANSFORM = transforms.Compose([
    transforms.Grayscale(1),
    transforms.RandomHorizontalFlip(),
    transforms.ToTensor(),
    transforms.Normalize((MEAN,), (STD,)),
])
TEST_TRANSFORM = transforms.Compose([
    transforms.Grayscale(1), transforms.ToTensor(), transforms.Normalize((MEAN,), (STD,))])


class SmallCNN(nn.Module):
    """Two convolutions with BatchNorm and a linear classifier, 28x28 in."""

    def __init__(self, classes=10):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2))
        self.classifier = nn.Linear(32 * 7 * 7, classes)

    def forward(self, x):
        return self.classifier(torch.flatten(self.features(x), 1))


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", default="",
                        help="read the folders from s3://BUCKET/PREFIX instead of the path")
    parser.add_argument("--result-dir", default="",
                        help="write the result as JSON to DIR/<host name>.json")
    args, rest = parser.parse_known_args(argv)
    options = gaptrain.parse_options(rest, role=gaptrain.role(rest))
    evaluator = options.role == "evaluator"
    split = "test" if evaluator else "train"
    transform = TEST_TRANSFORM if evaluator else TRAIN_TRANSFORM
    if args.store:
        from s3_image_folder import S3ImageFolder
        dataset = S3ImageFolder(args.store.rstrip("/") + "/" + split, transform)
    else:
        folder = os.path.join(options.data_path, split)
        if not os.path.isdir(folder):
            raise gaptrain.OptionsError("spec.data.path: no %s folder at %s (make_image_folder.py "
                                        "writes it)" % (split, folder))
        dataset = datasets.ImageFolder(folder, transform)
    torch.manual_seed(0)  # the first trainer's initial values become the job's
    model = SmallCNN()
    if evaluator:
        result = gaptrain.evaluate(model, dataset, options=options)
    else:
        result = gaptrain.train(model, dataset, nn.CrossEntropyLoss(), options=options)
    print(result)
    if args.result_dir:
        result.save(os.path.join(args.result_dir, options.host_name + ".json"))


if __name__ == "__main__":
    gaptrain.run_main(main)
