"""One small training loop and a loss plot, shared by the notebooks that train.

Read it in a minute: per epoch, one pass over the training batches (forward,
loss, backward, step), then the mean validation loss. Nothing is hidden: no
callbacks, no hooks, no framework. Batches are ``(X, Y)`` pairs; the loss is
``loss_fn(model(X), Y)``. Models whose forward returns more than the logits
(an RNN's hidden state, say) pass ``forward=lambda model, X: model(X)[0]``.
:class:`Batches` serves shuffled mini-batches from two tensors without a
``DataLoader``'s per-sample Python calls.

Introduced in notebook 02 (word vectors).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterable

import torch

from mllm_utils._validate import check_bool, check_callable, check_device, check_int, describe
from mllm_utils.runtime import SMOKE_STEPS, model_device, progress, smoke, smoke_cap


class Batches:
    """Mini-batches ``(X[rows], Y[rows])`` of two tensors, in a fresh random order on every pass.

    A stand-in for a ``DataLoader`` when the whole data set is already two
    tensors: one index per batch instead of one Python call per sample. Each
    ``for`` loop over it is one epoch; the order comes from its own seeded
    generator, so runs repeat exactly.
    """

    def __init__(self, X: torch.Tensor, Y: torch.Tensor, batch_size: int, shuffle: bool = True, seed: int = 0):
        for name, t in (("X", X), ("Y", Y)):
            if not isinstance(t, torch.Tensor) or t.ndim == 0:
                raise TypeError(f"{name} must be a tensor with one row per sample, got {describe(t)}")
        check_int("batch_size", batch_size)
        check_bool("shuffle", shuffle)
        check_int("seed", seed, 0)
        if len(X) != len(Y):
            raise ValueError(f"X and Y must have the same number of rows, got {len(X)} and {len(Y)}")
        if len(X) == 0:
            raise ValueError("Batches got no rows: the data set is empty")
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        self.X, self.Y, self.batch_size, self.shuffle = X, Y, batch_size, shuffle
        self.generator = torch.Generator().manual_seed(seed)

    def __len__(self) -> int:
        return math.ceil(len(self.X) / self.batch_size)

    def __iter__(self):
        n = len(self.X)
        order = torch.randperm(n, generator=self.generator) if self.shuffle else torch.arange(n)
        for start in range(0, n, self.batch_size):
            rows = order[start : start + self.batch_size]
            # index_select copies whole rows at once; X[rows] is several times slower here.
            yield self.X.index_select(0, rows.to(self.X.device)), self.Y.index_select(0, rows.to(self.Y.device))


def _batch_loss(model, loss_fn, forward, X, Y, device):
    logits = forward(model, X.to(device))
    Y = Y.to(device)
    if logits.ndim > 2:  # a sequence model: (B, T, V) logits against (B, T) targets
        logits, Y = logits.reshape(-1, logits.shape[-1]), Y.reshape(-1)
    return loss_fn(logits, Y)


def _check_loop(model, loss_fn, batches, name: str, device, forward) -> None:
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {describe(model)}")
    check_callable("loss_fn", loss_fn, hint="e.g. nn.CrossEntropyLoss()")
    if isinstance(batches, (torch.Tensor, str)) or not hasattr(batches, "__iter__"):
        raise TypeError(f"{name} must be an iterable of (X, Y) batches (a DataLoader, Batches, a list), "
                        f"got {describe(batches)}")  # fmt: skip
    if device is not None:
        check_device("device", device)
    check_callable("forward", forward, none_ok=True, hint="e.g. lambda model, X: model(X)[0]")


@torch.no_grad()
def evaluate(model, loss_fn, batches: Iterable, device=None, forward: Callable | None = None) -> float:
    """Mean loss over ``batches`` (weighted by batch size), in eval mode and without gradients.

    ``loss_fn`` must return the batch's *mean* loss (as ``F.cross_entropy`` does).
    One batch at a time, so the memory is one batch's, whatever the data's size:
    the loss of a whole corpus is ``evaluate(model, F.cross_entropy, Batches(X, Y,
    20_000, shuffle=False))``. ``device=None`` runs where the model lives;
    another device moves the model there for the evaluation and back afterwards.
    """
    _check_loop(model, loss_fn, batches, "batches", device, forward)
    forward = forward or (lambda m, X: m(X))
    was_training, home = model.training, model_device(model)
    device = home if device is None else torch.device(device)
    model.eval()
    model.to(device)
    try:
        total, count = 0.0, 0
        for X, Y in batches:
            total += _batch_loss(model, loss_fn, forward, X, Y, device).item() * len(X)
            count += len(X)
    finally:
        model.to(home)
        model.train(was_training)
    if count == 0:
        raise ValueError("evaluate got no batches: is the validation set empty?")
    return total / count


def train(
    model: torch.nn.Module,
    loss_fn: Callable,
    optimizer: torch.optim.Optimizer,
    train_batches: Iterable,
    epochs: int,
    val_batches: Iterable | None = None,
    scheduler=None,
    device=None,
    forward: Callable | None = None,
) -> dict:
    """Train ``model`` for ``epochs`` passes over ``train_batches``; return the loss history.

    ``train_batches`` and ``val_batches`` are re-iterated each epoch (a
    DataLoader, or a list of ``(X, Y)`` pairs). ``scheduler.step()``, if given,
    runs after every optimizer step. Returns ``{"train": [...], "val": [...],
    "step": [...]}``: the mean training and validation loss per epoch, and the
    loss of every step.

    ``device``: where to train; the model moves there and stays (``None``: where
    it is). Batches may stay on the CPU: each one moves to the model's device.
    Under ``MLLM_SMOKE=1`` each epoch stops after a few batches and at most two
    epochs run (the history then has as many entries).
    """
    check_int("epochs", epochs)
    if epochs < 1:
        raise ValueError(f"epochs must be at least 1, got {epochs}")
    _check_loop(model, loss_fn, train_batches, "train_batches", device, forward)
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise TypeError(f"optimizer must be a torch.optim.Optimizer, e.g. torch.optim.Adam(model.parameters()), "
                        f"got {describe(optimizer)}")  # fmt: skip
    if val_batches is not None and (isinstance(val_batches, torch.Tensor) or not hasattr(val_batches, "__iter__")):
        raise TypeError(f"val_batches must be an iterable of (X, Y) batches or None, got {describe(val_batches)}")
    if scheduler is not None and not callable(getattr(scheduler, "step", None)):
        raise TypeError(f"scheduler must have a step() method (a torch.optim.lr_scheduler), got {describe(scheduler)}")
    forward = forward or (lambda m, X: m(X))
    device = model_device(model) if device is None else torch.device(device)
    model.to(device)
    history = {"train": [], "val": [], "step": []}
    for epoch in range(smoke_cap(epochs)):
        model.train()
        total, count = 0.0, 0
        bar = progress(train_batches, desc=f"epoch {epoch + 1}/{epochs}", leave=False)
        for X, Y in itertools.islice(bar, SMOKE_STEPS if smoke() else None):
            loss = _batch_loss(model, loss_fn, forward, X, Y, device)
            value = loss.item()  # one device-to-host copy per step, reused below
            if not math.isfinite(value):
                raise FloatingPointError(f"the loss became {value} in epoch {epoch + 1}: lower the learning rate")
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            if scheduler is not None:
                scheduler.step()
            history["step"].append(value)
            bar.set_postfix(loss=f"{value:.3f}", refresh=False)
            total += value * len(X)
            count += len(X)
        if count == 0:
            raise ValueError("train got no batches: is the training set empty?")
        history["train"].append(total / count)
        if val_batches is not None:
            val = itertools.islice(val_batches, SMOKE_STEPS) if smoke() else val_batches
            history["val"].append(evaluate(model, loss_fn, val, device, forward))
    return history


def plot_losses(history: dict, title: str = "Loss", ax=None):
    """Plot a :func:`train` history: per-step loss (faint), per-epoch train and validation loss."""
    if not isinstance(history, dict):
        raise TypeError(f"history must be the dict train() returned, got {describe(history)}")
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(6, 3.5))
    steps = history.get("step", [])
    epochs = len(history.get("train", []))
    if steps:
        per_epoch = len(steps) / max(epochs, 1)
        ax.plot([(i + 1) / per_epoch for i in range(len(steps))], steps, alpha=0.3, label="train (step)")
    if epochs:
        ax.plot(range(1, epochs + 1), history["train"], "o-", label="train (epoch mean)")
    if history.get("val"):
        ax.plot(range(1, len(history["val"]) + 1), history["val"], "s-", label="validation")
    ax.set_xlabel("epoch")
    ax.set_ylabel("loss")
    ax.set_title(title)
    ax.legend()
    return ax
