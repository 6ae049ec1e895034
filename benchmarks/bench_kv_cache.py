"""Time text generation with a key/value cache against recomputing the whole prefix, in one run.

    python benchmarks/bench_kv_cache.py [--length 500] [--repeats 3] [--threads 1] [--checkpoint PATH]

Both sides generate ``--length`` characters after a short prompt with the
transformer of notebook 10 (the shipped checkpoint, or a fresh model of the
same size when there is none: the cost does not depend on the weights):

- cache:   mllm_utils.generation.generate, which feeds the prompt once and then one
           new token per step, passing the model's key/value cache along
- refeed:  mllm_utils.generation.generate_refeed, which calls the model on the whole
           text so far at every step (no state), so step t costs t tokens' work

Greedy decoding, so both must produce the same characters (checked). The two
take turns (round robin) and the table shows the median, so a busy moment on a
shared machine slows both alike. Goal: the cache at least 5x faster for 500.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from machine import cpu_name  # noqa: E402  (benchmarks/machine.py)

from mllm_utils import chardata  # noqa: E402
from mllm_utils.generation import generate, generate_refeed  # noqa: E402
from mllm_utils.transformer import TransformerLM, load_model, shipped_checkpoint_path  # noqa: E402

PROMPT = "Well, "


def main(argv=None) -> float:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--length", type=int, default=500, help="characters to generate")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs of each side")
    # One thread by default: on the shared 2-core machine these figures come from, two threads made
    # both sides 4-8x slower (every small op waits for the second thread), and the cache side most.
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (0: torch's default)")
    parser.add_argument("--checkpoint", default=None, help="transformer checkpoint (default: the shipped one)")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    path = args.checkpoint or shipped_checkpoint_path()
    if Path(path).is_file():
        model, itos, _ = load_model(path)
        source = f"checkpoint {Path(path).name}"
    else:
        itos = [chardata.UNK, *" abcdefghijklmnopqrstuvwxyz"]
        torch.manual_seed(0)
        model = TransformerLM(len(itos)).eval()
        source = "untrained model of the shipped size (no checkpoint found)"
    prompt = chardata.encode(chardata.tokenize(PROMPT), itos)
    if len(prompt) + args.length > model.context_len:
        raise SystemExit(
            f"error: prompt ({len(prompt)}) + length ({args.length}) exceeds the model's context_len "
            f"({model.context_len}): use a smaller --length"
        )
    n_params = sum(p.numel() for p in model.parameters())
    print(f"{source}: {n_params:,} parameters, context_len {model.context_len}")
    print(f"{cpu_name()} ({platform.machine()}), torch {torch.__version__}, "
          f"{torch.get_num_threads()} threads; generating {args.length} characters after {PROMPT!r}")  # fmt: skip

    sides = {"cache": generate, "refeed": generate_refeed}
    times = {name: [] for name in sides}
    outputs = {}
    generate(model, prompt, 8, greedy=True)  # warm-up
    for _ in range(args.repeats):
        for name, fn in sides.items():
            started = time.perf_counter()
            outputs[name] = fn(model, prompt, args.length, greedy=True)
            times[name].append(time.perf_counter() - started)
    if not torch.equal(outputs["cache"], outputs["refeed"]):
        raise SystemExit("error: the cached and the recomputed generation differ")
    cache, refeed = (statistics.median(times[name]) for name in sides)
    print(f"{'method':<8} {'median s':>9} {'chars/s':>9}")
    for name in sides:
        median = statistics.median(times[name])
        print(f"{name:<8} {median:9.3f} {args.length / median:9.0f}")
    ratio = refeed / cache
    print(f"same {args.length} characters: True; the cache is {ratio:.1f}x faster (goal >= 5x)")
    print("sample:", repr(PROMPT + chardata.decode(outputs["cache"][:80], itos)))
    return ratio


if __name__ == "__main__":
    main()
