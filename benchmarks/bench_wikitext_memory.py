"""Notebook 02 at the full size on a corpus as large as WikiText-2's train split, under Colab's memory.

WikiText-2 cannot be downloaded on the course's CI machine, so every full-size run there falls back to
the shipped excerpt (83,000 tokens). This script writes a synthetic WikiText-2 of the real split's shape
(36,718 / 3,760 / 4,358 lines; about 2.09 million training tokens over 33,278 word types with Zipf's law
frequencies, in articles, sections and paragraphs, each paragraph leaning on a topic so that the context
predicts the centre word a little), points ``MLLM_WIKITEXT2_DIR`` at it and runs notebook 02 top to bottom
at the full size in a kernel whose address space is capped at Colab's 12.7 GB of RAM (the address space is
never smaller than the resident memory, so a run that passes fits). Cells that fail are reported, not
fatal: the synthetic words have no meaning, so the checks of what the neighbours of "king" are can fail.

    python benchmarks/bench_wikitext_memory.py [--limit-gb 12.7] [--notebook notebooks/02_word_vectors.ipynb]
                                               [--corpus DIR] [--batched-loss] [--smoke]

``--batched-loss`` runs the notebook with its whole-corpus loss computed in batches
(``mllm_utils.train.evaluate``), for a notebook that still computes it in one piece.
Prints the kernel's peak resident memory, the run time, the slowest cells and the failing cells.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import resource
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from mllm_utils.wikitext import LINE_COUNTS, wikitext2_excerpt  # noqa: E402

TRAIN_TOKENS = 2_088_628  # WikiText-2's train split, space-separated tokens
WORD_TYPES = 33_278  # its vocabulary
TOPICS = 200


def vocabulary(n: int) -> list[str]:
    """The excerpt's words by frequency (so common English words sit at the top ranks), then made-up ones."""
    from mllm_utils.cbow import wikitext_paragraphs

    counts = Counter(t for p in wikitext_paragraphs(wikitext2_excerpt()) for t in p if t.isalpha() or t in ",.")
    words = [w for w, _ in counts.most_common()]
    words += [f"w{i}" for i in range(n - len(words))]
    return words[:n]


def write_split(path: Path, lines: int, tokens: int, words: list[str], rng: np.random.Generator) -> int:
    """Articles of WikiText's layout: exactly ``lines`` lines, about ``tokens`` tokens; returns the tokens."""
    ranks = np.arange(1, len(words) + 1)
    weights = 1.0 / ranks**1.05
    weights /= weights.sum()
    perms = [rng.permutation(len(words)) for _ in range(TOPICS)]  # each topic favours its own words
    pattern = []  # line kinds, then filled
    while len(pattern) < lines:
        pattern += ["blank", "title", "blank"]
        for _ in range(rng.integers(2, 6)):
            pattern += ["heading", "blank"] + ["para", "blank"] * int(rng.integers(1, 6))
    pattern = pattern[:lines]
    n_para = pattern.count("para")
    per_para = max(1, tokens // max(1, n_para))
    lengths = rng.integers(per_para // 2, per_para * 3 // 2 + 1, size=n_para)
    every = rng.choice(len(words), size=int(lengths.sum()), p=weights)  # all paragraphs' words at once
    mine = rng.random(len(every)) < 0.4  # these come from the paragraph's topic
    starts = np.concatenate([[0], np.cumsum(lengths)])
    written, k = 0, 0
    with open(path, "w", encoding="utf-8") as f:
        for kind in pattern:
            if kind == "blank":
                f.write(" \n")
            elif kind == "title":
                f.write(f" = {words[int(rng.integers(100, 3000))].title()} = \n")
            elif kind == "heading":
                f.write(f" = = {words[int(rng.integers(100, 3000))].title()} = = \n")
            else:
                ids, own = every[starts[k] : starts[k + 1]], mine[starts[k] : starts[k + 1]]
                ids = np.where(own, perms[int(rng.integers(TOPICS))][ids], ids)
                f.write(" " + " ".join(words[i] for i in ids) + " \n")
                written, k = written + len(ids), k + 1
    return written


def make_corpus(folder: Path, seed: int = 0) -> dict:
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    words = vocabulary(WORD_TYPES)
    sizes = {"train": TRAIN_TOKENS, "valid": 217_646, "test": 245_569}
    made = {}
    for split, lines in LINE_COUNTS.items():
        made[split] = write_split(folder / f"wiki.{split}.tokens", lines, sizes[split], words, rng)
    return made


BATCHED = (
    "trained_loss = __import__('mllm_utils.train', fromlist=['evaluate']).evaluate(model, F.cross_entropy, "
    "__import__('mllm_utils.train', fromlist=['Batches']).Batches(contexts, centers, 20_000, shuffle=False))"
)


async def run_notebook(path: Path, limit_bytes: int | None, batched: bool) -> dict:
    import nbformat
    from jupyter_client.manager import AsyncKernelManager
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    if batched:
        for cell in nb.cells:
            cell.source = re.sub(r"trained_loss = F\.cross_entropy\(model\(contexts\), centers\)\.item\(\)",
                                 BATCHED, cell.source)  # fmt: skip
    if limit_bytes:
        resource.setrlimit(resource.RLIMIT_AS, (limit_bytes, limit_bytes))  # inherited by the kernel
    km = AsyncKernelManager(kernel_name="python3")
    await km.start_kernel(cwd=str(path.parent))
    started, seconds, errors = time.perf_counter(), {}, {}
    try:
        client = NotebookClient(nb, km=km, timeout=None, allow_errors=True)
        await client.async_execute()
        status = Path(f"/proc/{km.provisioner.process.pid}/status").read_text()
        peak = {k: round(int(re.search(rf"{k}:\s+(\d+) kB", status).group(1)) / 1024) for k in ("VmHWM", "VmPeak")}
    finally:
        await km.shutdown_kernel(now=True)
    for i, cell in enumerate(nb.cells):
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error":
                errors[i] = f"{out['ename']}: {out['evalue'][:160]}"
        meta = cell.get("metadata", {}).get("execution", {})
        if "iopub.execute_input" in meta and "shell.execute_reply" in meta:
            from datetime import datetime

            t0 = datetime.fromisoformat(meta["iopub.execute_input"].replace("Z", "+00:00"))
            t1 = datetime.fromisoformat(meta["shell.execute_reply"].replace("Z", "+00:00"))
            seconds[i] = (t1 - t0).total_seconds()
    lines = [o.get("text", "") for c in nb.cells for o in c.get("outputs", []) if o.get("output_type") == "stream"]
    return {"seconds": time.perf_counter() - started, "peak": peak, "errors": errors, "cells": seconds,
            "text": "".join(lines)}  # fmt: skip


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--limit-gb", type=float, default=12.7, help="address-space cap of the kernel (0: none)")
    parser.add_argument("--notebook", type=Path, default=ROOT / "notebooks" / "02_word_vectors.ipynb")
    parser.add_argument("--corpus", type=Path, default=Path("/tmp/mllm-synthetic-wikitext2"))
    parser.add_argument("--batched-loss", action="store_true", help="compute the whole-corpus loss in batches")
    parser.add_argument("--smoke", action="store_true", help="MLLM_SMOKE=1: the training capped at a few steps "
                        "(memory peaks in the first steps; everything else runs on the whole corpus)")  # fmt: skip
    args = parser.parse_args(argv)
    if not (args.corpus / "wiki.train.tokens").exists():
        start = time.perf_counter()
        made = make_corpus(args.corpus)
        print(f"synthetic WikiText-2 in {args.corpus}: {made} tokens, {time.perf_counter() - start:.0f} s")
    os.environ.update({"MLLM_QUICK": "0", "TQDM_DISABLE": "1", "MLLM_WIKITEXT2_DIR": str(args.corpus)})
    if args.smoke:
        os.environ["MLLM_SMOKE"] = "1"
    limit = int(args.limit_gb * 1e9) if args.limit_gb else None
    result = asyncio.run(run_notebook(args.notebook.resolve(), limit, args.batched_loss))
    print(f"{args.notebook.name}: {result['seconds']:.0f} s, kernel's peak resident memory "
          f"{result['peak']['VmHWM']:,} MiB, peak address space {result['peak']['VmPeak']:,} MiB "
          f"(cap {args.limit_gb} GB)")  # fmt: skip
    slow = sorted(result["cells"].items(), key=lambda kv: -kv[1])[:6]
    print("slowest cells:", ", ".join(f"cell {i} {s:.0f} s" for i, s in slow))
    for line in result["text"].splitlines():
        if re.search(r"samples|vocabulary of|lines from|trained model on all|tokens|all .* pairs|loss per epoch", line):
            print("  |", line[:150])
    for i, error in result["errors"].items():
        print(f"cell {i} failed: {error}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
