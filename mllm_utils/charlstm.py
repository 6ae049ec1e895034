"""The character-level LSTM of notebook 07 and its training: model, loop, shipped checkpoint.

* :class:`CharLSTM`: embedding, multi-layer LSTM, linear head (the post's sizes),
  with a one-character :meth:`CharLSTM.step` for fast generation;
* :func:`train`: epochs over the novel with a validation loss and an atomic
  checkpoint after each one, resuming from an existing checkpoint;
* :func:`load_model`: a trained model from a checkpoint, the shipped one by default;
* :func:`plot_history`: the loss curve against token-steps.

The data comes from :mod:`mllm_utils.chardata`, the checkpoints' format from
:mod:`mllm_utils.checkpoints`, the step and the evaluation from
:mod:`mllm_utils.chartrain` (shared with the transformer of notebook 10).

Introduced in notebook 07 (War and Peace).
"""

from __future__ import annotations

import itertools
import json
import time
from pathlib import Path

import torch
from torch import nn

from mllm_utils._validate import (
    check_bool,
    check_device,
    check_ids,
    check_int,
    check_number,
    check_path,
    check_tensor,
    describe,
)
from mllm_utils.chardata import batches, stream_batches
from mllm_utils.chartrain import POST_SEQ_LEN, check_batches_fit, check_run, evaluate, lr_at, train_step
from mllm_utils.checkpoints import (
    LSTM,
    atomic_write_text,
    build_model,
    check_model_checkpoint,
    check_writable_path,
    load_checkpoint,
    new_checkpoint,
    optimizer_state_of,
    save_checkpoint,
    weights_of,
)
from mllm_utils.runtime import SMOKE_STEPS, model_device, progress, smoke

__all__ = ["CharLSTM", "load_model", "plot_history", "shipped_checkpoint_path", "train"]

SHIPPED_CHECKPOINT = "war_and_peace_lstm.pt"

# The post's defaults (its model.py and train.py); its window length is chartrain.POST_SEQ_LEN.
EMBED_DIM, HIDDEN_DIM, NUM_LAYERS = 32, 128, 4
POST_BATCH_SIZE, POST_LR, POST_EPOCHS, POST_DROPOUT = 1024, 1e-3, 7, 0.2
HISTORY_KEYS = ("train", "val", "step", "token_steps", "seconds")


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
        for name, value in (("vocab_size", vocab_size), ("embed_dim", embed_dim), ("hidden_dim", hidden_dim),
                            ("num_layers", num_layers)):  # fmt: skip
            check_int(name, value, 1)
        check_number("dropout", dropout, 0, 1, high_open=True, hint="the probability of zeroing an activation")
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
        self._check_ids(x, 2, "(batch, seq_len)")
        self._check_state(state, x.shape[0])
        if x.shape[1] == 1:
            logits, state = self._step(x[:, 0], state)
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
        self._check_ids(x, 1, "(batch,)")
        self._check_state(state, x.shape[0])
        return self._step(x, state)

    def _step(self, x: torch.Tensor, state):
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

    def _check_ids(self, x, ndim: int, shape: str) -> None:
        fix = "; for one sequence of shape (seq_len,) pass x.unsqueeze(0)" if ndim == 2 else ""
        check_tensor("x", x, ndim=ndim, integer=True, hint=f"CharLSTM expects token ids of shape {shape}{fix}")
        if x.numel() == 0:
            raise ValueError(f"x is empty (shape {tuple(x.shape)}): feed at least one token")
        check_ids("x", x, self.config["vocab_size"])

    def _check_state(self, state, batch: int) -> None:
        if state is None:
            return
        want = (self.lstm.num_layers, batch, self.lstm.hidden_size)
        ok = isinstance(state, (tuple, list)) and len(state) == 2
        ok = ok and all(isinstance(s, torch.Tensor) and tuple(s.shape) == want for s in state)
        if not ok:
            got = [tuple(s.shape) if isinstance(s, torch.Tensor) else describe(s) for s in state] if isinstance(
                state, (tuple, list)) else describe(state)  # fmt: skip
            raise ValueError(
                f"state must be the (h, c) pair this model returned, each of shape (num_layers, batch, "
                f"hidden_dim) = {want}, got {got}: pass state=None to start fresh"
            )


def _detach(state):
    return None if state is None else tuple(s.detach() for s in state)


def shipped_checkpoint_path() -> Path:
    """Where the pretrained checkpoint lives inside the package. Introduced in notebook 07."""
    return Path(__file__).resolve().parent / "data" / SHIPPED_CHECKPOINT


def load_model(path=None, map_location="cpu"):
    """``(model, itos, checkpoint)`` from a checkpoint; the shipped one when ``path`` is None.

    The model comes back in eval mode. A transformer checkpoint, or one whose
    parts do not fit together, is refused with a
    :class:`~mllm_utils.checkpoints.CheckpointError`. Introduced in notebook 07.
    """
    path = shipped_checkpoint_path() if path is None else path
    checkpoint = check_model_checkpoint(load_checkpoint(path, map_location), LSTM, path)
    return build_model(CharLSTM, checkpoint, path), checkpoint["itos"], checkpoint


def _resume(model, itos, checkpoint_path, config, optimizer, log):
    """The checkpoint to continue from, its weights and optimizer state loaded, and the run's settings."""
    checkpoint = check_model_checkpoint(load_checkpoint(checkpoint_path), LSTM, checkpoint_path)
    if checkpoint["itos"] != list(itos) or checkpoint["model_config"] != model.config:
        raise ValueError(
            f"{checkpoint_path} was trained with another vocabulary or model size; "
            "pass another --checkpoint path or --fresh to start over"
        )
    model.load_state_dict(checkpoint["model"])
    ignored = {k: v for k, v in config.items() if k != "epochs" and checkpoint["train_config"].get(k, v) != v}
    config = {**checkpoint["train_config"], "epochs": config["epochs"]}
    checkpoint["train_config"] = config
    done = checkpoint["epoch"]
    log(f"Resuming from {Path(checkpoint_path).name}: {done} epoch{'' if done == 1 else 's'} done")
    if ignored:
        log("(the run continues with the checkpoint's settings: "
            + ", ".join(f"{k} {config[k]} instead of {v}" for k, v in ignored.items()) + ")")  # fmt: skip
    if "optimizer" in checkpoint:
        optimizer.load_state_dict(checkpoint["optimizer"])
    else:  # the shipped checkpoint keeps the weights only
        log("(the checkpoint has no optimizer state: Adam starts afresh)")
    if checkpoint["epoch"] >= config["epochs"]:
        log(f"(nothing to train: epochs={config['epochs']} counts from the start, and {checkpoint['epoch']} "
            "are done; ask for more to train on)")  # fmt: skip
    return checkpoint, config


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
    device=None,
    log=print,
) -> dict:
    """Train ``model`` on ``train_data``; validate and checkpoint after every epoch.

    Each epoch reads the training text once, as non-overlapping windows of
    ``seq_len`` starting at a random offset (so window borders move between
    epochs): shuffled windows from a zero state, or with ``carry_state`` the
    consecutive windows of :func:`~mllm_utils.chardata.stream_batches` with the
    hidden state carried over (detached, truncated BPTT). Adam, warm-up then
    cosine learning-rate decay, gradient-norm clipping. When ``checkpoint_path``
    exists and ``resume`` is true, training continues from it (the post's
    behaviour); the run's settings then come from the checkpoint, except
    ``epochs`` (the total, counted from the start).

    ``device``: where to train (``"cuda"``, ``"mps"``, ``"cpu"``); ``None`` keeps the
    model where it is. The model stays there afterwards; the text stays on the CPU
    and each batch moves. The checkpoint holds CPU copies (weights and Adam's state),
    so it loads anywhere, and a run resumes on any device.

    Returns the checkpoint dict (with its ``"history"``). Introduced in notebook 07.
    """
    if not isinstance(model, CharLSTM):
        raise TypeError(f"model must be a CharLSTM (for a TransformerLM use transformer.train), got {describe(model)}")
    checkpoint_path = check_path("checkpoint_path", checkpoint_path, none_ok=True)
    if checkpoint_path is not None:  # a folder, or a path under a file: say so now, not after the first epoch
        check_writable_path("checkpoint_path", checkpoint_path)
    check_int("epochs", epochs, 1, hint="the total number of passes over the training text")
    check_bool("carry_state", carry_state)
    check_int("val_seq_len", val_seq_len, 1)
    check_bool("resume", resume)
    if device is not None:
        check_device("device", device)
    check_run(model, train_data, val_data, itos, batch_size=batch_size, seq_len=seq_len, lr=lr, lr_min=lr_min,
              warmup=warmup, clip=clip, seed=seed, log=log)  # fmt: skip
    config = {
        "epochs": epochs, "batch_size": batch_size, "seq_len": seq_len, "lr": lr, "lr_min": lr_min,
        "warmup": warmup, "clip": clip, "carry_state": carry_state, "val_seq_len": val_seq_len,
        "seed": seed,
    }  # fmt: skip
    # The model moves first: Adam's state is created, and a resumed run's state loaded, on the
    # device of the parameters it belongs to (loaded before the move, it stayed on the CPU, and the
    # first step of a resumed GPU run failed with "Expected all tensors to be on the same device").
    device = model_device(model) if device is None else torch.device(device)
    model.to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    checkpoint = new_checkpoint(model, itos, config, HISTORY_KEYS)
    if checkpoint_path is not None and resume and checkpoint_path.is_file():
        checkpoint, config = _resume(model, itos, checkpoint_path, config, optimizer, log)
    check_batches_fit(train_data, config["batch_size"], config["seq_len"], config["carry_state"])
    if len(val_data) < config["val_seq_len"] + 1:
        raise ValueError(f"val_data has {len(val_data)} tokens, too few for one validation window of "
                         f"val_seq_len={config['val_seq_len']} plus its target: use a smaller val_seq_len")  # fmt: skip
    history = checkpoint["history"]
    steps_per_epoch = (len(train_data) - 1 - config["seq_len"]) // (config["batch_size"] * config["seq_len"])
    total_steps = max(1, steps_per_epoch * config["epochs"])
    last_epoch = config["epochs"]
    if smoke():  # MLLM_SMOKE=1: the same code path, a few epochs of a few steps
        last_epoch = min(last_epoch, checkpoint["epoch"] + SMOKE_STEPS)
    for epoch in range(checkpoint["epoch"], last_epoch):
        started = time.perf_counter()
        model.train()
        gen = torch.Generator().manual_seed(config["seed"] * 1000 + epoch)  # the data's order, on the CPU
        offset = int(torch.randint(config["seq_len"], (1,), generator=gen))
        if config["carry_state"]:
            chunks = stream_batches(train_data, config["batch_size"], config["seq_len"], offset)
        else:
            chunks = batches(train_data, config["batch_size"], config["seq_len"], generator=gen,
                             offset=offset, drop_last=True)  # fmt: skip
        total, count, state = 0.0, 0, None
        bar = progress(chunks, total=steps_per_epoch, desc=f"epoch {epoch + 1}/{config['epochs']}")
        for X, Y in itertools.islice(bar, SMOKE_STEPS if smoke() else None):
            lr_now = lr_at(checkpoint["step"], total_steps, config["lr"], config["lr_min"], config["warmup"])
            loss, state = train_step(model, optimizer, X.to(device), Y.to(device), lr_now, config["clip"],
                                     _detach(state) if config["carry_state"] else None,
                                     f" in epoch {epoch + 1}")  # fmt: skip
            checkpoint["step"] += 1
            checkpoint["token_steps"] += Y.numel()
            history["step"].append(round(loss, 4))
            total, count = total + loss * Y.numel(), count + Y.numel()
            bar.set_postfix(loss=f"{loss:.3f}")
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
        checkpoint["model"] = weights_of(model)
        checkpoint["optimizer"] = optimizer_state_of(optimizer)
        if checkpoint_path is not None:
            save_checkpoint(checkpoint, checkpoint_path)
            atomic_write_text(history_path(checkpoint_path), json.dumps(history))
    return checkpoint


def history_path(checkpoint_path) -> Path:
    """Where :func:`train` writes the loss history (JSON) beside ``checkpoint_path``."""
    path = Path(checkpoint_path)
    return path.with_name(path.stem + ".losses.json")


def plot_history(history: dict, ax=None, post_val: float | None = 1.27):
    """Plot a training history against token-steps (log scale), with the post's 1.27 line.

    Introduced in notebook 07.
    """
    missing = [k for k in ("train", "val", "step", "token_steps") if not isinstance(history, dict) or k not in history]
    if missing:
        raise (TypeError if not isinstance(history, dict) else ValueError)(
            f"history must be a training history (checkpoint['history']) with {missing} lists, got "
            f"{describe(history)}"
        )
    check_number("post_val", post_val, none_ok=True)
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
