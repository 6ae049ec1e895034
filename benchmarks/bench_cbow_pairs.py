"""How much faster are tensor-built CBOW pairs than the post's one-sample-at-a-time loop?

    python benchmarks/bench_cbow_pairs.py                     # the excerpt shipped with mllm_utils
    python benchmarks/bench_cbow_pairs.py --split valid       # a real split (download or MLLM_WIKITEXT2_DIR)

Both sides start from the same tokenized paragraphs and vocabulary and end
with one epoch of shuffled (contexts, centers) batches of 20,000, which is
what training consumes. Three stages are timed:

- encode: tokens to indices (the post: a list per paragraph; ours:
  :func:`mllm_utils.cbow.encode_paragraphs`, one tensor split per paragraph);
- pairs: the post's Python generator, one (center, context) per position,
  kept in a ``Dataset``; ours: :func:`mllm_utils.cbow.cbow_pairs` (``unfold``
  and a mask);
- epoch: a ``DataLoader`` with the post's ``collate_fn`` building each batch
  from 20,000 Python samples; ours: :class:`mllm_utils.train.Batches` (one
  index per batch).

It prints samples per second for pairs + epoch (the part the issue is about;
the goal is at least 20x), the speed-up with encoding included, and the
machine it ran on.
"""

from __future__ import annotations

import argparse
import os
import platform
import time

import torch

from mllm_utils.cbow import build_vocab, cbow_pairs, encode_paragraphs, wikitext_paragraphs
from mllm_utils.train import Batches
from mllm_utils.wikitext import wikitext2, wikitext2_excerpt


class PostStyleDataset(torch.utils.data.Dataset):
    """The post's way: every sample made by a Python generator, stored as Python lists."""

    def __init__(self, encoded_paragraphs, window):
        self.centers, self.contexts = [], []
        for center, context in self.yield_context(encoded_paragraphs, window):
            if len(context) == window:
                self.centers.append(center)
                self.contexts.append(context)

    @staticmethod
    def yield_context(paragraphs, window):
        half = window // 2
        for p in paragraphs:
            for i, center in enumerate(p):
                yield center, p[max(0, i - half) : i] + p[i + 1 : i + half + 1]

    def __len__(self):
        return len(self.centers)

    def __getitem__(self, i):
        return self.centers[i], self.contexts[i]


def post_collate(samples):
    centers = torch.tensor([c for c, _ in samples], dtype=torch.long)
    contexts = torch.tensor([ctx for _, ctx in samples], dtype=torch.long)
    return contexts, centers


def post_style(paragraphs, vocab, window, batch_size):
    """Encode, make pairs, serve one shuffled epoch: the post's way. Returns stage times."""
    t0 = time.perf_counter()
    encoded = [[vocab[token] for token in p] for p in paragraphs]
    t1 = time.perf_counter()
    dataset = PostStyleDataset(encoded, window)
    t2 = time.perf_counter()
    loader = torch.utils.data.DataLoader(dataset, batch_size=batch_size, shuffle=True, collate_fn=post_collate)
    samples = sum(len(centers) for _, centers in loader)
    t3 = time.perf_counter()
    return (t1 - t0, t2 - t1, t3 - t2), samples


def tensor_style(paragraphs, vocab, window, batch_size):
    """The same with encode_paragraphs, cbow_pairs and Batches. Returns stage times."""
    t0 = time.perf_counter()
    encoded = encode_paragraphs(paragraphs, vocab)
    t1 = time.perf_counter()
    contexts, centers = cbow_pairs(encoded, window)
    t2 = time.perf_counter()
    samples = sum(len(c) for _, c in Batches(contexts, centers, batch_size))
    t3 = time.perf_counter()
    return (t1 - t0, t2 - t1, t3 - t2), samples


def best_times(fn, repeats, *args):
    """The fastest of ``repeats`` runs, stage by stage (the machine may be busy)."""
    runs = [fn(*args) for _ in range(repeats)]
    assert len({samples for _, samples in runs}) == 1
    return [min(stage) for stage in zip(*(times for times, _ in runs), strict=True)], runs[0][1]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", default=None, help="a WikiText-2 split (default: the excerpt)")
    parser.add_argument("--window", type=int, default=8)
    parser.add_argument("--min-freq", type=int, default=50)
    parser.add_argument("--batch-size", type=int, default=20000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch threads (default 1: the post's side is one Python thread, and on a busy "
        "machine extra threads wait on each other)",
    )
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    torch.manual_seed(0)
    lines = wikitext2_excerpt() if args.split is None else wikitext2(args.split)
    paragraphs = wikitext_paragraphs(lines)
    vocab = build_vocab(paragraphs, min_freq=args.min_freq)
    corpus = "shipped excerpt" if args.split is None else f"WikiText-2 {args.split}"
    print(f"Corpus: {corpus}, {sum(map(len, paragraphs)):,} tokens in {len(paragraphs):,} paragraphs")
    print(
        f"Machine: {platform.machine()}, {os.cpu_count()} CPU cores, {platform.python_version()}, "
        f"torch {torch.__version__} ({torch.get_num_threads()} threads)"
    )
    job = (paragraphs, vocab, args.window, args.batch_size)
    slow, n_slow = best_times(post_style, args.repeats, *job)
    fast, n_fast = best_times(tensor_style, args.repeats, *job)
    assert n_slow == n_fast, f"the two sides made different numbers of samples: {n_slow}, {n_fast}"
    print(f"Samples (window {args.window}, one epoch in batches of {args.batch_size:,}): {n_fast:,}")
    print(
        f"{'seconds (best of ' + str(args.repeats) + ')':<24}{'encode':>9}{'pairs':>9}{'epoch':>9}"
        f"{'pairs+epoch':>13}{'samples/s':>14}"
    )
    for name, t in (("post-style generator", slow), ("tensor cbow_pairs", fast)):
        work = t[1] + t[2]
        print(f"{name:<24}{t[0]:9.3f}{t[1]:9.3f}{t[2]:9.3f}{work:13.3f}{n_fast / work:14,.0f}")
    ratio = (slow[1] + slow[2]) / (fast[1] + fast[2])
    print(f"Speed-up, pairs + one epoch of batches: {ratio:.0f}x (goal: at least 20x)")
    print(f"Speed-up, including encoding:           {sum(slow) / sum(fast):.0f}x")


if __name__ == "__main__":
    main()
