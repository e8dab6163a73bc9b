#!/usr/bin/env python3
"""torchvision's ResNet-18 (model.py) on Fashion-MNIST with torchvision
transforms, trained by a gaptrain job in a loop of its own: the job needs
no spec.model (`model: {fromTrainer: true}`), the first trainer declares
the module to the master. The same script is the job's evaluator
(spec.evaluator.template runs it with GAPTRAIN_ROLE=evaluator): top-1 and
top-5 accuracy and cross-entropy on the test split. Settings come from the
environment the operator and `gaptrain run` set (or gaptrain-worker's
flags); the data is the job's spec.data.path.
  python3 examples/torchvision/train.py [--max-norm N] [--eval-samples N]
      [--result PATH]"""

import argparse
import os
import sys

import torch
import torch.nn.functional as F
from torchvision import transforms

try:
    import gaptrain
except ImportError:  # run from a checkout without `pip install ./python`
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.realpath(__file__)), "..", "..",
                                    "python"))
    import gaptrain

from fashion_mnist import MEAN, STD, FashionMNIST  # noqa: E402
from model import resnet18_for_fashion_mnist  # noqa: E402

TRAIN_TRANSFORM = transforms.Compose([
    transforms.RandomCrop(28, padding=2),
    transforms.RandomHorizontalFlip(),
    transforms.ToTensor(),
    transforms.Normalize((MEAN,), (STD,)),
])
TEST_TRANSFORM = transforms.Compose([transforms.ToTensor(), transforms.Normalize((MEAN,), (STD,))])


def evaluate(model, dataset):
    """Top-1 and top-5 accuracy and mean cross-entropy over `dataset`."""
    loss, top1, top5, n = 0.0, 0, 0, 0
    for images, labels in torch.utils.data.DataLoader(dataset, batch_size=500):
        logits = model(images)
        loss += F.cross_entropy(logits, labels, reduction="sum").item()
        best5 = logits.topk(5, dim=1).indices
        top1 += (best5[:, 0] == labels).sum().item()
        top5 += (best5 == labels[:, None]).any(dim=1).sum().item()
        n += len(labels)
    return {"accuracy": top1 / n, "loss": loss / n, "top5_accuracy": top5 / n}


def train(model, dataset, options, max_norm):
    with gaptrain.Trainer(model, dataset, options=options) as trainer:
        for images, labels in trainer.batches():
            loss = F.cross_entropy(model(images), labels)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
            trainer.step(loss)
    return trainer.result


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-norm", type=float, default=5.0,
                        help="clip the gradient's norm to this [5]")
    parser.add_argument("--eval-samples", type=int, default=0,
                        help="evaluate on the first N test images (0: all 10,000)")
    parser.add_argument("--result", default="", help="write the result as JSON here")
    parser.add_argument("--device", default="cpu",
                        help="where the trainer's model computes: cpu, cuda [cpu]")
    args, rest = parser.parse_known_args(argv)
    options = gaptrain.parse_options(rest, role=gaptrain.role(rest))
    if not options.data_path:
        raise gaptrain.OptionsError("the job has no spec.data.path")
    torch.manual_seed(0)  # the first trainer's initial values become the job's
    model = resnet18_for_fashion_mnist()
    if options.role == "evaluator":
        test_set = FashionMNIST(options.data_path, train=False, transform=TEST_TRANSFORM)
        if args.eval_samples > 0:
            test_set = torch.utils.data.Subset(test_set, range(args.eval_samples))
        result = gaptrain.evaluate(model, test_set, evaluate, options=options)
    else:
        result = train(model.to(args.device),
                       FashionMNIST(options.data_path, transform=TRAIN_TRANSFORM), options,
                       args.max_norm)
    print(result)
    if args.result:
        result.save(args.result)


if __name__ == "__main__":
    gaptrain.run_main(main)
