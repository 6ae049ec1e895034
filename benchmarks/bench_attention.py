"""Time four ways to compute multi-head self-attention, in one run, and print the ratios.

    python benchmarks/bench_attention.py [--lengths 64 128 256 512] [--repeats 15] [--batch 1] [--threads 0]

The four (same embed_dim D=512, 8 heads, inference mode, float32):

- loop:       one head at a time, separate (D, head_dim) weights per head (notebook 09, section 3)
- efficient:  mllm_utils.attention.MultiHeadAttention, fused projection, heads as a batch
              dimension, attention weights computed and returned (need_weights=True)
- torch MHA:  torch.nn.MultiheadAttention(batch_first=True), weights returned too
- SDPA:       our module with need_weights=False, which calls the fused kernel
              torch.nn.functional.scaled_dot_product_attention (no weights matrix)

Every sample times a few calls; the methods take turns (round robin), so a busy
moment on a shared machine slows all of them alike, and the table shows the
median of the samples. Notebook 09 runs the same measurement, smaller.
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from machine import cpu_name  # benchmarks/machine.py

from mllm_utils.attention import MultiHeadAttention, load_torch_multihead_attention  # noqa: E402


class PerHeadLoopAttention(nn.Module):
    """Multi-head self-attention written with one loop step per head (the slow, clear form)."""

    def __init__(self, embed_dim: int, num_heads: int):
        super().__init__()
        head_dim = embed_dim // num_heads
        scale = 1 / math.sqrt(embed_dim)
        self.w_q = nn.ParameterList(nn.Parameter(torch.randn(embed_dim, head_dim) * scale) for _ in range(num_heads))
        self.w_k = nn.ParameterList(nn.Parameter(torch.randn(embed_dim, head_dim) * scale) for _ in range(num_heads))
        self.w_v = nn.ParameterList(nn.Parameter(torch.randn(embed_dim, head_dim) * scale) for _ in range(num_heads))
        self.w_o = nn.Parameter(torch.randn(num_heads * head_dim, embed_dim) * scale)

    def forward(self, x):  # x: (B, L, D)
        heads = []
        for w_q, w_k, w_v in zip(self.w_q, self.w_k, self.w_v, strict=True):
            q, k, v = x @ w_q, x @ w_k, x @ w_v
            weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1)
            heads.append(weights @ v)
        return torch.cat(heads, dim=-1) @ self.w_o


def make_methods(embed_dim: int, num_heads: int):
    """name -> function of x, for the four forms (ours and torch's share parameters)."""
    loop = PerHeadLoopAttention(embed_dim, num_heads).eval()
    torch_mha = nn.MultiheadAttention(embed_dim, num_heads, batch_first=True).eval()
    ours = load_torch_multihead_attention(MultiHeadAttention(embed_dim, num_heads), torch_mha).eval()
    return {
        "loop": lambda x: loop(x),
        "efficient": lambda x: ours(x, need_weights=True),
        "torch MHA": lambda x: torch_mha(x, x, x, need_weights=True),
        "SDPA": lambda x: ours(x, need_weights=False),
    }


def time_methods(methods: dict, x: torch.Tensor, repeats: int, calls: int) -> dict:
    """Seconds per call of each method, one sample per round; the methods take turns each round."""
    samples = {name: [] for name in methods}
    with torch.inference_mode():
        for fn in methods.values():  # warm-up: allocations, kernel choice
            fn(x)
        for _ in range(repeats):
            for name, fn in methods.items():
                start = time.perf_counter()
                for _ in range(calls):
                    fn(x)
                samples[name].append((time.perf_counter() - start) / calls)
    return samples


def paired_ratio(samples: dict, slow: str, fast: str) -> float:
    """Median over rounds of slow/fast: both were timed in the same round, under the same load."""
    return statistics.median(a / b for a, b in zip(samples[slow], samples[fast], strict=True))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[64, 128, 256, 512])
    parser.add_argument("--embed-dim", type=int, default=512)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--calls", type=int, default=3)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    methods = make_methods(args.embed_dim, args.heads)
    print(
        f"machine: {cpu_name()} ({platform.machine()}), {os.cpu_count()} CPUs, "
        f"torch {torch.__version__}, {torch.get_num_threads()} threads; device cpu, float32"
    )
    print(
        f"D={args.embed_dim}, heads={args.heads}, batch={args.batch}; median of {args.repeats} "
        f"samples of {args.calls} calls each, methods interleaved"
    )
    names = list(methods)
    header = " ".join(f"{n + ' ms':>13}" for n in names)
    print(f"{'L':>5} {header} {'loop/eff':>9} {'eff/MHA':>8} {'eff/SDPA':>9}")

    def row(label, samples):
        times = " ".join(f"{statistics.median(samples[n]) * 1e3:13.2f}" for n in names)
        ratios = (
            f"{paired_ratio(samples, 'loop', 'efficient'):9.2f} "
            f"{paired_ratio(samples, 'efficient', 'torch MHA'):8.2f} "
            f"{paired_ratio(samples, 'efficient', 'SDPA'):9.2f}"
        )
        print(f"{label:>5} {times} {ratios}")

    for seq_len in args.lengths:
        row(seq_len, time_methods(methods, torch.randn(args.batch, seq_len, args.embed_dim), args.repeats, args.calls))
    small = make_methods(64, args.heads)
    print(f"small model, D=64, {args.heads} heads (per-operation overhead dominates):")
    row(32, time_methods(small, torch.randn(args.batch, 32, 64), args.repeats, args.calls))
    print("times: median per call; ratios: median over rounds of the two methods' times in that round")
    print("loop/eff: how many times faster the efficient form is than the per-head loop (goal >= 3 at L=256)")
    print("eff/MHA:  our efficient form's time over nn.MultiheadAttention's (goal <= 1.25)")
    print("eff/SDPA: how many times faster the fused kernel (no weights matrix) is than our efficient form")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
