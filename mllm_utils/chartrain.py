"""What the two character models' training loops share: schedule, one step, evaluation, checks.

The LSTM (:func:`mllm_utils.charlstm.train`, epochs over the novel, resumable)
and the transformer (:func:`mllm_utils.transformer.train`, a budget of steps)
loop differently, but each step is the same: set the learning rate of the
warm-up-then-cosine schedule (:func:`lr_at`), forward, cross-entropy, backward,
clip the gradient norm, Adam step (:func:`train_step`). Both validate with
:func:`evaluate` (nats per character, the post's 64-character windows) and
check their arguments with :func:`check_run` before the first step.

Introduced in notebook 07 (War and Peace); notebook 10 trains its transformer with it.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from mllm_utils._validate import (
    check_bool,
    check_callable,
    check_device,
    check_ids,
    check_int,
    check_itos,
    check_number,
    check_tensor,
    describe,
)
from mllm_utils.chardata import UNK, batches, stream_batches
from mllm_utils.runtime import model_device, smoke, wide_float

__all__ = ["POST_SEQ_LEN", "check_run", "evaluate", "lr_at", "train_step"]

POST_SEQ_LEN = 64  # the post's window length, and the evaluation protocol of notebooks 07 and 10
SMOKE_TOKENS = 4_096  # the characters evaluate() scores in the smoke test (MLLM_SMOKE=1)


def lr_at(step: int, total_steps: int, lr: float, lr_min: float, warmup: int) -> float:
    """Learning rate at ``step``: linear warm-up, then cosine decay from ``lr`` to ``lr_min``.

    Introduced in notebook 07.
    """
    check_int("step", step, 0)
    check_int("total_steps", total_steps, 1)
    check_number("lr", lr, 0, low_open=True)
    check_number("lr_min", lr_min, 0, lr, hint="the schedule decays from lr down to lr_min")
    check_int("warmup", warmup, 0)
    if step < warmup:
        return lr * (step + 1) / warmup
    progress = min(1.0, (step - warmup) / max(1, total_steps - warmup))
    return lr_min + 0.5 * (lr - lr_min) * (1.0 + math.cos(math.pi * progress))


def vocab_size_of(model: nn.Module) -> int | None:
    """The model's output size from its ``config`` (both character models have one), else None."""
    config = getattr(model, "config", None)
    return config.get("vocab_size") if isinstance(config, dict) else None


def _check_model(model) -> nn.Module:
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module (a CharLSTM or TransformerLM), got {describe(model)}")
    return model


def check_run(model, train_data, val_data, itos, *, batch_size, seq_len, lr, lr_min, warmup, clip, seed, log):
    """Refuse a training run's arguments before its first step; the errors name the argument.

    The vocabulary must have as many entries as the model has outputs, and
    the token ids of both texts must lie inside it.
    """
    _check_model(model)
    vocab_size = vocab_size_of(model)
    for name, data in (("train_data", train_data), ("val_data", val_data)):
        check_tensor(name, data, ndim=1, integer=True, hint="a 1-D tensor of token ids, e.g. from prepare()")
        if vocab_size is not None:
            check_ids(name, data, vocab_size, hint="encode the text with the model's vocabulary (itos)")
    check_itos("itos", itos, UNK)
    if vocab_size is not None and len(itos) != vocab_size:
        raise ValueError(
            f"itos has {len(itos)} entries but the model has {vocab_size} outputs (vocab_size): build the "
            "model with vocab_size=len(itos)"
        )
    check_int("batch_size", batch_size, 1)
    check_int("seq_len", seq_len, 1)
    check_number("lr", lr, 0, low_open=True, hint="the peak learning rate of Adam, e.g. 3e-3")
    check_number("lr_min", lr_min, 0, lr, hint="the schedule decays from lr down to lr_min")
    check_int("warmup", warmup, 0)
    check_number("clip", clip, 0, low_open=True, hint="the largest gradient norm a step may take")
    check_int("seed", seed, 0)
    check_callable("log", log, hint="e.g. print, or lambda *_: None for silence")


def check_batches_fit(train_data, batch_size: int, seq_len: int, carry_state: bool = False) -> None:
    """Refuse a text too short for one batch, whatever random offset below ``seq_len`` an epoch starts at."""
    usable = len(train_data) - (seq_len - 1)  # the latest start a random offset can choose
    fits = (usable - 1) // batch_size >= seq_len if carry_state else (usable - 1) // seq_len >= batch_size
    if not fits:
        raise ValueError(
            f"the training text ({len(train_data)} tokens) is too short for one batch of {batch_size} "
            f"windows of {seq_len}: use a smaller batch_size or seq_len"
        )


def train_step(model: nn.Module, optimizer, X, Y, lr: float, clip: float, state=None, where: str = ""):
    """One optimizer step on a batch: ``(loss value, the model's new state)``.

    Sets the learning rate, ``logits, state = model(X, state)``, cross-entropy
    over every position, then backward, gradient-norm clipping and the step.
    A loss that is not finite stops training (``FloatingPointError``).
    """
    for group in optimizer.param_groups:
        group["lr"] = lr
    logits, state = model(X, state)
    loss = nn.functional.cross_entropy(logits.flatten(0, 1), Y.flatten())
    value = loss.item()
    if not math.isfinite(value):
        raise FloatingPointError(f"the loss became {value}{where}: lower the learning rate (lr)")
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    nn.utils.clip_grad_norm_(model.parameters(), clip)
    optimizer.step()
    return value, state


@torch.no_grad()
def evaluate(
    model: nn.Module,
    data: torch.Tensor,
    seq_len: int = POST_SEQ_LEN,
    batch_size: int = 256,
    carry_state: bool = False,
    max_tokens: int | None = None,
    device=None,
) -> float:
    """Mean cross-entropy (nats per character) of ``model`` on ``data``.

    ``carry_state=False`` is the post's protocol: non-overlapping windows of
    ``seq_len`` characters, each read from a fresh (zero) state. This averages
    over the same context lengths (0 to ``seq_len - 1``) as the post's
    overlapping windows, so the numbers compare. ``carry_state=True`` reads
    the text as ``batch_size`` long streams and carries the state, so every
    character (but the first few) sees long context. ``max_tokens`` evaluates
    on a prefix only (for quick checks).

    ``device=None`` evaluates where the model lives; another device moves the
    model there for the evaluation and back afterwards. The text may stay on
    the CPU: each batch moves. Under ``MLLM_SMOKE=1`` only the first
    ``SMOKE_TOKENS`` characters are scored. Introduced in notebook 07.
    """
    _check_model(model)
    check_tensor("data", data, ndim=1, integer=True, hint="a 1-D tensor of token ids, e.g. val_data from prepare()")
    check_int("seq_len", seq_len, 1)
    check_int("batch_size", batch_size, 1)
    check_bool("carry_state", carry_state)
    check_int("max_tokens", max_tokens, 1, none_ok=True, hint="the number of characters to score (None: all)")
    if device is not None:
        check_device("device", device)
    context_len = getattr(model, "context_len", None)
    if context_len is not None and seq_len > context_len:
        raise ValueError(f"seq_len={seq_len} is longer than the model's context_len={context_len}: "
                         f"use seq_len <= {context_len}")  # fmt: skip
    if smoke():
        max_tokens = min(max_tokens or SMOKE_TOKENS, SMOKE_TOKENS)
    if max_tokens is not None:
        data = data[: max_tokens + 1]
    if len(data) < seq_len + 1:
        cut = f" (the first max_tokens={max_tokens} + 1)" if max_tokens is not None else ""
        raise ValueError(f"data has {len(data)} tokens{cut}, too few for one window of seq_len={seq_len} plus "
                         "its target: use a smaller seq_len or more text")  # fmt: skip
    if vocab_size_of(model) is not None:
        check_ids("data", data, vocab_size_of(model))
    was_training, home = model.training, model_device(model)
    device = home if device is None else torch.device(device)
    model.eval()
    model.to(device)
    try:
        total, count, state = 0.0, 0, None
        if carry_state:
            batch_size = max(1, min(batch_size, (len(data) - 1) // seq_len))
            chunks = stream_batches(data, batch_size, seq_len)
        else:
            chunks = batches(data, batch_size, seq_len, shuffle=False)
        # The sum stays on the device: one copy to the host at the end, not one wait per batch.
        total = torch.zeros((), dtype=wide_float(device), device=device)
        for X, Y in chunks:
            logits, state = model(X.to(device), state if carry_state else None)
            loss = nn.functional.cross_entropy(logits.flatten(0, 1).float(), Y.to(device).flatten(), reduction="sum")
            total += loss.to(total.dtype)
            count += Y.numel()
        return total.item() / count
    finally:
        model.to(home)
        model.train(was_training)
