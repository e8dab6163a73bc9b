#!/usr/bin/env python3
"""A character-level language model trained by a gaptrain job: a small
LSTM predicts each next character of the licence texts Debian ships
(corpus.py), data of the script's own (`format: custom`, trainSamples
20000 windows), the model declared by the first trainer (`fromTrainer`).
As the job's evaluator (GAPTRAIN_ROLE=evaluator) it reports the test
windows' per-character cross-entropy, next-character accuracy and
perplexity (e^loss), the metric the job's target names
(`target: {metric: perplexity, atMost: ...}`).
  python3 examples/char_lm/train.py [--result PATH]"""

import argparse
import math
import os
import sys

import torch
import torch.nn.functional as F
from torch import nn

try:
    import gaptrain
except ImportError:  # run from a checkout without `pip install ./python`
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.realpath(__file__)), "..", "..",
                                    "python"))
    import gaptrain

from corpus import VOCABULARY, CharWindows  # noqa: E402


class CharLSTM(nn.Module):
    def __init__(self, vocabulary=VOCABULARY, embedding=32, hidden=128):
        super().__init__()
        self.embed = nn.Embedding(vocabulary, embedding)
        self.lstm = nn.LSTM(embedding, hidden, batch_first=True)
        self.out = nn.Linear(hidden, vocabulary)

    def forward(self, codes):  # (batch, length) -> (batch, length, vocabulary)
        hidden, _ = self.lstm(self.embed(codes))
        return self.out(hidden)


def next_char_loss(logits, targets):
    """Mean cross-entropy over every position of every window."""
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def evaluate(model, dataset):
    """Per-character cross-entropy, next-character accuracy, perplexity."""
    loss, correct, n = 0.0, 0, 0
    for codes, targets in torch.utils.data.DataLoader(dataset, batch_size=250):
        logits = model(codes)
        loss += F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1),
                                reduction="sum").item()
        correct += (logits.argmax(dim=-1) == targets).sum().item()
        n += targets.numel()
    return {"accuracy": correct / n, "loss": loss / n, "perplexity": math.exp(loss / n)}


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--result", default="", help="write the result as JSON here")
    args, rest = parser.parse_known_args(argv)
    options = gaptrain.parse_options(rest, role=gaptrain.role(rest))
    torch.manual_seed(0)  # the first trainer's initial values become the job's
    model = CharLSTM()
    if options.role == "evaluator":
        result = gaptrain.evaluate(model, CharWindows(train=False), evaluate, options=options)
    else:
        result = gaptrain.train(model, CharWindows(train=True), next_char_loss, options=options)
    print(result)
    if args.result:
        result.save(args.result)


if __name__ == "__main__":
    gaptrain.run_main(main)
