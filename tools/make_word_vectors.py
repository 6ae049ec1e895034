"""Train the CBOW word vectors that ship in this folder (the full-size run of notebook 02).

    python tools/make_word_vectors.py --data-dir DIR --splits valid test \
        --min-freq 10 --keep 3000

(the command that made the shipped files; ``DIR`` holds ``wiki.valid.tokens`` and
``wiki.test.tokens``). ``--min-freq 10`` on these 443,248 tokens is the post's
``min_freq`` of 50 on the 2.09 million tokens of the training split, scaled to the
smaller corpus (50 x 0.443 / 2.09 = 10.6), so a word needs about the same share of the
text to get its own vector.

Reads WikiText-2 split files (``wiki.<split>.tokens``) from ``--data-dir`` (or
downloads them with :func:`mllm_utils.wikitext.wikitext2` when it is not
given), prepares them as notebook 02 does, trains the notebook's CBOW model
with the post's settings and writes, atomically:

- ``vocab.json``: the kept words, most frequent first (index 0 is ``<unk>``);
- ``embeddings.pt``: ``{"context": (N, D), "center": (N, D)}`` float16 tensors,
  rows in ``vocab.json`` order; load with ``torch.load(..., weights_only=True)``;
- ``run.json``: settings, data sizes, the share of tokens that are ``<unk>``, loss per
  epoch, the nearest neighbours of "king" in both embeddings (mean row removed, as in
  the notebook), time and machine (for the model card).
- ``counts.json``: how often each kept word occurs in the prepared text, in ``vocab.json``
  order (index 0: the tokens that became ``<unk>``). ``--counts-only`` writes just this
  file from the same data, without training, and refuses to when the vocabulary it builds
  is not the shipped ``vocab.json``.

Introduced in notebook 02 (word vectors).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

import torch

from mllm_utils.cbow import build_vocab, cbow_pairs, encode_paragraphs, wikitext_paragraphs
from mllm_utils.train import Batches, train

OUT = Path(__file__).resolve().parent.parent / "mllm_utils" / "data" / "word_vectors"


class CBOW(torch.nn.Module):
    """The notebook's CBOW model: averaged context embeddings, then a bias-free linear layer."""

    def __init__(self, vocab_size: int, embed_dim: int, max_norm: float = 1.0):
        super().__init__()
        self.embedding = torch.nn.Embedding(vocab_size, embed_dim, max_norm=max_norm)
        self.linear = torch.nn.Linear(embed_dim, vocab_size, bias=False)

    def forward(self, contexts):  # (B, W) -> (B, V)
        return self.linear(self.embedding(contexts).mean(dim=1))


def read_lines(data_dir: str | None, splits: list[str]) -> list[str]:
    if data_dir is None:
        from mllm_utils.wikitext import wikitext2

        return [line for split in splits for line in wikitext2(split)]
    lines = []
    for split in splits:
        with open(Path(data_dir) / f"wiki.{split}.tokens", encoding="utf-8") as f:
            lines.extend(f)
    return lines


def neighbours(weight: torch.Tensor, itos: list[str], word: str, k: int = 10) -> list[list]:
    """The ``k`` nearest words to ``word`` by cosine, after removing the mean row (the notebook's rule)."""
    E = weight.float()
    E = torch.nn.functional.normalize(E - E.mean(dim=0), dim=1)
    values, indices = (E @ E[itos.index(word)]).topk(k + 1)
    return [[itos[i], round(v, 4)] for i, v in zip(indices.tolist()[1:], values.tolist()[1:], strict=True)]


def atomic_write(path: Path, write) -> None:
    tmp = path.with_name(path.name + ".tmp")
    write(tmp)
    os.replace(tmp, path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--splits", nargs="+", default=["train"])
    parser.add_argument("--embed-dim", type=int, default=300)
    parser.add_argument("--window", type=int, default=8)
    parser.add_argument("--min-freq", type=int, default=50)
    parser.add_argument("--batch-size", type=int, default=20000)
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--epochs", type=int, default=7)
    parser.add_argument("--keep", type=int, default=3000, help="ship only the N most frequent words")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=str(OUT))
    parser.add_argument("--counts-only", action="store_true",
                        help="write only counts.json for the vocabulary already in --out (no training)")
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    start = time.perf_counter()
    paragraphs = wikitext_paragraphs(read_lines(args.data_dir, args.splits))
    vocab = build_vocab(paragraphs, min_freq=args.min_freq)
    encoded = encode_paragraphs(paragraphs, vocab)
    out = Path(args.out)
    keep = min(args.keep, len(vocab))
    itos = vocab.get_itos()[:keep]
    counts = torch.bincount(torch.cat(encoded), minlength=len(vocab))[:keep].tolist()
    if args.counts_only:
        shipped = json.loads((out / "vocab.json").read_text(encoding="utf-8"))
        if shipped != itos:
            raise SystemExit(f"--counts-only: the vocabulary built from {args.splits} with --min-freq "
                             f"{args.min_freq} and --keep {args.keep} is not the one in {out / 'vocab.json'}")
        atomic_write(out / "counts.json", lambda p: p.write_text(json.dumps(counts), encoding="utf-8"))
        print(f"wrote {out / 'counts.json'} ({len(counts)} words)")
        return
    contexts, centers = cbow_pairs(encoded, window=args.window)
    unk_share = float((torch.cat(encoded) == 0).float().mean())  # WikiText's own <unk> and rare words
    print(f"{sum(map(len, paragraphs))} tokens, vocab {len(vocab)}, {len(centers)} samples, "
          f"{unk_share:.1%} <unk>")

    model = CBOW(len(vocab), args.embed_dim)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    batches = Batches(contexts, centers, args.batch_size, seed=args.seed)
    total_steps = args.epochs * len(batches)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1 - step / total_steps)
    history = train(model, torch.nn.functional.cross_entropy, optimizer, batches, args.epochs,
                    scheduler=scheduler)
    seconds = time.perf_counter() - start
    print("loss per epoch:", [round(x, 4) for x in history["train"]], f"{seconds:.0f} s")

    tensors = {
        "context": model.embedding.weight.detach()[:keep].half().clone(),
        "center": model.linear.weight.detach()[:keep].half().clone(),
    }
    atomic_write(out / "embeddings.pt", lambda p: torch.save(tensors, p))
    atomic_write(out / "vocab.json", lambda p: p.write_text(json.dumps(itos), encoding="utf-8"))
    atomic_write(out / "counts.json", lambda p: p.write_text(json.dumps(counts), encoding="utf-8"))
    probe = "king" if "king" in itos else itos[1]
    run = {
        "data": {"splits": args.splits, "tokens": sum(map(len, paragraphs)),
                 "paragraphs": len(paragraphs), "samples": len(centers),
                 "unk_share": round(unk_share, 4),
                 "center_unk_share": round(float((centers == 0).float().mean()), 4)},
        "settings": {k: v for k, v in vars(args).items() if k not in ("data_dir", "out")},
        "vocab_size": len(vocab),
        "kept_words": keep,
        "loss_per_epoch": history["train"],
        "neighbours": {probe: {name: neighbours(t, itos, probe) for name, t in tensors.items()}},
        "seconds": round(seconds, 1),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPU cores, torch {torch.__version__}, "
                   f"{args.threads} threads",
    }
    atomic_write(out / "run.json", lambda p: p.write_text(json.dumps(run, indent=1), encoding="utf-8"))


if __name__ == "__main__":
    main()
