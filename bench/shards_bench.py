#!/usr/bin/python3
"""Samples per second of the sharded streaming example (issue 38):
examples/shards' train.py as the one trainer of a `gaptrain run` job, each
shard a tar of PNGs streamed through its TarShards (gaptrain.ShardedDataset)
as the coordinator hands it out, beside a plain PyTorch loop over the same
shards: DataLoader(TarShards, batch_size=64, num_workers=1), the loop a
user writes for an IterableDataset, with one loader process as the SDK has
one batch process, and SGD with momentum on the same MLP. One compute
thread each. Target: gaptrain / plain loop >= 0.85, the median of the
rounds' own ratios (each round runs the two seconds apart).

  bazel build -c opt //cli:gaptrain
  /usr/bin/python3 bench/shards_bench.py [--data ../shared/data/fashion-mnist] [--rounds 3]

The shards are written once at the start (make_shards.py): 57,600
training images in 30 shards of 1,920, so every batch of 64 is whole in
both (the job's batches never span shards, the DataLoader's do). The job's
rate is the master's pushes (one per batch; one trainer, asynchronous)
sampled every 0.25 s between the 50th push and the job's end
(python_trainer_bench.job_rate): start-up is left out, as it is from the
plain loop's.
"""

import argparse
import importlib.util
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.realpath(__file__))
ROOT = os.path.dirname(HERE)
EXAMPLE = os.path.join(ROOT, "examples", "shards")
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, EXAMPLE)

import torch  # noqa: E402

from gaptrain.compute_threads import set_compute_threads  # noqa: E402
from python_trainer_bench import job_rate, timed_steps, write_bench_job  # noqa: E402
from tar_shards import TarShards  # noqa: E402

# The example's train.py by its path: other examples have a train.py too.
_spec = importlib.util.spec_from_file_location("shards_train", os.path.join(EXAMPLE, "train.py"))
shards_train = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(shards_train)
TRANSFORM, mlp = shards_train.TRANSFORM, shards_train.mlp

BATCH = 64
SHARDS = 30
SAMPLES = SHARDS * 30 * BATCH  # 57,600: every shard 30 whole batches
TARGET = 0.85


def plain_loop(shards, steps, warmup=50):
    """Samples per second of a plain PyTorch loop over the shards."""
    set_compute_threads(1)  # torch's and OpenBLAS's (python_trainer_bench.plain_loop)
    torch.manual_seed(0)
    loader = torch.utils.data.DataLoader(TarShards(shards, "train", TRANSFORM),
                                         batch_size=BATCH, num_workers=1)
    return timed_steps(mlp(), loader, steps, warmup)[0] * BATCH


def write_job(path, shards, epochs):
    container = """
command: [/usr/bin/python3, %s]
args: [--threads, "1"]""" % os.path.join(EXAMPLE, "train.py")
    write_bench_job(path, "shardsbench", "{fromTrainer: true}",
                    "{format: shards, path: %s, shards: %d, trainSamples: %d}"
                    % (shards, SHARDS, SAMPLES), epochs, container, evaluator=container)


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=os.path.join(ROOT, "..", "shared", "data",
                                                       "fashion-mnist"))
    parser.add_argument("--gaptrain", default=os.path.join(ROOT, "bazel-bin", "cli", "gaptrain"))
    parser.add_argument("--epochs", default="1", help="of each job [1]")
    parser.add_argument("--steps", type=int, default=600, help="of the plain loop [600]")
    parser.add_argument("--rounds", type=int, default=3, help="of the two, interleaved [3]")
    args = parser.parse_args(argv)
    tmp = tempfile.mkdtemp(prefix="shards_bench.")
    shards = os.path.join(tmp, "shards")
    subprocess.run([sys.executable, os.path.join(EXAMPLE, "make_shards.py"), "--data",
                    os.path.realpath(args.data), "--out", shards, "--shards", str(SHARDS),
                    "--train-samples", str(SAMPLES), "--test-samples", "500"], check=True)
    job = os.path.join(tmp, "job.yaml")
    write_job(job, shards, args.epochs)
    plain, sdk = [], []
    for r in range(args.rounds):
        plain.append(plain_loop(shards, args.steps))
        print("round %d: plain PyTorch loop:   %7.0f samples/s (%d batches of %d, DataLoader "
              "with 1 worker, 1 thread)" % (r + 1, plain[-1], args.steps, BATCH), flush=True)
        steps, summary, _ = job_rate(args.gaptrain, job, os.path.join(tmp, "run%d" % r), 1)
        sdk.append(steps * BATCH)
        print("round %d: gaptrain, 1 trainer: %7.0f samples/s (gaptrain run, %s epochs: %s, "
              "%d updates)" % (r + 1, sdk[-1], args.epochs, summary["outcome"],
                               summary["version"]), flush=True)
    by_round = [s / p for s, p in zip(sdk, plain)]
    median = statistics.median(by_round)
    print("gaptrain / plain loop by round: %s" % ", ".join("%.2f" % r for r in by_round))
    print("best: plain loop %.0f, gaptrain %.0f samples/s" % (max(plain), max(sdk)))
    print("sharded streaming, gaptrain / plain loop: %.2f, the median of the rounds (target >= "
          "%.2f)" % (median, TARGET))
    print("runs in %s" % tmp)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
