#!/usr/bin/python3
# PyTorch DistributedDataParallel baseline for zt_bench_zero_stages: the same
# MLP, global batch, AdamW settings and step counts, over Gloo, under the same
# launcher (env:// rendezvous). A benchmark baseline only; the engine never
# depends on Python. Needs Debian's python3-torch (run with /usr/bin/python3).
#
#   zt launch --nproc-per-node 2 -- /usr/bin/python3 benchmarks/ddp_baseline.py [--steps 10]
import argparse
import datetime
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F


def parse_args():
    p = argparse.ArgumentParser(description="PyTorch DDP baseline for zt_bench_zero_stages (run under zt launch).")
    # Same names and defaults as zt_bench_zero_stages.
    p.add_argument("--width", type=int, default=1024, help="features of every Linear layer")
    p.add_argument("--depth", type=int, default=6, help="number of Linear(width, width) layers, GELU between")
    p.add_argument("--global-batch", type=int, default=64, help="samples per step over all ranks")
    p.add_argument("--warmup", type=int, default=3, help="untimed steps")
    p.add_argument("--steps", type=int, default=20, help="timed steps")
    p.add_argument("--bucket-numel", type=int, default=2 << 20,
                   help="gradient bucket in fp32 elements (DDP bucket_cap_mb = 4 * this / 2^20)")
    p.add_argument("--lr", type=float, default=1e-3, help="AdamW learning rate (weight decay 0.01)")
    p.add_argument("--seed", type=int, default=1234)
    a = p.parse_args()
    if min(a.width, a.depth, a.global_batch, a.steps, a.bucket_numel) < 1 or a.warmup < 0:
        p.error("--width, --depth, --global-batch, --steps and --bucket-numel must be >= 1, --warmup >= 0")
    return a


class Mlp(nn.Module):
    """depth x Linear(width, width), GELU between layers (not after the last)."""

    def __init__(self, width, depth):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(width, width) for _ in range(depth))

    def forward(self, x):
        for i, layer in enumerate(self.layers):
            x = layer(x)
            if i + 1 < len(self.layers):
                x = F.gelu(x)
        return x


def loaded_blas():
    """The BLAS library mapped into this process, as zt::LoadedBlasLibrary() reports it."""
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                path = line.split()[-1]
                name = os.path.basename(path)
                if "blas" in name:
                    return path
    except OSError:
        pass
    return "none loaded"


def main():
    a = parse_args()
    for var in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        if var not in os.environ:
            sys.exit(f"ddp_baseline.py: {var} is not set; run it under a launcher, e.g. "
                     f"zt launch --nproc-per-node 2 -- /usr/bin/python3 {sys.argv[0]}")
    # The same intra-op thread count our ranks get (zt launch sets OMP_NUM_THREADS).
    threads = int(os.environ.get("OMP_NUM_THREADS", "1"))
    torch.set_num_threads(threads)
    dist.init_process_group("gloo", init_method="env://", timeout=datetime.timedelta(seconds=120))
    rank, world = dist.get_rank(), dist.get_world_size()
    if a.global_batch % world:
        sys.exit(f"ddp_baseline.py: --global-batch {a.global_batch} does not divide by the world size {world}")
    micro = a.global_batch // world

    torch.manual_seed(a.seed)
    teacher = torch.randn(a.width, a.width) / a.width ** 0.5
    torch.manual_seed(a.seed + 1000 + rank)
    data = []
    for _ in range(4):
        x = torch.randn(micro, a.width)
        data.append((x, torch.tanh(x @ teacher)))

    torch.manual_seed(a.seed)
    model = Mlp(a.width, a.depth)
    psi = sum(p.numel() for p in model.parameters())
    ddp = nn.parallel.DistributedDataParallel(model, bucket_cap_mb=4 * a.bucket_numel / 2**20)
    opt = torch.optim.AdamW(ddp.parameters(), lr=a.lr, weight_decay=0.01)

    if rank == 0:
        print(f"ddp: torch {torch.__version__}, gloo, {world} ranks, {torch.get_num_threads()} intra-op threads "
              f"per rank, BLAS: {loaded_blas()}")
        print(f"ddp: {a.depth} x Linear({a.width}, {a.width}) with GELU, {psi} parameters, fp32, AdamW lr {a.lr} "
              f"wd 0.01, global batch {a.global_batch} ({micro} per rank), bucket_cap_mb "
              f"{4 * a.bucket_numel / 2**20:g}, {a.warmup} warm-up + {a.steps} timed steps", flush=True)

    step_index = 0
    phase = [0.0, 0.0, 0.0]  # forward+loss, backward (incl. DDP's all-reduce wait), zero_grad+optimizer, in ms

    def step():
        nonlocal step_index
        x, y = data[step_index % len(data)]
        step_index += 1
        t0 = time.perf_counter()
        loss = F.mse_loss(ddp(x), y)
        t1 = time.perf_counter()
        loss.backward()
        t2 = time.perf_counter()
        opt.step()
        opt.zero_grad(set_to_none=False)  # zeroes in place, as our engine does after its step
        t3 = time.perf_counter()
        phase[:] = [(t1 - t0) * 1e3, (t2 - t1) * 1e3, (t3 - t2) * 1e3]
        return loss.item()

    for _ in range(a.warmup):
        step()
    dist.barrier()
    times, phases = [], [[], [], []]
    loss = float("nan")
    for _ in range(a.steps):
        t0 = time.perf_counter()
        loss = step()
        times.append((time.perf_counter() - t0) * 1e3)
        for k in range(3):
            phases[k].append(phase[k])
    # The slowest rank's medians, as zt_bench_zero_stages reports.
    med = torch.tensor([statistics.median(times)] + [statistics.median(p) for p in phases], dtype=torch.float64)
    dist.all_reduce(med, op=dist.ReduceOp.MAX)
    if rank == 0:
        ms, fwd, bwd, opt_ms = med.tolist()
        print(f"ddp: median step {ms:.1f} ms (forward {fwd:.1f}, backward {bwd:.1f}, optimizer {opt_ms:.1f}), "
              f"{a.global_batch / (ms / 1e3):.1f} samples/s, final loss {loss:.6g}")
        print(f"RESULT impl=ddp stage=ddp world={world} dtype=fp32 params={psi} global_batch={a.global_batch} "
              f"threads={torch.get_num_threads()} step_ms={ms:.3f} fwd_ms={fwd:.3f} bwd_ms={bwd:.3f} "
              f"opt_ms={opt_ms:.3f} samples_per_s={a.global_batch / (ms / 1e3):.2f} final_loss={loss:.6g}",
              flush=True)
    dist.barrier()  # rank 0 hosts the store: no rank leaves while a peer still needs it
    # Skip interpreter teardown: in torch 1.13, ~ProcessGroupGloo (run with the
    # GIL held when DDP's Reducer drops the last reference) joins a Gloo worker
    # that is freeing a tensor and waits for the GIL, a deadlock seen here in
    # about one run in four.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
