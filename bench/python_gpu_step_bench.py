#!/usr/bin/python3
"""A Python trainer's step on a GPU, without the master: what the SDK adds
around the user's forward and backward when the model is on CUDA, against a
plain PyTorch loop of the same model on the same GPU.

  SDK step:   θ from the pulled host buffer to the GPU (parameter_mirror.py,
              one copy), the batch to the GPU, the gradient zeroed,
              forward, backward, the gradient to the host (flat_gradient.py,
              one copy into pinned memory), as gaptrain.train() does
              between a pull and a push;
  plain loop: the batch to the GPU, zero_grad, forward, backward,
              SGD-with-momentum's step on the GPU.

Both read the same random batch from host memory (not pinned, as a
DataLoader without pin_memory gives it), for the examples' models: the MLP
(python/examples/fashion_mnist_mlp.py, 235,146 parameters) and the CNN
(examples/python/model.py, 106,762). The network round trip is left out
(bench/python_trainer_bench.py measures it, on the CPU): this is the device
side's cost alone. Without CUDA it says so and measures the CPU.

  /usr/bin/python3 bench/python_gpu_step_bench.py [--steps 300] [--batches 128,512]
"""

import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.realpath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "python", "examples"))
sys.path.insert(0, os.path.join(ROOT, "examples", "python"))

import torch  # noqa: E402
from torch import nn  # noqa: E402

from fashion_mnist_mlp import MLP  # noqa: E402
from gaptrain.flat_gradient import FlatGradient  # noqa: E402
from gaptrain.parameter_mirror import ParameterMirror, to_device  # noqa: E402
from model import FashionCNN  # noqa: E402


def synchronize(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def ms_per_step(step, steps, device, warmup=20):
    for _ in range(warmup):
        step()
    synchronize(device)
    start = time.perf_counter()
    for _ in range(steps):
        step()
    synchronize(device)
    return 1e3 * (time.perf_counter() - start) / steps


def plain_step(model, x, y, device):
    loss_fn = nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)

    def step():
        opt.zero_grad()
        loss_fn(model(x.to(device)), y.to(device)).backward()
        opt.step()
    return step


def sdk_step(model, x, y, device):
    loss_fn = nn.CrossEntropyLoss()
    params = list(model.parameters())
    host = torch.empty(sum(p.numel() for p in params), dtype=torch.float32,
                       pin_memory=device.type == "cuda")
    mirror = ParameterMirror(params, host)
    gradient = FlatGradient(params)

    def step():
        mirror.load()  # a pull brought new values
        inputs, targets = to_device(x, device), to_device(y, device)
        gradient.zero(model)
        loss = loss_fn(model(inputs), targets)
        loss.backward()
        float(loss.detach())  # the trainer reads the loss to push it
        gradient.gradient()  # on the host, ready to encode
    return step


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--batches", default="128,512")
    args = parser.parse_args(argv)
    cuda = torch.cuda.is_available()
    device = torch.device("cuda" if cuda else "cpu")
    print("PyTorch %s, %s" % (torch.__version__, torch.cuda.get_device_name(0) if cuda else
                              "no CUDA device: measuring the CPU"))
    print("%-6s %5s | %10s %10s | %6s | %s" % ("model", "batch", "plain ms", "SDK ms", "ratio",
                                              "SDK steps/s"))
    for name, make in (("mlp", MLP), ("cnn", FashionCNN)):
        for batch in (int(b) for b in args.batches.split(",")):
            torch.manual_seed(1)
            x, y = torch.randn(batch, 1, 28, 28), torch.randint(0, 10, (batch,))
            plain = ms_per_step(plain_step(make().to(device), x, y, device), args.steps, device)
            sdk = ms_per_step(sdk_step(make().to(device), x, y, device), args.steps, device)
            print("%-6s %5d | %10.3f %10.3f | %6.2f | %8.0f" % (name, batch, plain, sdk,
                                                             plain / sdk, 1e3 / sdk))
    print("ratio: plain loop ms / SDK ms (1.0: the SDK's device side costs nothing extra)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
