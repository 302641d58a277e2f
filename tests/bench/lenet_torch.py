#!/usr/bin/python3
"""The reference for `pstrain bench train`: LeNet (the layers of
configs/lenet_fashion_mnist.yaml) trained with PyTorch on the CPU, one thread,
batch 64, SGD with momentum, on random Fashion-MNIST-shaped data. Prints one
JSON line like pstrain's benchmarks. Needs Debian's python3-torch.

Usage: /usr/bin/python3 tests/bench/lenet_torch.py [--steps N] [--batch B]
"""
import argparse
import json
import time

import torch
import torch.nn as nn


def lenet():
    return nn.Sequential(
        nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
        nn.Linear(400, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(), nn.Linear(84, 10))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--batch", type=int, default=64)
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(1)
    model = lenet()
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    x = torch.rand(args.batch, 1, 28, 28)
    y = torch.randint(0, 10, (args.batch,))
    for step in range(args.steps + 20):
        if step == 20:  # warm-up done
            start = time.perf_counter()
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
    seconds = time.perf_counter() - start
    print(json.dumps({"bench": "train", "framework": "pytorch " + torch.__version__,
                      "model": "lenet", "threads": 1, "batch": args.batch,
                      "steps": args.steps,
                      "samples_per_s": round(args.steps * args.batch / seconds, 1)}))


if __name__ == "__main__":
    main()
