"""WikiText preprocessing and CBOW training pairs, built with tensor operations.

The word2vec lesson trains a CBOW model: predict a *center* word from the
``window`` words around it (``window // 2`` on each side). This module turns
raw WikiText lines into token lists the way the post does
(:func:`wikitext_paragraphs`), builds the vocabulary (:func:`build_vocab`),
encodes the paragraphs (:func:`encode_paragraphs`) and cuts them into
center/context pairs that never cross a paragraph (:func:`cbow_pairs`).

:func:`cbow_pairs` does the cutting for the whole corpus in a few tensor
operations (one ``unfold`` over all tokens, then a mask that drops windows
spanning two paragraphs). :func:`cbow_pairs_python` is the post's way, one
Python sample at a time; it is kept as the reference the tests compare with
and the baseline of ``benchmarks/bench_cbow_pairs.py``.

Introduced in notebook 02 (word vectors).
"""

from __future__ import annotations

import array
import re
from collections import Counter
from collections.abc import Iterable, Sequence

import torch

from mllm_utils._validate import check_int, describe
from mllm_utils.text import Vocab, basic_english, build_vocab_from_iterator

__all__ = [
    "build_vocab",
    "cbow_pairs",
    "cbow_pairs_python",
    "encode_paragraphs",
    "wikitext_paragraphs",
]

_LEADING_SPACE = re.compile(r"^\s+")


def wikitext_paragraphs(lines: Iterable[str]) -> list[list[str]]:
    """Tokenize WikiText lines into paragraphs, as the post prepares them.

    Each line of WikiText is a paragraph, a blank line, or a title such as
    ``" = Homarus gammarus = "``. Leading white space is stripped, every ``@``
    is removed (WikiText writes ``3 @.@ 5`` for ``3.5`` and ``@-@`` for a
    hyphen inside a word), title lines are dropped, and the rest goes through
    torchtext's ``basic_english`` tokenizer. Lines with no tokens are dropped,
    so every returned paragraph is a non-empty list of tokens.
    """
    if isinstance(lines, str):
        raise TypeError(
            "wikitext_paragraphs takes an iterable of lines, not one string: "
            "pass text.splitlines(keepends=True) or a WikiText split."
        )
    if not hasattr(lines, "__iter__"):
        raise TypeError(f"lines must be an iterable of str lines (a WikiText split), got {describe(lines)}")
    paragraphs = []
    for i, line in enumerate(lines):
        if not isinstance(line, str):
            raise TypeError(f"lines[{i}] must be a str (one line of text), got {describe(line)}")
        line = _LEADING_SPACE.sub("", line).replace("@", "")
        if line.startswith("="):  # a title or section heading
            continue
        tokens = basic_english(line)
        if tokens:
            paragraphs.append(tokens)
    return paragraphs


def build_vocab(paragraphs: Iterable[list[str]], min_freq: int = 50) -> Vocab:
    """A vocabulary of the tokens seen at least ``min_freq`` times, ``<unk>`` first and default.

    Rare words all map to ``<unk>`` (index 0), which WikiText itself already
    uses for its rarest words. A ``min_freq`` that keeps no word at all (every
    token would be ``<unk>``) is refused with a ``ValueError`` that says how
    often the most frequent word occurs, so a learner can pick a value that works.
    """
    check_int("min_freq", min_freq, 1, hint="a word must be seen this many times to get its own index")
    paragraphs = _token_lists(paragraphs)
    vocab = build_vocab_from_iterator(paragraphs, min_freq=min_freq, specials=["<unk>"])
    if len(vocab) == 1:  # only <unk>: every token of the corpus would map to it
        counts = Counter(token for p in paragraphs for token in p if token != "<unk>")
        if not counts:
            raise ValueError(
                f"paragraphs holds no word (got {len(paragraphs)} paragraphs with "
                f"{sum(map(len, paragraphs))} tokens, none of them other than '<unk>'): "
                "build the vocabulary from tokenized text (wikitext_paragraphs)."
            )
        word, most = counts.most_common(1)[0]
        raise ValueError(
            f"min_freq={min_freq} keeps no word of this corpus, so every token would be '<unk>': "
            f"its most frequent word, {word!r}, occurs {most} times in {sum(map(len, paragraphs)):,} tokens. "
            f"Use a min_freq of at most {most} (the post's 50 is meant for WikiText-2's two million "
            "tokens; scale it down with the corpus)."
        )
    vocab.set_default_index(vocab["<unk>"])
    return vocab


def _token_lists(paragraphs):
    """``paragraphs`` as a list of token lists; a string (untokenized text) is refused, not split into characters."""
    if isinstance(paragraphs, (str, torch.Tensor)) or not hasattr(paragraphs, "__iter__"):
        raise TypeError(
            f"paragraphs must be a list of token lists (from wikitext_paragraphs), got {describe(paragraphs)}"
        )
    paragraphs = list(paragraphs)
    for i, p in enumerate(paragraphs):
        if isinstance(p, str) or not isinstance(p, (list, tuple)):
            raise TypeError(
                f"paragraphs[{i}] must be a list of tokens, got {describe(p)}: tokenize the lines first "
                "(wikitext_paragraphs), or a string is counted character by character"
            )
    return paragraphs


def encode_paragraphs(paragraphs: Sequence[list[str]], vocab: Vocab) -> list[torch.Tensor]:
    """Each paragraph's tokens as a 1-D tensor of vocabulary indices (unknown words: the default)."""
    if not isinstance(vocab, Vocab):
        raise TypeError(f"vocab must be a mllm_utils.text.Vocab (from build_vocab), got {describe(vocab)}")
    paragraphs = _token_lists(paragraphs)
    stoi, default = vocab.get_stoi(), vocab.get_default_index()
    ids = [stoi.get(token, default) for p in paragraphs for token in p]
    if default is None and None in ids:
        missing = next(t for p in paragraphs for t in p if t not in stoi)
        raise KeyError(
            f"{missing!r} is not in the vocabulary and it has no default index: "
            "call vocab.set_default_index(vocab['<unk>']) first."
        )
    # One tensor for the whole corpus (via a C array: far faster than torch.tensor(list)),
    # then one view of it per paragraph.
    flat = (
        torch.frombuffer(array.array("q", ids), dtype=torch.int64).clone() if ids else torch.zeros(0, dtype=torch.long)
    )
    return list(torch.split(flat, [len(p) for p in paragraphs]))


def _check_window(window) -> int:
    if isinstance(window, bool) or not isinstance(window, int):
        raise TypeError(f"window must be an int, got {type(window).__name__}")
    if window <= 0 or window % 2:
        raise ValueError(
            f"window must be a positive even number (half of it on each side of the center "
            f"word), got {window}; the post uses window=8."
        )
    return window


def _as_index_tensors(paragraphs) -> list[torch.Tensor]:
    if isinstance(paragraphs, torch.Tensor):
        raise TypeError(
            "cbow_pairs takes a list of paragraphs (one 1-D index tensor or list of ints each), "
            f"not one tensor of shape {tuple(paragraphs.shape)}: wrap a single paragraph as [ids]."
        )
    tensors = []
    for i, p in enumerate(paragraphs):
        t = torch.as_tensor(p)
        if t.ndim != 1:
            raise ValueError(
                f"paragraph {i} has shape {tuple(t.shape)}; each paragraph must be a 1-D "
                "sequence of token indices (use encode_paragraphs)."
            )
        if t.numel() and (t.is_floating_point() or t.is_complex() or t.dtype == torch.bool):
            raise TypeError(f"paragraph {i} holds {t.dtype} values; token indices must be integers.")
        if t.numel() and int(t.min()) < 0:
            raise ValueError(f"paragraph {i} holds the negative index {int(t.min())}; token indices start at 0.")
        tensors.append(t.long())
    if not tensors:
        raise ValueError("the corpus is empty: cbow_pairs got no paragraphs.")
    return tensors


def cbow_pairs(paragraphs: Sequence, window: int = 8) -> tuple[torch.Tensor, torch.Tensor]:
    """All full-window CBOW samples of a corpus: ``(contexts (N, window), centers (N,))``.

    A sample is a center position with ``window // 2`` tokens on each side, all
    from the same paragraph (positions too close to a paragraph's edge are
    skipped, as in the post's notebook). Rows come in corpus order, like the post's
    generator.

    How, without a Python loop per sample: concatenate all paragraphs into one
    tensor, take every stretch of ``window + 1`` consecutive tokens with
    ``unfold``, and keep a stretch only when its first and last token belong
    to the same paragraph (paragraphs are contiguous, so then all of it does).
    """
    window = _check_window(window)
    tensors = _as_index_tensors(paragraphs)
    tokens = torch.cat(tensors)
    lengths = torch.tensor([len(t) for t in tensors])
    paragraph_of = torch.repeat_interleave(torch.arange(len(tensors)), lengths)
    if len(tokens) <= window:
        raise ValueError(
            f"no paragraph has the {window + 1} tokens one sample needs (window {window} plus "
            f"the center; the corpus has {len(tokens)} tokens): use a smaller window or more text."
        )
    # Stretch i covers tokens i .. i + window; keep it when both ends share a paragraph.
    keep = (paragraph_of[:-window] == paragraph_of[window:]).nonzero().squeeze(1)
    # unfold gives every stretch as a view (no copy); index_select copies only the kept ones.
    stretches = tokens.unfold(0, window + 1, 1).index_select(0, keep)  # (N, window + 1)
    half = window // 2
    contexts = torch.cat([stretches[:, :half], stretches[:, half + 1 :]], dim=1)
    centers = stretches[:, half].contiguous()
    if len(centers) == 0:
        raise ValueError(
            f"no paragraph has the {window + 1} tokens one sample needs (window {window} plus "
            "the center): use a smaller window or longer paragraphs."
        )
    return contexts, centers


def cbow_pairs_python(paragraphs: Sequence, window: int = 8) -> tuple[torch.Tensor, torch.Tensor]:
    """The same samples as :func:`cbow_pairs`, built the post's way: one Python sample at a time.

    Slow on purpose: it is the reference for the tests and the baseline of
    ``benchmarks/bench_cbow_pairs.py``.
    """
    window = _check_window(window)
    half = window // 2
    centers, contexts = [], []
    for p in _as_index_tensors(paragraphs):
        p = p.tolist()
        for i, center in enumerate(p):
            context = p[max(0, i - half) : i] + p[i + 1 : i + half + 1]
            if len(context) == window:  # the post's notebook drops samples near a paragraph's edge
                centers.append(center)
                contexts.append(context)
    if not centers:
        raise ValueError(f"no paragraph has the {window + 1} tokens one sample needs.")
    return torch.tensor(contexts, dtype=torch.long), torch.tensor(centers, dtype=torch.long)
