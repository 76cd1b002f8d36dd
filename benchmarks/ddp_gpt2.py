#!/usr/bin/python3
# PyTorch DistributedDataParallel baseline for zt_bench_multihost: a GPT-2 of
# the built-in gpt2's architecture (models/gpt2.cc: learned positions, pre-LN
# blocks, gelu_new MLP of 4x width, LM head tied to the token embedding) and
# the same shape, micro-batch and AdamW step as the benchmark's `zt train`,
# over Gloo under the same launcher (env:// rendezvous). Each rank prints
# "[ddp] step N | loss L" per step, which the benchmark polls exactly as it
# polls zt train's log. A benchmark baseline only; the engine never depends on
# Python. Needs Debian's python3-torch (run with /usr/bin/python3).
#
# --precision bf16 runs forward and backward under CPU autocast to bf16; DDP
# still all-reduces fp32 gradients (the parameters stay fp32), so its bytes on
# the wire are fp32's.
#
#   zt launch --nproc-per-node 2 -- /usr/bin/python3 benchmarks/ddp_gpt2.py --steps 8
import argparse
import datetime
import math
import os
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F


def parse_args():
    p = argparse.ArgumentParser(description="PyTorch DDP GPT-2 baseline for zt_bench_multihost (run under zt launch).")
    p.add_argument("--n-layer", type=int, default=4)
    p.add_argument("--n-embd", type=int, default=640)
    p.add_argument("--n-head", type=int, default=10)
    p.add_argument("--vocab", type=int, default=8192)
    p.add_argument("--seq-len", type=int, default=256)
    p.add_argument("--micro-batch", type=int, default=4, help="sequences per rank per step")
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--precision", choices=["fp32", "bf16"], default="fp32")
    p.add_argument("--seed", type=int, default=1234)
    a = p.parse_args()
    if min(a.n_layer, a.n_embd, a.n_head, a.vocab, a.seq_len, a.micro_batch, a.steps) < 1:
        p.error("every size and --steps must be >= 1")
    if a.n_embd % a.n_head:
        p.error(f"--n-embd {a.n_embd} does not divide by --n-head {a.n_head}")
    return a


class Block(nn.Module):
    def __init__(self, d, heads, n_layer):
        super().__init__()
        self.heads = heads
        self.ln_1 = nn.LayerNorm(d, eps=1e-5)
        self.c_attn = nn.Linear(d, 3 * d)
        self.c_proj = nn.Linear(d, d)
        self.ln_2 = nn.LayerNorm(d, eps=1e-5)
        self.c_fc = nn.Linear(d, 4 * d)
        self.mlp_proj = nn.Linear(4 * d, d)
        for lin, std in ((self.c_attn, 0.02), (self.c_fc, 0.02), (self.c_proj, 0.02 / math.sqrt(2 * n_layer)),
                         (self.mlp_proj, 0.02 / math.sqrt(2 * n_layer))):
            nn.init.normal_(lin.weight, 0.0, std)
            nn.init.zeros_(lin.bias)

    def forward(self, x, mask):
        b, t, d = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(d, -1)
        q, k, v = (y.view(b, t, self.heads, d // self.heads).transpose(1, 2) for y in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(d // self.heads)
        att = att.masked_fill(~mask, float("-inf")).softmax(-1)
        x = x + self.c_proj((att @ v).transpose(1, 2).reshape(b, t, d))
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class Gpt2(nn.Module):
    def __init__(self, a):
        super().__init__()
        self.wte = nn.Embedding(a.vocab, a.n_embd)
        self.wpe = nn.Embedding(a.seq_len, a.n_embd)
        nn.init.normal_(self.wte.weight, 0.0, 0.02)
        nn.init.normal_(self.wpe.weight, 0.0, 0.02)
        self.h = nn.ModuleList(Block(a.n_embd, a.n_head, a.n_layer) for _ in range(a.n_layer))
        self.ln_f = nn.LayerNorm(a.n_embd, eps=1e-5)
        # A plain attribute, not a buffer: DDP broadcasts buffers, and Gloo has no bool.
        self.mask = torch.ones(a.seq_len, a.seq_len, dtype=torch.bool).tril()

    def forward(self, idx):
        t = idx.size(1)
        x = self.wte(idx) + self.wpe(torch.arange(t))
        for block in self.h:
            x = block(x, self.mask[:t, :t])
        return self.ln_f(x) @ self.wte.weight.t()  # the tied LM head


def main():
    a = parse_args()
    for var in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        if var not in os.environ:
            sys.exit(f"ddp_gpt2.py: {var} is not set; run it under a launcher, e.g. "
                     f"zt launch --nproc-per-node 2 -- /usr/bin/python3 {sys.argv[0]}")
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    dist.init_process_group("gloo", init_method="env://", timeout=datetime.timedelta(seconds=300))
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(a.seed)
    model = Gpt2(a)
    psi = sum(p.numel() for p in model.parameters())
    ddp = nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.AdamW(ddp.parameters(), lr=a.lr, weight_decay=0.01)
    gen = torch.Generator().manual_seed(a.seed + 1 + rank)
    if rank == 0:
        print(f"[ddp] torch {torch.__version__}, gloo, {world} ranks, {torch.get_num_threads()} intra-op threads per "
              f"rank; GPT-2 {a.n_layer} x {a.n_embd}, vocab {a.vocab}, ({psi} elements), {a.precision}, micro-batch "
              f"{a.micro_batch} x {a.seq_len}", flush=True)
    for step in range(1, a.steps + 1):
        tokens = torch.randint(0, a.vocab, (a.micro_batch, a.seq_len + 1), generator=gen)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.precision == "bf16"):
            logits = ddp(tokens[:, :-1])
            loss = F.cross_entropy(logits.float().reshape(-1, a.vocab), tokens[:, 1:].reshape(-1))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if rank == 0:
            print(f"[ddp] step {step} | loss {loss.item():.4f}", flush=True)
    dist.barrier()  # rank 0 hosts the store: no rank leaves while a peer still needs it
    # Skip interpreter teardown (a torch 1.13 Gloo/GIL deadlock at exit; see ddp_baseline.py).
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
