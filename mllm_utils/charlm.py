"""A character-level LSTM language model for *War and Peace*: data, model, training, CLI.

Everything the project of notebook 07 needs, in the order a learner meets it:

1. the post's character tokenizer, a vocabulary saved as JSON, encoding and a
   90/10 train/validation split;
2. batches of windows cut from one long tensor (no Python loop per sample),
   either shuffled windows or consecutive ones for carrying the hidden state;
3. the model: embedding, 4-layer LSTM, linear head (the post's sizes);
4. training with a validation loss each epoch and a checkpoint each epoch,
   written atomically and holding only tensors and plain data;
5. a command line: ``python -m mllm_utils.charlm {preprocess,train,predict,evaluate}``.

Introduced in notebook 07 (War and Peace); notebook 10 reuses the data functions.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import pickle
import re
import sys
import tempfile
import time
from pathlib import Path

import torch
from torch import nn

from mllm_utils.runtime import progress

__all__ = [
    "CharLSTM",
    "UnsafeCheckpointError",
    "batches",
    "build_vocab",
    "decode",
    "encode",
    "evaluate",
    "load_checkpoint",
    "load_model",
    "load_vocab",
    "lr_at",
    "main",
    "plot_history",
    "prepare",
    "save_checkpoint",
    "save_vocab",
    "split",
    "stream_batches",
    "tokenize",
    "train",
    "windows",
]

UNK = "<unk>"
CHECKPOINT_FORMAT = "mllm-charlm-1"
SHIPPED_CHECKPOINT = "war_and_peace_lstm.pt"

# The post's defaults (its model.py and train.py).
EMBED_DIM, HIDDEN_DIM, NUM_LAYERS = 32, 128, 4
POST_SEQ_LEN, POST_BATCH_SIZE, POST_LR, POST_EPOCHS, POST_DROPOUT = 64, 1024, 1e-3, 7, 0.2

_DROP = re.compile(r"[^A-Za-z0-9 \-.;,\n?!]")  # everything but the kept characters
_NEWLINES = re.compile(r"\n+")
_SPACES = re.compile(r" +")


# ---------------------------------------------------------------------------
# 1. Tokenizer, vocabulary, encoding, split
# ---------------------------------------------------------------------------


def tokenize(text: str) -> list[str]:
    """Split ``text`` into characters the way the post does.

    Keep letters, digits, space and ``-.;,?!`` (everything else, including
    ``\\r``, quotes and apostrophes, is dropped), turn each run of newlines
    into one space, squeeze runs of spaces, and return the characters.

    Introduced in notebook 07.
    """
    if not isinstance(text, str):
        raise TypeError(f"tokenize takes a str, got {type(text).__name__}")
    text = _DROP.sub("", text)
    text = _NEWLINES.sub(" ", text)
    text = _SPACES.sub(" ", text)
    return list(text)


def build_vocab(tokens) -> list[str]:
    """The vocabulary as a list ``itos``: ``"<unk>"`` at index 0, then the characters sorted.

    Sorted characters give the same indices as the post's torchtext vocabulary
    (built from the set of characters, ties in frequency broken alphabetically).

    Introduced in notebook 07.
    """
    chars = sorted(set(tokens) - {UNK})
    if not chars:
        raise ValueError("build_vocab got no tokens: is the text empty after tokenize()?")
    return [UNK, *chars]


def save_vocab(itos: list[str], path) -> None:
    """Write the vocabulary as JSON (``{"itos": [...]}``), atomically. Introduced in notebook 07."""
    _atomic_write_text(Path(path), json.dumps({"itos": list(itos)}, ensure_ascii=False, indent=0))


def load_vocab(path) -> list[str]:
    """Read a vocabulary written by :func:`save_vocab`. Introduced in notebook 07."""
    with open(path, encoding="utf-8") as f:
        itos = json.load(f).get("itos")
    if not isinstance(itos, list) or not itos or itos[0] != UNK:
        raise ValueError(f"{path} is not a vocabulary written by save_vocab (no itos list starting with {UNK!r})")
    return itos


def encode(tokens, itos: list[str]) -> torch.Tensor:
    """Token indices as a 1-D ``torch.long`` tensor; unknown characters become 0 (``<unk>``).

    ``tokens`` is a list of characters (from :func:`tokenize`) or a string.
    Introduced in notebook 07.
    """
    stoi = {t: i for i, t in enumerate(itos)}
    return torch.tensor([stoi.get(t, 0) for t in tokens], dtype=torch.long)


def decode(ids, itos: list[str]) -> str:
    """The text for a sequence of indices (a list or a 1-D tensor). Introduced in notebook 07."""
    if isinstance(ids, torch.Tensor):
        ids = ids.tolist()
    return "".join(itos[i] for i in ids)


def split(encoded: torch.Tensor, train_fraction: float = 0.9) -> tuple[torch.Tensor, torch.Tensor]:
    """The first ``train_fraction`` of the encoded text for training, the rest for validation.

    Like the post, the cut is at ``int(train_fraction * len(encoded))`` and
    nothing is shuffled: the validation text is the end of the novel, which the
    model never sees. Introduced in notebook 07.
    """
    if not 0.0 < train_fraction < 1.0:
        raise ValueError(f"train_fraction must lie strictly between 0 and 1, got {train_fraction}")
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
    if text is None:
        from mllm_utils.data import war_and_peace

        text = war_and_peace()
    tokens = tokenize(text)
    itos = itos or build_vocab(tokens)
    train_data, val_data = split(encode(tokens, itos), train_fraction)
    return itos, train_data, val_data


# ---------------------------------------------------------------------------
# 2. Batches: windows cut from one long tensor
# ---------------------------------------------------------------------------


def _check_data(data: torch.Tensor, seq_len: int) -> None:
    if not isinstance(data, torch.Tensor) or data.ndim != 1:
        raise ValueError("data must be a 1-D tensor of token indices (e.g. from encode())")
    if seq_len < 1:
        raise ValueError(f"seq_len must be at least 1, got {seq_len}")
    if len(data) < seq_len + 1:
        raise ValueError(
            f"data has {len(data)} tokens, too few for one window of seq_len={seq_len} plus its "
            "target: use a shorter seq_len or more text"
        )


def windows(data: torch.Tensor, seq_len: int, stride: int | None = None, offset: int = 0):
    """All input/target windows as two ``(N, seq_len)`` views of ``data`` (no copy).

    Window ``i`` starts at ``offset + i * stride``; its target is the same
    window shifted one token to the right (teacher forcing). ``stride=1`` gives
    the post's data set (every position starts a window); the default
    ``stride=seq_len`` gives non-overlapping windows, so each token is a
    target once per epoch. Introduced in notebook 07.
    """
    stride = seq_len if stride is None else stride
    if stride < 1:
        raise ValueError(f"stride must be at least 1, got {stride}")
    _check_data(data[offset:], seq_len)
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
    batch gathers the windows: no Python loop per sample. Introduced in notebook 07.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, got {batch_size}")
    X, Y = windows(data, seq_len, stride, offset)
    order = torch.randperm(len(X), generator=generator) if shuffle else torch.arange(len(X))
    stop = len(X) - len(X) % batch_size if drop_last else len(X)
    for start in range(0, stop, batch_size):
        idx = order[start : start + batch_size]
        yield X[idx], Y[idx]


def stream_batches(data: torch.Tensor, batch_size: int, seq_len: int, offset: int = 0):
    """Yield consecutive ``(X, Y)`` batches whose row ``b`` continues row ``b`` of the last batch.

    The text (from ``offset``) is cut into ``batch_size`` equal streams laid
    side by side; batch ``k`` holds characters ``k*seq_len ... (k+1)*seq_len - 1``
    of every stream. A model can therefore carry its hidden state from one
    batch to the next (truncated backpropagation through time) and see context
    far beyond ``seq_len``. Introduced in notebook 07.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, got {batch_size}")
    data = data[offset:]
    stream_len = (len(data) - 1) // batch_size
    if stream_len < seq_len:
        raise ValueError(
            f"{len(data)} tokens give streams of {stream_len} tokens for batch_size={batch_size}, "
            f"shorter than seq_len={seq_len}: use a smaller batch_size or seq_len"
        )
    inputs = data[: batch_size * stream_len].view(batch_size, stream_len)
    targets = data[1 : batch_size * stream_len + 1].view(batch_size, stream_len)
    for start in range(0, stream_len - seq_len + 1, seq_len):
        yield inputs[:, start : start + seq_len], targets[:, start : start + seq_len]


# ---------------------------------------------------------------------------
# 3. The model
# ---------------------------------------------------------------------------


class CharLSTM(nn.Module):
    """Embedding, multi-layer LSTM, linear head: the post's model, batch first.

    ``forward(x, state=None)`` takes indices ``(B, T)`` and an optional
    ``(h, c)`` state and returns logits ``(B, T, vocab_size)`` and the new
    state, so generation can feed one character at a time. The defaults are
    the post's sizes (embedding 32, hidden 128, 4 layers); the post trained
    with dropout 0.2 between the LSTM layers.

    Introduced in notebook 07.
    """

    def __init__(
        self,
        vocab_size: int,
        embed_dim: int = EMBED_DIM,
        hidden_dim: int = HIDDEN_DIM,
        num_layers: int = NUM_LAYERS,
        dropout: float = 0.0,
    ):
        super().__init__()
        self.config = {
            "vocab_size": vocab_size,
            "embed_dim": embed_dim,
            "hidden_dim": hidden_dim,
            "num_layers": num_layers,
            "dropout": dropout,
        }
        self.embedding = nn.Embedding(vocab_size, embed_dim)
        self.lstm = nn.LSTM(
            embed_dim, hidden_dim, num_layers=num_layers, dropout=dropout if num_layers > 1 else 0.0,
            batch_first=True,
        )
        self.head = nn.Linear(hidden_dim, vocab_size)

    def forward(self, x: torch.Tensor, state=None):
        """Logits ``(B, T, V)`` for indices ``(B, T)``, and the LSTM's new ``(h, c)`` state.

        A single character (``T == 1``, the generation loop's case) goes through
        :meth:`step`; longer inputs through ``nn.LSTM``. Both give the same numbers.
        """
        if x.ndim == 2 and x.shape[1] == 1:
            logits, state = self.step(x[:, 0], state)
            return logits[:, None], state
        out, state = self.lstm(self.embedding(x), state)  # (B, T, H)
        return self.head(out), state

    def step(self, x: torch.Tensor, state=None):
        """One character per row: indices ``(B,)`` -> logits ``(B, V)`` and the new ``(h, c)``.

        Runs the LSTM cell layer by layer with ``nn.LSTM``'s own weights:
        ``torch.lstm_cell`` (the function behind ``nn.LSTMCell``) computes the
        equations notebook 07 writes out by hand, in a few fused operations.
        On a CPU this is about twice as fast as calling ``nn.LSTM`` for one
        time step: its sequence kernel has a fixed start-up cost larger than
        one step's arithmetic. Dropout between layers, as in ``nn.LSTM``, only
        in training mode.
        """
        lstm = self.lstm
        if state is None:
            zeros = torch.zeros(lstm.num_layers, x.shape[0], lstm.hidden_size, device=x.device)
            state = (zeros, zeros)
        h, c = state
        layer_input = self.embedding(x)  # (B, E)
        new_h, new_c = [], []
        for layer in range(lstm.num_layers):
            weights = [getattr(lstm, f"{name}_l{layer}") for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")]
            h_layer, c_layer = torch.lstm_cell(layer_input, (h[layer], c[layer]), *weights)
            new_h.append(h_layer)
            new_c.append(c_layer)
            last = layer == lstm.num_layers - 1
            layer_input = h_layer if last else nn.functional.dropout(h_layer, lstm.dropout, self.training)
        return self.head(layer_input), (torch.stack(new_h), torch.stack(new_c))


def _detach(state):
    return None if state is None else tuple(s.detach() for s in state)


# ---------------------------------------------------------------------------
# 4. Checkpoints: atomic writes, safe loads
# ---------------------------------------------------------------------------


class UnsafeCheckpointError(pickle.UnpicklingError):
    """A checkpoint holds objects that only a full (code-running) unpickle could load."""


def _atomic_write(path: Path, write) -> None:
    """Write to a temporary file in the same folder, then rename it over ``path``.

    ``os.replace`` is atomic on one file system: a reader (or a crash) sees the
    old file or the new one, never half of one.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)  # mkstemp makes it private (0600); a checkpoint is an ordinary file
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def _atomic_write_text(path: Path, text: str) -> None:
    _atomic_write(path, lambda f: f.write(text.encode("utf-8")))


def save_checkpoint(checkpoint: dict, path) -> None:
    """Save a checkpoint dict (state dicts and plain data only) atomically with ``torch.save``.

    Introduced in notebook 07.
    """
    _atomic_write(Path(path), lambda f: torch.save(checkpoint, f))


def load_checkpoint(path, map_location="cpu") -> dict:
    """Load a checkpoint with ``weights_only=True``; refuse one that would run code.

    Raises :class:`UnsafeCheckpointError` (an ``UnpicklingError``) with an
    explanation when the file holds anything but tensors and plain data.
    Introduced in notebook 07.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(
            f"no checkpoint at {path}: train one with `python -m mllm_utils.charlm train "
            f"--checkpoint {path}` or leave --checkpoint out to use the shipped model"
        )
    try:
        checkpoint = torch.load(path, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as exc:
        raise UnsafeCheckpointError(
            f"refused to load {path}: it holds Python objects beyond tensors and plain data, and "
            "unpickling them could run arbitrary code. Only load checkpoints written by "
            "mllm_utils.charlm (state dicts, lists, dicts, numbers, strings); if you trust the "
            f"file's source, re-save its state_dict. Details: {exc}"
        ) from exc
    if not isinstance(checkpoint, dict) or checkpoint.get("format") != CHECKPOINT_FORMAT:
        raise ValueError(
            f"{path} is not a character-model checkpoint (expected a dict with format "
            f"{CHECKPOINT_FORMAT!r}); was it written by mllm_utils.charlm?"
        )
    return checkpoint


def shipped_checkpoint_path() -> Path:
    """Where the pretrained checkpoint lives inside the package. Introduced in notebook 07."""
    return Path(__file__).resolve().parent / "data" / SHIPPED_CHECKPOINT


def load_model(path=None, map_location="cpu"):
    """``(model, itos, checkpoint)`` from a checkpoint; the shipped one when ``path`` is None.

    The model comes back in eval mode. Introduced in notebook 07.
    """
    checkpoint = load_checkpoint(path or shipped_checkpoint_path(), map_location)
    model = CharLSTM(**checkpoint["model_config"])
    model.load_state_dict(checkpoint["model"])
    model.eval()
    return model, checkpoint["itos"], checkpoint


# ---------------------------------------------------------------------------
# 5. Training and evaluation
# ---------------------------------------------------------------------------


def lr_at(step: int, total_steps: int, lr: float, lr_min: float, warmup: int) -> float:
    """Learning rate at ``step``: linear warm-up, then cosine decay from ``lr`` to ``lr_min``.

    Introduced in notebook 07.
    """
    if step < warmup:
        return lr * (step + 1) / warmup
    progress = min(1.0, (step - warmup) / max(1, total_steps - warmup))
    return lr_min + 0.5 * (lr - lr_min) * (1.0 + math.cos(math.pi * progress))


@torch.no_grad()
def evaluate(
    model: nn.Module,
    data: torch.Tensor,
    seq_len: int = POST_SEQ_LEN,
    batch_size: int = 256,
    carry_state: bool = False,
    max_tokens: int | None = None,
    device="cpu",
) -> float:
    """Mean cross-entropy (nats per character) of ``model`` on ``data``.

    ``carry_state=False`` is the post's protocol: non-overlapping windows of
    ``seq_len`` characters, each read from a fresh (zero) state. This averages
    over the same context lengths (0 to ``seq_len - 1``) as the post's
    overlapping windows, so the numbers compare. ``carry_state=True`` reads
    the text as ``batch_size`` long streams and carries the state, so every
    character (but the first few) sees long context. ``max_tokens`` evaluates
    on a prefix only (for quick checks). Introduced in notebook 07.
    """
    if max_tokens is not None:
        data = data[: max_tokens + 1]
    was_training = model.training
    model.eval()
    model.to(device)
    total, count, state = 0.0, 0, None
    if carry_state:
        batch_size = max(1, min(batch_size, (len(data) - 1) // seq_len))
        chunks = stream_batches(data, batch_size, seq_len)
    else:
        chunks = batches(data, batch_size, seq_len, shuffle=False)
    for X, Y in chunks:
        logits, state = model(X.to(device), state if carry_state else None)
        loss = nn.functional.cross_entropy(logits.flatten(0, 1), Y.to(device).flatten(), reduction="sum")
        total += loss.item()
        count += Y.numel()
    model.train(was_training)
    return total / count


def _new_checkpoint(model, itos, train_config):
    return {
        "format": CHECKPOINT_FORMAT,
        "model_config": dict(model.config),
        "train_config": dict(train_config),
        "itos": list(itos),
        "epoch": 0,
        "step": 0,
        "token_steps": 0,
        "train_seconds": 0.0,
        "history": {"train": [], "val": [], "step": [], "token_steps": [], "seconds": []},
    }


def train(
    model: CharLSTM,
    train_data: torch.Tensor,
    val_data: torch.Tensor,
    itos: list[str],
    checkpoint_path=None,
    epochs: int = 20,
    batch_size: int = 128,
    seq_len: int = 128,
    lr: float = 3e-3,
    lr_min: float = 1e-4,
    warmup: int = 100,
    clip: float = 1.0,
    carry_state: bool = False,
    val_seq_len: int = POST_SEQ_LEN,
    seed: int = 0,
    resume: bool = True,
    device="cpu",
    log=print,
) -> dict:
    """Train ``model`` on ``train_data``; validate and checkpoint after every epoch.

    Each epoch reads the training text once, as non-overlapping windows of
    ``seq_len`` starting at a random offset (so window borders move between
    epochs): shuffled windows from a zero state, or with ``carry_state`` the
    consecutive windows of :func:`stream_batches` with the hidden state carried
    over (detached, truncated BPTT). Adam, warm-up then cosine learning-rate
    decay, gradient-norm clipping. When ``checkpoint_path`` exists and
    ``resume`` is true, training continues from it (the post's behaviour);
    the run's settings then come from the checkpoint, except ``epochs``.

    Returns the checkpoint dict (with its ``"history"``). Introduced in notebook 07.
    """
    config = {
        "epochs": epochs, "batch_size": batch_size, "seq_len": seq_len, "lr": lr, "lr_min": lr_min,
        "warmup": warmup, "clip": clip, "carry_state": carry_state, "val_seq_len": val_seq_len,
        "seed": seed,
    }  # fmt: skip
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    checkpoint = _new_checkpoint(model, itos, config)
    if checkpoint_path is not None and resume and Path(checkpoint_path).is_file():
        checkpoint = load_checkpoint(checkpoint_path)
        if checkpoint["itos"] != list(itos) or checkpoint["model_config"] != model.config:
            raise ValueError(
                f"{checkpoint_path} was trained with another vocabulary or model size; "
                "pass another --checkpoint path or --fresh to start over"
            )
        model.load_state_dict(checkpoint["model"])
        config = {**checkpoint["train_config"], "epochs": epochs}
        checkpoint["train_config"] = config
        log(f"Resuming from {Path(checkpoint_path).name}: {checkpoint['epoch']} epochs done")
        if "optimizer" in checkpoint:
            optimizer.load_state_dict(checkpoint["optimizer"])
        else:  # the shipped checkpoint keeps the weights only
            log("(the checkpoint has no optimizer state: Adam starts afresh)")
    model.to(device)
    history = checkpoint["history"]
    steps_per_epoch = (len(train_data) - 1 - config["seq_len"]) // (config["batch_size"] * config["seq_len"])
    total_steps = max(1, steps_per_epoch * config["epochs"])
    for epoch in range(checkpoint["epoch"], config["epochs"]):
        started = time.perf_counter()
        model.train()
        gen = torch.Generator().manual_seed(config["seed"] * 1000 + epoch)
        offset = int(torch.randint(config["seq_len"], (1,), generator=gen))
        if config["carry_state"]:
            chunks = stream_batches(train_data, config["batch_size"], config["seq_len"], offset)
        else:
            chunks = batches(train_data, config["batch_size"], config["seq_len"], generator=gen,
                             offset=offset, drop_last=True)  # fmt: skip
        total, count, state = 0.0, 0, None
        bar = progress(chunks, total=steps_per_epoch, desc=f"epoch {epoch + 1}/{config['epochs']}")
        for X, Y in bar:
            for group in optimizer.param_groups:
                group["lr"] = lr_at(checkpoint["step"], total_steps, config["lr"], config["lr_min"],
                                    config["warmup"])  # fmt: skip
            logits, state = model(X.to(device), _detach(state) if config["carry_state"] else None)
            loss = nn.functional.cross_entropy(logits.flatten(0, 1), Y.to(device).flatten())
            if not math.isfinite(loss.item()):
                raise FloatingPointError(f"the loss became {loss.item()}: lower the learning rate")
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), config["clip"])
            optimizer.step()
            checkpoint["step"] += 1
            checkpoint["token_steps"] += Y.numel()
            history["step"].append(round(loss.item(), 4))
            total, count = total + loss.item() * Y.numel(), count + Y.numel()
            bar.set_postfix(loss=f"{loss.item():.3f}")
        if count == 0:
            raise ValueError("the training text gave no batch: use a smaller batch_size or seq_len")
        val_loss = evaluate(model, val_data, config["val_seq_len"], device=device)
        checkpoint["train_seconds"] += time.perf_counter() - started
        checkpoint["epoch"] = epoch + 1
        history["train"].append(total / count)
        history["val"].append(val_loss)
        history["token_steps"].append(checkpoint["token_steps"])
        history["seconds"].append(checkpoint["train_seconds"])
        log(
            f"epoch {epoch + 1}: train {total / count:.4f}, validation {val_loss:.4f} nats/char, "
            f"{checkpoint['token_steps']:,} token-steps"
        )
        checkpoint["model"] = {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}
        checkpoint["optimizer"] = optimizer.state_dict()
        if checkpoint_path is not None:
            save_checkpoint(checkpoint, checkpoint_path)
            _atomic_write_text(_history_path(checkpoint_path), json.dumps(history))
    return checkpoint


def _history_path(checkpoint_path) -> Path:
    path = Path(checkpoint_path)
    return path.with_name(path.stem + ".losses.json")


def plot_history(history: dict, ax=None, post_val: float | None = 1.27):
    """Plot a training history against token-steps (log scale), with the post's 1.27 line.

    Introduced in notebook 07.
    """
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(6.5, 3.8))
    steps, tokens = history["step"], history["token_steps"]
    if steps and tokens:
        per_step = tokens[-1] / len(steps)
        ax.plot([(i + 1) * per_step for i in range(len(steps))], steps, alpha=0.25, label="train (step)")
    ax.plot(tokens, history["train"], "o-", label="train (epoch mean)")
    ax.plot(tokens, history["val"], "s-", label="validation")
    if post_val is not None:
        ax.axhline(post_val, color="gray", ls="--", label=f"the post: {post_val}")
    ax.set_xscale("log")
    ax.set_xlabel("token-steps (characters trained on)")
    ax.set_ylabel("loss (nats per character)")
    ax.legend()
    return ax


# ---------------------------------------------------------------------------
# 6. Command line
# ---------------------------------------------------------------------------

METHODS = ("greedy", "temperature", "top-k", "top-p")


def _load_data_dir(path: Path):
    itos = load_vocab(path / "vocab.json")
    train_data = torch.load(path / "train.pt", weights_only=True).long()
    val_data = torch.load(path / "val.pt", weights_only=True).long()
    return itos, train_data, val_data


def _read_text(path):
    if path is None:
        return None
    with open(path, encoding="utf-8") as f:
        return f.read()


def _cmd_preprocess(args) -> None:
    itos, train_data, val_data = prepare(_read_text(args.text))
    out = Path(args.data)
    save_vocab(itos, out / "vocab.json")
    dtype = torch.uint8 if len(itos) <= 256 else torch.int32  # small files; widened on load
    for name, part in (("train", train_data), ("val", val_data)):
        save_checkpoint(part.to(dtype), out / f"{name}.pt")
    print(f"Vocabulary of {len(itos)} tokens -> {out / 'vocab.json'}")
    print(f"{len(train_data):,} training and {len(val_data):,} validation characters -> {out}/")


def _data_for(args):
    data_dir = Path(args.data)
    if args.text is None and (data_dir / "vocab.json").is_file():
        return _load_data_dir(data_dir)
    if args.text is None:
        print(f"No preprocessed data in {data_dir}: preprocessing the novel first")
        _cmd_preprocess(args)
        return _load_data_dir(data_dir)
    return prepare(_read_text(args.text))


def _cmd_train(args) -> None:
    torch.set_num_threads(args.threads) if args.threads else None
    itos, train_data, val_data = _data_for(args)
    checkpoint_path = Path(args.checkpoint)
    if args.fresh and checkpoint_path.exists():
        print(f"--fresh: starting over (overwriting {checkpoint_path} after the first epoch)")
    torch.manual_seed(args.seed)
    model = CharLSTM(len(itos), args.embed_dim, args.hidden_dim, args.num_layers, args.dropout)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"{n_params:,} parameters; {len(train_data):,} training characters; device {args.device}")
    checkpoint = train(
        model, train_data, val_data, itos, checkpoint_path, epochs=args.epochs,
        batch_size=args.batch_size, seq_len=args.seq_len, lr=args.lr, lr_min=args.lr_min,
        warmup=args.warmup, clip=args.clip, carry_state=args.carry_state, seed=args.seed,
        resume=not args.fresh, device=args.device,
    )  # fmt: skip
    print(f"Checkpoint: {checkpoint_path} (history in {_history_path(checkpoint_path)})")
    if checkpoint["history"]["val"]:
        print(f"final validation loss {checkpoint['history']['val'][-1]:.4f} nats/char")


def _cmd_predict(args) -> None:
    from mllm_utils.sampling import generate

    model, itos, _ = load_model(args.checkpoint)
    prompt_ids = encode(tokenize(args.prompt), itos).tolist()
    if not prompt_ids:
        raise SystemExit("error: the prompt is empty after tokenizing: give --prompt some letters")
    generator = torch.Generator().manual_seed(args.seed)
    options = {
        "greedy": {"greedy": True},
        "temperature": {"temperature": args.temperature},
        "top-k": {"temperature": args.temperature, "top_k": args.k},
        "top-p": {"temperature": args.temperature, "top_p": args.p},
    }[args.method]
    new = generate(model, prompt_ids, args.length, generator=generator, **options)
    print(decode(prompt_ids, itos) + decode(new, itos))


def _cmd_evaluate(args) -> None:
    model, itos, checkpoint = load_model(args.checkpoint)
    if args.text is None and (Path(args.data) / "vocab.json").is_file():
        data_itos, _, val_data = _load_data_dir(Path(args.data))
        if data_itos != itos:
            raise SystemExit(f"error: {args.data} was preprocessed with another vocabulary")
    else:
        _, _, val_data = prepare(_read_text(args.text), itos=itos)
    loss = evaluate(model, val_data, args.seq_len, max_tokens=args.max_tokens)
    print(f"checkpoint: {args.checkpoint or shipped_checkpoint_path().name} "
          f"({checkpoint['token_steps']:,} token-steps, {checkpoint['epoch']} epochs)")  # fmt: skip
    print(f"validation characters: {min(len(val_data) - 1, args.max_tokens or len(val_data)):,}")
    print(f"validation loss: {loss:.4f} nats/char ({args.seq_len}-character windows, fresh state)")
    if args.carry_state:
        full = evaluate(model, val_data, args.seq_len, carry_state=True, max_tokens=args.max_tokens)
        print(f"validation loss with the state carried: {full:.4f} nats/char")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m mllm_utils.charlm",
        description="The War and Peace character model (notebook 07): preprocess the novel, "
        "train (resuming from an existing checkpoint), sample, evaluate.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="{preprocess,train,predict,evaluate}")

    def data_options(p):
        p.add_argument("--data", default="charlm_data",
                       help="folder for vocab.json, train.pt, val.pt (default: %(default)s)")  # fmt: skip
        p.add_argument("--text", default=None, help="train on this UTF-8 text file instead of the shipped novel")

    p = sub.add_parser("preprocess", help="tokenize the novel, save the vocabulary (JSON) and the 90/10 split")
    data_options(p)
    p.set_defaults(func=_cmd_preprocess)

    p = sub.add_parser("train", help="train; continues from --checkpoint if it exists (see --fresh)",
                       formatter_class=argparse.ArgumentDefaultsHelpFormatter)  # fmt: skip
    data_options(p)
    p.add_argument("--checkpoint", default="war_and_peace_lstm.pt", help="checkpoint to write (and resume from)")
    p.add_argument("--fresh", action="store_true", help="ignore an existing checkpoint and start over")
    p.add_argument("--epochs", type=int, default=20, help="total epochs (passes over the training text)")
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--seq-len", type=int, default=128, help="window length (characters)")
    p.add_argument("--carry-state", action="store_true", help="consecutive windows, hidden state carried")
    p.add_argument("--lr", type=float, default=3e-3, help="peak learning rate (Adam)")
    p.add_argument("--lr-min", type=float, default=1e-4, help="learning rate at the end of the cosine decay")
    p.add_argument("--warmup", type=int, default=100, help="warm-up steps")
    p.add_argument("--clip", type=float, default=1.0, help="gradient-norm clipping")
    p.add_argument("--embed-dim", type=int, default=EMBED_DIM)
    p.add_argument("--hidden-dim", type=int, default=HIDDEN_DIM)
    p.add_argument("--num-layers", type=int, default=NUM_LAYERS)
    p.add_argument("--dropout", type=float, default=0.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=0, help="CPU threads (0: torch's default)")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.set_defaults(func=_cmd_train)

    p = sub.add_parser(
        "predict", formatter_class=argparse.ArgumentDefaultsHelpFormatter,
        help="sample text: methods greedy, temperature, top-k, top-p",
        description="Sample text from a checkpoint. Methods: greedy (always the most likely "
        "character), temperature (sample from softmax(logits / T)), top-k (sample among the k "
        "most likely), top-p (sample among the smallest set whose probability reaches p).",
    )  # fmt: skip
    p.add_argument("--checkpoint", default=None, help="checkpoint (default: the shipped model)")
    p.add_argument("--method", choices=METHODS, default="top-p")
    p.add_argument("--prompt", default="She went away", help="text to start from")
    p.add_argument("--length", type=int, default=500, help="characters to generate")
    p.add_argument("--temperature", type=float, default=0.7, help="temperature T (all sampling methods)")
    p.add_argument("--k", type=int, default=5, help="k for top-k")
    p.add_argument("--p", type=float, default=0.95, help="p for top-p")
    p.add_argument("--seed", type=int, default=0, help="seed of the sampling generator")
    p.set_defaults(func=_cmd_predict)

    p = sub.add_parser("evaluate", formatter_class=argparse.ArgumentDefaultsHelpFormatter,
                       help="print a checkpoint's validation loss on the held-out 10%%")  # fmt: skip
    data_options(p)
    p.add_argument("--checkpoint", default=None, help="checkpoint (default: the shipped model)")
    p.add_argument("--seq-len", type=int, default=POST_SEQ_LEN, help="window length (the post's: 64)")
    p.add_argument("--max-tokens", type=int, default=None, help="evaluate on the first N characters only")
    p.add_argument("--carry-state", action="store_true", help="also print the loss with the state carried")
    p.set_defaults(func=_cmd_evaluate)
    return parser


def main(argv=None) -> None:
    """The command line: ``python -m mllm_utils.charlm {preprocess,train,predict,evaluate}``.

    Introduced in notebook 07.
    """
    args = _parser().parse_args(argv)
    args.func(args)


if __name__ == "__main__":
    sys.exit(main())
