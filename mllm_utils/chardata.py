"""The *War and Peace* character data: tokenizer, vocabulary, split, windows, batches.

What the two character models (the LSTM of notebook 07, the transformer of
notebook 10) read, in the order a learner meets it:

1. the post's character tokenizer, a vocabulary (``itos``: ``"<unk>"`` first,
   then the characters sorted) saved as JSON, encoding and decoding, and a
   90/10 train/validation split (:func:`prepare` does all four);
2. input/target windows cut from one long tensor (no Python loop per sample):
   shuffled batches of windows (:func:`batches`), or consecutive ones whose
   rows continue each other, for carrying a hidden state (:func:`stream_batches`);
3. the preprocessed folder the command line keeps (``vocab.json``, ``train.pt``,
   ``val.pt``): :func:`save_data_dir` and :func:`load_data_dir`.

Introduced in notebook 07 (War and Peace); notebook 10 reuses it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import torch

from mllm_utils._validate import (
    check_bool,
    check_ids,
    check_int,
    check_itos,
    check_number,
    check_path,
    check_str,
    check_tensor,
    describe,
)
from mllm_utils.checkpoints import CheckpointError, atomic_write, atomic_write_text, load_file

__all__ = [
    "UNK",
    "batches",
    "build_vocab",
    "decode",
    "encode",
    "load_data_dir",
    "load_vocab",
    "prepare",
    "save_data_dir",
    "save_vocab",
    "split",
    "stream_batches",
    "tokenize",
    "windows",
]

UNK = "<unk>"
VOCAB_FILE, DATA_FILES = "vocab.json", ("train.pt", "val.pt")

_DROP = re.compile(r"[^A-Za-z0-9 \-.;,\n?!]")  # everything but the kept characters
_NEWLINES = re.compile(r"\n+")
_SPACES = re.compile(r" +")


# ---------------------------------------------------------------------------
# Tokenizer, vocabulary, encoding, split
# ---------------------------------------------------------------------------


def tokenize(text: str) -> list[str]:
    """Split ``text`` into characters the way the post does.

    Keep letters, digits, space and ``-.;,?!`` (everything else, including
    ``\\r``, quotes and apostrophes, is dropped), turn each run of newlines
    into one space, squeeze runs of spaces, and return the characters.

    Introduced in notebook 07.
    """
    if not isinstance(text, str):
        raise TypeError(f"tokenize takes a str: text must be a str, got {describe(text)}")
    text = _DROP.sub("", text)
    text = _NEWLINES.sub(" ", text)
    text = _SPACES.sub(" ", text)
    return list(text)


def _check_tokens(tokens, where: str):
    if isinstance(tokens, str):
        return tokens
    if isinstance(tokens, (torch.Tensor, bytes)) or not hasattr(tokens, "__iter__"):
        raise TypeError(
            f"{where}: tokens must be a str or a list of characters (from tokenize), got {describe(tokens)}"
        )
    tokens = tokens if isinstance(tokens, (list, tuple)) else list(tokens)
    kinds = set(map(type, tokens))
    if kinds - {str}:
        raise TypeError(
            f"{where}: tokens must be characters (str), got {sorted(k.__name__ for k in kinds - {str})} items: "
            "pass the text, or tokenize(text)"
        )
    return tokens


def build_vocab(tokens) -> list[str]:
    """The vocabulary as a list ``itos``: ``"<unk>"`` at index 0, then the characters sorted.

    Sorted characters give the same indices as the post's torchtext vocabulary
    (built from the set of characters, ties in frequency broken alphabetically).

    Introduced in notebook 07.
    """
    chars = sorted(set(_check_tokens(tokens, "build_vocab")) - {UNK})
    if not chars:
        raise ValueError("build_vocab got no tokens: is the text empty after tokenize()?")
    return [UNK, *chars]


def _check_vocab(itos, name: str = "itos") -> list[str]:
    check_itos(name, itos, UNK)
    if len(set(itos)) != len(itos):
        twice = next(t for i, t in enumerate(itos) if t in itos[:i])
        raise ValueError(f"{name} holds {twice!r} twice: each token must appear once (build it with build_vocab)")
    return itos


def save_vocab(itos: list[str], path) -> None:
    """Write the vocabulary as JSON (``{"itos": [...]}``), atomically. Introduced in notebook 07."""
    _check_vocab(itos)
    path = check_path("path", path)
    atomic_write_text(path, json.dumps({"itos": list(itos)}, ensure_ascii=False, indent=0))


def load_vocab(path) -> list[str]:
    """Read a vocabulary written by :func:`save_vocab`. Introduced in notebook 07."""
    path = check_path("path", path)
    if not path.is_file():
        raise FileNotFoundError(f"no vocabulary at {path}: write one with save_vocab, or run preprocess")
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path} is not a vocabulary written by save_vocab (not valid JSON: {exc})") from None
    itos = data.get("itos") if isinstance(data, dict) else None
    if not isinstance(itos, list) or not itos or itos[0] != UNK:
        raise ValueError(f"{path} is not a vocabulary written by save_vocab (no itos list starting with {UNK!r})")
    try:
        return _check_vocab(itos, f"{path}'s itos")
    except TypeError as exc:
        raise ValueError(str(exc)) from None


def encode(tokens, itos: list[str]) -> torch.Tensor:
    """Token indices as a 1-D ``torch.long`` tensor; unknown characters become 0 (``<unk>``).

    ``tokens`` is a list of characters (from :func:`tokenize`) or a string.
    Introduced in notebook 07.
    """
    tokens = _check_tokens(tokens, "encode")
    check_itos("itos", itos, UNK)
    stoi = {t: i for i, t in enumerate(itos)}
    return torch.tensor([stoi.get(t, 0) for t in tokens], dtype=torch.long)


def decode(ids, itos: list[str]) -> str:
    """The text for a sequence of indices (a list or a 1-D tensor). Introduced in notebook 07."""
    check_itos("itos", itos)
    if isinstance(ids, torch.Tensor):
        check_tensor("ids", ids, integer=True, hint="decode takes token ids, e.g. logits.argmax(-1)")
        if ids.ndim > 1:
            raise ValueError(f"ids must be a 1-D sequence of token ids, got shape {tuple(ids.shape)}: decode each row")
        check_ids("ids", ids, len(itos), hint="were they made with another vocabulary?")
        return "".join(itos[i] for i in ids.reshape(-1).tolist())
    if isinstance(ids, (str, bytes)) or not hasattr(ids, "__iter__"):
        raise TypeError(f"ids must be a list or 1-D tensor of token ids, got {describe(ids)}")
    ids = list(ids)
    for i in ids:
        check_int("each id", i, hint="decode takes token ids (ints)")
        if not 0 <= i < len(itos):
            raise ValueError(
                f"ids holds {i}, outside the vocabulary's ids 0 to {len(itos) - 1}: were they made with "
                "another vocabulary?"
            )
    return "".join(itos[i] for i in ids)


def split(encoded: torch.Tensor, train_fraction: float = 0.9) -> tuple[torch.Tensor, torch.Tensor]:
    """The first ``train_fraction`` of the encoded text for training, the rest for validation.

    Like the post, the cut is at ``int(train_fraction * len(encoded))`` and
    nothing is shuffled: the validation text is the end of the novel, which the
    model never sees. Introduced in notebook 07.
    """
    check_tensor("encoded", encoded, ndim=1, hint="encode the text first: split(encode(tokens, itos))")
    check_number("train_fraction", train_fraction, 0, 1, low_open=True, high_open=True,
                 hint="it must lie strictly between 0 and 1, e.g. 0.9")  # fmt: skip
    cut = int(train_fraction * len(encoded))
    if cut < 2 or len(encoded) - cut < 2:
        raise ValueError(
            f"the text is too short to split ({len(encoded)} tokens): each part needs at least 2"
        )
    return encoded[:cut], encoded[cut:]


def prepare(text: str | None = None, itos: list[str] | None = None, train_fraction: float = 0.9):
    """Tokenize, build (or reuse) the vocabulary, encode and split: ``(itos, train, val)``.

    ``text`` defaults to the shipped, hash-checked novel without its Gutenberg
    header and footer. Pass ``itos`` (e.g. a checkpoint's) to encode with an
    existing vocabulary. Introduced in notebook 07.
    """
    check_str("text", text, none_ok=True, hint="pass the text itself (read the file first), or None for the novel")
    if itos is not None:
        _check_vocab(itos)
    check_number("train_fraction", train_fraction, 0, 1, low_open=True, high_open=True)
    if text is None:
        from mllm_utils.data import war_and_peace

        text = war_and_peace()
    tokens = tokenize(text)
    itos = itos or build_vocab(tokens)
    train_data, val_data = split(encode(tokens, itos), train_fraction)
    return itos, train_data, val_data


# ---------------------------------------------------------------------------
# Batches: windows cut from one long tensor
# ---------------------------------------------------------------------------


def _check_data(data, seq_len, offset: int = 0) -> torch.Tensor:
    check_tensor("data", data, ndim=1, integer=True, hint="a 1-D tensor of token ids, e.g. from encode()")
    check_int("seq_len", seq_len, 1)
    check_int("offset", offset, 0, hint="the first token to read (it does not count from the end)")
    if len(data) - offset < seq_len + 1:
        after = f" ({max(0, len(data) - offset)} from offset={offset})" if offset else ""
        raise ValueError(
            f"data has {len(data)} tokens{after}, too few for one window of seq_len={seq_len} plus its "
            "target: use a shorter seq_len or more text"
        )
    return data


def windows(data: torch.Tensor, seq_len: int, stride: int | None = None, offset: int = 0):
    """All input/target windows as two ``(N, seq_len)`` views of ``data`` (no copy).

    Window ``i`` starts at ``offset + i * stride``; its target is the same
    window shifted one token to the right (teacher forcing). ``stride=1`` gives
    the post's data set (every position starts a window); the default
    ``stride=seq_len`` gives non-overlapping windows, so each token is a
    target once per epoch. Introduced in notebook 07.
    """
    check_int("seq_len", seq_len, 1)
    check_int("stride", stride, 1, none_ok=True, hint="the distance between window starts (None: seq_len)")
    stride = seq_len if stride is None else stride
    _check_data(data, seq_len, offset)
    X = data[offset:-1].unfold(0, seq_len, stride)  # (N, seq_len), a view
    Y = data[offset + 1 :].unfold(0, seq_len, stride)
    return X, Y[: len(X)]


def batches(
    data: torch.Tensor,
    batch_size: int,
    seq_len: int,
    stride: int | None = None,
    shuffle: bool = True,
    generator: torch.Generator | None = None,
    offset: int = 0,
    drop_last: bool = False,
):
    """Yield ``(X, Y)`` batches of shape ``(batch_size, seq_len)`` from :func:`windows`.

    One ``randperm`` shuffles the window order and one indexing operation per
    batch gathers the windows: no Python loop per sample. The arguments are
    checked when it is called; the shuffle happens at the first batch.
    Introduced in notebook 07.
    """
    check_int("batch_size", batch_size, 1)
    check_bool("shuffle", shuffle)
    check_bool("drop_last", drop_last)
    if generator is not None and not isinstance(generator, torch.Generator):
        raise TypeError(f"generator must be a torch.Generator or None, got {describe(generator)}")
    X, Y = windows(data, seq_len, stride, offset)

    def gather():
        order = torch.randperm(len(X), generator=generator) if shuffle else torch.arange(len(X))
        stop = len(X) - len(X) % batch_size if drop_last else len(X)
        for start in range(0, stop, batch_size):
            idx = order[start : start + batch_size]
            yield X[idx], Y[idx]

    return gather()


def stream_batches(data: torch.Tensor, batch_size: int, seq_len: int, offset: int = 0):
    """Yield consecutive ``(X, Y)`` batches whose row ``b`` continues row ``b`` of the last batch.

    The text (from ``offset``) is cut into ``batch_size`` equal streams laid
    side by side; batch ``k`` holds characters ``k*seq_len ... (k+1)*seq_len - 1``
    of every stream. A model can therefore carry its hidden state from one
    batch to the next (truncated backpropagation through time) and see context
    far beyond ``seq_len``. Introduced in notebook 07.
    """
    check_int("batch_size", batch_size, 1)
    _check_data(data, seq_len, offset)
    data = data[offset:]
    stream_len = (len(data) - 1) // batch_size
    if stream_len < seq_len:
        raise ValueError(
            f"{len(data)} tokens give streams of {stream_len} tokens for batch_size={batch_size}, "
            f"shorter than seq_len={seq_len}: use a smaller batch_size or seq_len"
        )
    inputs = data[: batch_size * stream_len].view(batch_size, stream_len)
    targets = data[1 : batch_size * stream_len + 1].view(batch_size, stream_len)

    def consecutive():
        for start in range(0, stream_len - seq_len + 1, seq_len):
            yield inputs[:, start : start + seq_len], targets[:, start : start + seq_len]

    return consecutive()


# ---------------------------------------------------------------------------
# The preprocessed folder of the command line
# ---------------------------------------------------------------------------


def _rerun(folder: Path) -> str:
    return f"re-run `mllm-war-and-peace preprocess --data {folder}`"


def save_data_dir(folder, itos: list[str], train_data: torch.Tensor, val_data: torch.Tensor) -> None:
    """Write ``vocab.json``, ``train.pt`` and ``val.pt`` into ``folder``, so that a kill leaves no mix.

    ``vocab.json`` marks a complete folder: it is removed first and written
    last (each file atomically), so an interrupted run leaves a folder without
    it, which :func:`load_data_dir` reports and ``train`` preprocesses again.
    """
    folder = check_path("folder", folder)
    _check_vocab(itos)
    for name, part in (("train_data", train_data), ("val_data", val_data)):
        check_tensor(name, part, ndim=1, integer=True)
    if folder.exists() and not folder.is_dir():
        raise NotADirectoryError(f"folder {folder} is a file: name a folder for vocab.json, train.pt and val.pt")
    (folder / VOCAB_FILE).unlink(missing_ok=True)
    dtype = torch.uint8 if len(itos) <= 256 else torch.int32  # small files; widened on load
    for name, part in zip(DATA_FILES, (train_data, val_data), strict=True):
        atomic_write(folder / name, lambda f, part=part: torch.save(part.to(dtype), f))
    save_vocab(itos, folder / VOCAB_FILE)


def is_data_dir(folder) -> bool:
    """True when ``folder`` holds a complete preprocessed data set (its ``vocab.json`` comes last)."""
    return (Path(folder) / VOCAB_FILE).is_file()


def load_data_dir(folder):
    """``(itos, train_data, val_data)`` from a folder written by :func:`save_data_dir` (or ``preprocess``).

    A folder that lacks a file, or whose files do not fit together, is reported
    with the command that rebuilds it.
    """
    folder = check_path("folder", folder)
    present = [name for name in (VOCAB_FILE, *DATA_FILES) if (folder / name).is_file()]
    if len(present) < 3:
        missing = ", ".join(name for name in (VOCAB_FILE, *DATA_FILES) if name not in present)
        state = "is incomplete (an interrupted preprocess?)" if present else "holds no preprocessed data"
        raise FileNotFoundError(f"{folder} {state}: {missing} missing; {_rerun(folder)}")
    itos = load_vocab(folder / VOCAB_FILE)
    parts = []
    for name in DATA_FILES:
        try:
            part = load_file(folder / name)
            check_tensor(name, part, ndim=1, integer=True)
        except (CheckpointError, TypeError, ValueError) as exc:
            raise ValueError(f"{folder / name} is not usable ({exc}); {_rerun(folder)}") from None
        if len(part) and int(part.max()) >= len(itos):
            raise ValueError(f"{folder / name} holds ids beyond {folder / VOCAB_FILE}'s {len(itos)} entries "
                             f"(files of two runs?); {_rerun(folder)}")  # fmt: skip
        parts.append(part.long())
    return itos, parts[0], parts[1]

