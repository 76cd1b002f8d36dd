#!/usr/bin/python3
# PyTorch DDP baseline for the start-up of `zt train --model mnist-cnn --steps 1`:
# the same job done the usual PyTorch way, timed as a whole command. Each rank
# imports torch, joins the Gloo group (env:// rendezvous under the same
# launcher), decodes the Fashion-MNIST training set from Debian's gzip IDX
# files, builds PyTorch's examples/mnist Net (the built-in mnist-cnn), wraps
# it in DistributedDataParallel and takes one AdamW step on a micro-batch of
# 16 per rank (zt train's default). A benchmark baseline only; the engine never
# depends on Python. Needs Debian's python3-torch (run with /usr/bin/python3).
#
#   time zt launch --nproc-per-node 2 -- /usr/bin/python3 benchmarks/ddp_first_step.py
import argparse
import datetime
import gzip
import os

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, 1)
        self.conv2 = nn.Conv2d(32, 64, 3, 1)
        self.fc1 = nn.Linear(9216, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = torch.flatten(F.dropout(x, 0.25, self.training), 1)
        x = F.dropout(F.relu(self.fc1(x)), 0.5, self.training)
        return F.log_softmax(self.fc2(x), dim=1)


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    ndims = data[3]
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(ndims)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndims).reshape(dims)


def main():
    p = argparse.ArgumentParser(description="DDP first step on Fashion-MNIST (run under zt launch).")
    p.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--micro-batch", type=int, default=16)
    a = p.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
    rank, world = dist.get_rank(), dist.get_world_size()
    images = read_idx(os.path.join(a.data, "train-images-idx3-ubyte.gz"))
    labels = read_idx(os.path.join(a.data, "train-labels-idx1-ubyte.gz"))
    torch.manual_seed(1)
    model = nn.parallel.DistributedDataParallel(Net())
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    idx = np.arange(rank * a.micro_batch, (rank + 1) * a.micro_batch)
    x = torch.from_numpy(images[idx].astype(np.float32) / 255.0).unsqueeze(1)
    y = torch.from_numpy(labels[idx].astype(np.int64))
    loss = F.nll_loss(model(x), y)
    loss.backward()
    opt.step()
    if rank == 0:
        print(f"ddp first step: loss {loss.item():.4f} on {world} ranks, {len(images)} training images decoded")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
