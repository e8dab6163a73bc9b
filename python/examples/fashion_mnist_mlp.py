#!/usr/bin/env python3
"""A user's own PyTorch code as a gaptrain trainer: an MLP written as a plain
nn.Module, Fashion-MNIST read from its IDX gzip files without torchvision
(examples/python/dataset.py), cross-entropy. Nothing gaptrain-specific is inside the model or dataset.

Run it where gaptrain-worker would run, with the same flags (with `--role
evaluator`, or $GAPTRAIN_ROLE=evaluator, it is the job's evaluator on the
test split):
  GAPTRAIN_TOKEN=... python3 fashion_mnist_mlp.py --job job.yaml \\
      --coordinator 127.0.0.1:7071 --data ../shared/data/fashion-mnist

With `--model mlp` (the default) the job's model is `builtin: mlp`
(784-256-128-10), whose flat layout this module has; with `--model cnn` it
is the TorchScript of SmallCNN (python/README.md, "Models"). With
`--own-loop` the training loop is this script's own (gaptrain.Trainer),
clipping the gradient with `--clip-norm N` and in mixed precision with
`--autocast` (python/README.md, "Your own loop")."""

import argparse
import os
import sys

import torch
from torch import nn

import gaptrain

# The dataset is the repository example's (examples/python/dataset.py):
# normalised as gaptrain's C++ loader does.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.realpath(__file__)), "..", "..",
                                "examples", "python"))
from dataset import FashionMNIST  # noqa: E402


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(28 * 28, 256)
        self.fc2 = nn.Linear(256, 128)
        self.fc3 = nn.Linear(128, 10)

    def forward(self, x):
        x = torch.flatten(x, 1)
        x = torch.relu(self.fc1(x))
        x = torch.relu(self.fc2(x))
        return self.fc3(x)


class SmallCNN(nn.Module):
    """Not one of gaptrain's built-in models: a job trains it by naming its
    TorchScript file (spec.model.torchscript), which gives the master its
    layout: torch.jit.script(SmallCNN()).save("small_cnn.pt")."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 5)
        self.conv2 = nn.Conv2d(8, 16, 5)
        self.fc = nn.Linear(16 * 4 * 4, 10)

    def forward(self, x):
        x = torch.max_pool2d(torch.relu(self.conv1(x)), 2)
        x = torch.max_pool2d(torch.relu(self.conv2(x)), 2)
        return self.fc(torch.flatten(x, 1))


class BatchNormCNN(nn.Module):
    """SmallCNN with BatchNorm: its running statistics are buffers, which
    the trainers send to the master (python/README.md, "Buffers")."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 5)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 16, 5)
        self.bn2 = nn.BatchNorm2d(16)
        self.fc = nn.Linear(16 * 4 * 4, 10)

    def forward(self, x):
        x = torch.max_pool2d(torch.relu(self.bn1(self.conv1(x))), 2)
        x = torch.max_pool2d(torch.relu(self.bn2(self.conv2(x))), 2)
        return self.fc(torch.flatten(x, 1))


class UnscriptableCNN(BatchNormCNN):
    """BatchNormCNN whose forward takes keyword options, which
    torch.jit.script refuses: a job trains it with spec.model.fromTrainer,
    its trainers declaring it to the master (python/README.md, "Models")."""

    def forward(self, x, **options):
        scale = options.get("scale", 1.0)
        return super().forward(x * scale)


MODELS = {"mlp": MLP, "cnn": SmallCNN, "bn-cnn": BatchNormCNN, "unscriptable": UnscriptableCNN}


def classification_with_top_k(k):
    """An eval_fn of the user's own: gaptrain.classification's top-1
    accuracy and loss, and the top-k accuracy as "top<k>_accuracy" (a
    metric spec.training.target may name)."""
    def eval_fn(model, dataset):
        result = gaptrain.classification(model, dataset)
        hits, n = 0, 0
        for inputs, targets in torch.utils.data.DataLoader(dataset, batch_size=256):
            top = model(inputs).topk(k, dim=1).indices
            hits += (top == targets.unsqueeze(1)).any(dim=1).sum().item()
            n += len(targets)
        result["top%d_accuracy" % k] = hits / n
        return result
    return eval_fn


def train_in_own_loop(model, dataset, clip_norm, autocast, argv):
    """What gaptrain.train() does, the loop written out as a PyTorch user
    writes one, with gradient clipping and, with `autocast`, mixed
    precision: float16 with a GradScaler on a GPU (scaler.step skips a
    batch whose gradients overflowed), bfloat16 on the CPU."""
    loss_fn = nn.CrossEntropyLoss()
    device = next(model.parameters()).device.type
    dtype = torch.float16 if device == "cuda" else torch.bfloat16
    use_scaler = autocast and device == "cuda"
    if hasattr(torch.amp, "GradScaler"):  # torch >= 2.3
        scaler = torch.amp.GradScaler(device, enabled=use_scaler)
    else:
        scaler = torch.cuda.amp.GradScaler(enabled=use_scaler)
    with gaptrain.Trainer(model, dataset, argv=argv) as trainer:
        for inputs, targets in trainer.batches():
            with torch.autocast(device, dtype=dtype, enabled=autocast):
                loss = loss_fn(model(inputs), targets)
            scaler.scale(loss).backward()
            scaler.unscale_(trainer.optimizer)
            if clip_norm:
                nn.utils.clip_grad_norm_(model.parameters(), clip_norm)
            scaler.step(trainer.optimizer, loss=loss)
            scaler.update()
    return trainer.result


def main(argv):
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", required=True, help="the Fashion-MNIST directory")
    parser.add_argument("--model", choices=sorted(MODELS), default="mlp",
                        help="mlp (the job's model: builtin mlp), cnn or bn-cnn (the job's "
                             "model: that module's TorchScript), or unscriptable (the job's "
                             "model: fromTrainer)")
    parser.add_argument("--result", default="", help="write the TrainResult as JSON here")
    parser.add_argument("--own-loop", action="store_true",
                        help="train in a loop of this script's own (gaptrain.Trainer)")
    parser.add_argument("--clip-norm", type=float, default=0.0,
                        help="with --own-loop: clip the gradient's norm to this (0: no clipping)")
    parser.add_argument("--autocast", action="store_true",
                        help="with --own-loop: mixed precision (float16 on a GPU, bfloat16 on "
                             "the CPU)")
    parser.add_argument("--device", default="cpu", help="the model's device (cpu, cuda)")
    parser.add_argument("--samples", type=int, default=0,
                        help="train on the first N training images only (a dataset of the "
                             "user's own size: the job's spec.data.trainSamples); 0: all")
    parser.add_argument("--top-k", type=int, default=0,
                        help="as the evaluator: also report topK_accuracy (0: not)")
    args, rest = parser.parse_known_args(argv)
    model = MODELS[args.model]().to(args.device)
    if gaptrain.role(rest) == "evaluator":
        # The job's evaluator: the test split, top-1 accuracy and
        # cross-entropy (gaptrain.classification), and top-k with --top-k.
        eval_fn = classification_with_top_k(args.top_k) if args.top_k > 0 else None
        result = gaptrain.evaluate(model, FashionMNIST(args.data, train=False), eval_fn,
                                   argv=rest)
    else:
        train_set = FashionMNIST(args.data)
        if args.samples:
            train_set = torch.utils.data.Subset(train_set, range(args.samples))
        if args.own_loop:
            result = train_in_own_loop(model, train_set, args.clip_norm, args.autocast, rest)
        else:
            result = gaptrain.train(model, train_set, nn.CrossEntropyLoss(), argv=rest)
    if args.result:
        result.save(args.result)


if __name__ == "__main__":
    gaptrain.run_main(main)
