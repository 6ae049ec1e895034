"""A small decoder-only transformer for character-level text, with a key/value cache.

The model assembled step by step in notebook 10 (masked attention), kept here so
that tests and ``benchmarks/bench_kv_cache.py`` can use it:

* token embeddings plus *learned* positional embeddings (one vector per position
  up to ``context_len``);
* ``num_layers`` blocks, each ``x + attention(norm(x))`` then ``x + feed_forward(norm(x))``
  (pre-layer-norm residual blocks, as in GPT-2), where the attention is the masked
  (causal) multi-head self-attention of notebook 09
  (:class:`mllm_utils.attention.MultiHeadAttention`);
* a final layer norm and a linear head to one logit per vocabulary entry.

``forward(x, state=None) -> (logits, state)`` follows the contract of
:func:`mllm_utils.generation.generate`: ``x`` is ``(B, T)`` token ids, ``logits`` is
``(B, T, vocab_size)`` and ``state`` is the key/value cache, a tuple with one
``(keys, values)`` pair per block, each ``(B, num_heads, cached_len, head_dim)``.
Feeding one new token with the cache costs one token's work instead of
re-reading the whole prefix.

Checkpoints use :mod:`mllm_utils.checkpoints` (atomic ``torch.save``, ``weights_only``
loads), like the LSTM's; a transformer checkpoint is told apart by its ``"architecture"``
entry. The data comes from :mod:`mllm_utils.chardata`, the training step, schedule and
evaluation from :mod:`mllm_utils.chartrain` (shared with the LSTM).

Introduced in notebook 10.
"""

from __future__ import annotations

import time
from pathlib import Path

import torch
from torch import nn

from mllm_utils._validate import check_bool, check_ids, check_int, check_number, check_path, describe
from mllm_utils.attention import MultiHeadAttention
from mllm_utils.chardata import batches as window_batches
from mllm_utils.chartrain import POST_SEQ_LEN, check_batches_fit, check_run, evaluate, lr_at, train_step
from mllm_utils.checkpoints import (
    TRANSFORMER,
    build_model,
    check_model_checkpoint,
    check_writable_path,
    load_checkpoint,
    new_checkpoint,
    optimizer_state_of,
    save_checkpoint,
    weights_of,
)
from mllm_utils.runtime import SMOKE_STEPS, format_duration, model_device, progress, smoke

__all__ = [
    "ARCHITECTURE",
    "Block",
    "FeedForward",
    "TransformerLM",
    "load_model",
    "save_model",
    "shipped_checkpoint_path",
    "train",
]

ARCHITECTURE = TRANSFORMER  # "decoder-only-transformer"
HISTORY_KEYS = ("step", "val", "val_step", "token_steps", "seconds")
SHIPPED_CHECKPOINT = "war_and_peace_transformer.pt"


class FeedForward(nn.Module):
    """Position-wise feed-forward network: Linear, ReLU, Linear, Dropout.

    Applied to every position on its own (no mixing across time: that is the
    attention's job). ``hidden_dim`` is usually ``4 * embed_dim``.
    Introduced in notebook 10.
    """

    def __init__(self, embed_dim: int, hidden_dim: int, dropout: float = 0.0):
        super().__init__()
        check_int("embed_dim", embed_dim, 1)
        check_int("hidden_dim", hidden_dim, 1)
        _check_dropout(dropout)
        self.fc1 = nn.Linear(embed_dim, hidden_dim)
        self.fc2 = nn.Linear(hidden_dim, embed_dim)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``(..., embed_dim) -> (..., embed_dim)``."""
        return self.dropout(self.fc2(torch.relu(self.fc1(x))))


class Block(nn.Module):
    """One decoder block: masked multi-head self-attention and a feed-forward net, each residual.

    Pre-layer-norm: ``x = x + attn(ln1(x))``, then ``x = x + ff(ln2(x))``. The
    residual path carries the input unchanged to the output (and the gradient
    back), the norms keep every sub-layer's input at a steady scale.
    Introduced in notebook 10.
    """

    def __init__(self, embed_dim: int, num_heads: int, ff_dim: int, dropout: float = 0.0):
        super().__init__()
        check_int("embed_dim", embed_dim, 1)
        check_int("num_heads", num_heads, 1)
        check_int("ff_dim", ff_dim, 1)
        _check_dropout(dropout)
        self.ln1 = nn.LayerNorm(embed_dim)
        self.attn = MultiHeadAttention(embed_dim, num_heads, bias=False)
        self.drop = nn.Dropout(dropout)
        self.ln2 = nn.LayerNorm(embed_dim)
        self.ff = FeedForward(embed_dim, ff_dim, dropout)

    def forward(self, x, past_kv=None, need_weights: bool = False):
        """``x`` ``(B, T, D)`` -> ``(x, (keys, values), weights or None)``."""
        # One new token after a cache may see every cached key: no mask to build. For that single
        # query the plain matmul path (need_weights=True) is faster than the fused CPU kernel.
        one_step = past_kv is not None and x.shape[1] == 1
        h, weights, kv = self.attn(
            self.ln1(x), is_causal=not one_step, past_kv=past_kv, use_cache=True,
            need_weights=need_weights or one_step, average_attn_weights=False,
        )  # fmt: skip
        weights = weights if need_weights else None
        x = x + self.drop(h)
        x = x + self.ff(self.ln2(x))
        return x, kv, weights


class TransformerLM(nn.Module):
    """A decoder-only transformer language model with learned positions and a key/value cache.

    ``forward(x, state=None)`` takes token ids ``(B, T)`` and returns logits
    ``(B, T, vocab_size)`` and the new cache. With a ``state`` from an earlier
    call, ``x`` continues that text: its positions start after the cached ones.
    The cached plus new length may not exceed ``context_len`` (the number of
    learned positions). Introduced in notebook 10.
    """

    def __init__(
        self,
        vocab_size: int,
        embed_dim: int = 96,
        num_heads: int = 4,
        num_layers: int = 4,
        context_len: int = 512,
        ff_dim: int | None = None,
        dropout: float = 0.0,
    ):
        super().__init__()
        check_int("embed_dim", embed_dim, 1)
        ff_dim = 4 * embed_dim if ff_dim is None else ff_dim
        for name, value in (("vocab_size", vocab_size), ("num_heads", num_heads), ("num_layers", num_layers),
                            ("context_len", context_len), ("ff_dim", ff_dim)):  # fmt: skip
            check_int(name, value, 1)
        _check_dropout(dropout)
        self.config = {
            "vocab_size": vocab_size, "embed_dim": embed_dim, "num_heads": num_heads,
            "num_layers": num_layers, "context_len": context_len, "ff_dim": ff_dim, "dropout": dropout,
        }  # fmt: skip
        self.context_len = context_len
        self.token_embedding = nn.Embedding(vocab_size, embed_dim)
        self.position_embedding = nn.Embedding(context_len, embed_dim)
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.ModuleList(Block(embed_dim, num_heads, ff_dim, dropout) for _ in range(num_layers))
        self.ln_f = nn.LayerNorm(embed_dim)
        self.head = nn.Linear(embed_dim, vocab_size)
        self.apply(_init_weights)

    def forward(self, x: torch.Tensor, state=None, need_weights: bool = False):
        """Logits ``(B, T, V)`` and the key/value cache; see the class docstring.

        ``need_weights=True`` also returns the attention weights of every block,
        a list of ``(B, num_heads, T, cached_len + T)`` tensors, as a third item.
        """
        check_bool("need_weights", need_weights)
        B, T = self._check_input(x)
        past = self._check_state(state, B, x.device)
        start = 0 if past is None else past[0][0].shape[2]
        if start + T > self.context_len:
            raise ValueError(
                f"{start} cached + {T} new tokens = {start + T} positions, more than this model's "
                f"context_len={self.context_len} (it learned one position embedding per place): "
                f"feed at most the last {self.context_len} tokens, or start a fresh state with them"
            )
        positions = torch.arange(start, start + T, device=x.device)
        h = self.drop(self.token_embedding(x) + self.position_embedding(positions))  # (B, T, D)
        cache, all_weights = [], []
        for i, block in enumerate(self.blocks):
            h, kv, weights = block(h, None if past is None else past[i], need_weights)
            cache.append(kv)
            all_weights.append(weights)
        logits = self.head(self.ln_f(h))
        if need_weights:
            return logits, tuple(cache), all_weights
        return logits, tuple(cache)

    def _check_input(self, x) -> tuple[int, int]:
        if not isinstance(x, torch.Tensor) or x.ndim != 2:
            got = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
            raise ValueError(
                f"TransformerLM expects x: token ids of shape (batch, seq_len), got {got}; "
                "for one sequence of shape (seq_len,) pass x.unsqueeze(0)"
            )
        if x.dtype not in (torch.int64, torch.int32, torch.int16, torch.uint8):
            raise TypeError(f"TransformerLM expects x: integer token ids, got dtype {x.dtype}")
        if x.shape[1] == 0 or x.shape[0] == 0:
            raise ValueError(f"TransformerLM got an empty input x of shape {tuple(x.shape)}: feed at least one token")
        vocab_size = self.config["vocab_size"]
        check_ids("x", x, vocab_size, hint=f"token ids must lie in [0, {vocab_size}) for this model's vocabulary")
        return x.shape[0], x.shape[1]

    def _check_state(self, state, B: int, device):
        if state is None:
            return None
        num_layers = self.config["num_layers"]
        if not isinstance(state, (tuple, list)) or len(state) != num_layers:
            raise ValueError(
                f"state must be the key/value cache returned by this model's forward: one (keys, values) "
                f"pair per block ({num_layers}), got {type(state).__name__} of length "
                f"{len(state) if isinstance(state, (tuple, list)) else '-'}"
            )
        keys = state[0][0] if isinstance(state[0], (tuple, list)) and state[0] else None
        if isinstance(keys, torch.Tensor) and keys.ndim == 4 and keys.shape[0] != B:
            raise ValueError(f"the cache holds {keys.shape[0]} sequences but x has {B}: batch sizes must match")
        return state  # the attention module checks each pair's shapes


def _check_dropout(dropout) -> None:
    check_number("dropout", dropout, 0, 1, high_open=True, hint="the probability of zeroing an activation")


def _init_weights(module: nn.Module) -> None:
    """Small normal initial weights (std 0.02, as in GPT-2): keeps early logits near uniform."""
    if isinstance(module, (nn.Linear, nn.Embedding)):
        nn.init.normal_(module.weight, mean=0.0, std=0.02)
        if getattr(module, "bias", None) is not None:
            nn.init.zeros_(module.bias)


def shipped_checkpoint_path() -> Path:
    """Where the pretrained transformer checkpoint lives inside the package. Introduced in notebook 10."""
    return Path(__file__).resolve().parent / "data" / SHIPPED_CHECKPOINT


def save_model(checkpoint: dict, path) -> None:
    """Mark a checkpoint dict (from :func:`train`) as a transformer's; save it atomically.

    The dict must hold state dicts and plain data only, and a model whose
    output size equals its vocabulary's length. Introduced in notebook 10.
    """
    if not isinstance(checkpoint, dict):
        raise TypeError(f"checkpoint must be the dict transformer.train returned, got {describe(checkpoint)}")
    if "model_config" not in checkpoint or "model" not in checkpoint:
        raise ValueError("save_model expects a checkpoint dict with 'model_config' and 'model' (from train)")
    if "num_heads" not in checkpoint["model_config"]:
        raise ValueError("save_model got an LSTM's checkpoint (its model_config has no num_heads): save it with "
                         "checkpoints.save_checkpoint")  # fmt: skip
    save_checkpoint({**checkpoint, "architecture": ARCHITECTURE}, check_path("path", path))


def load_model(path=None, map_location="cpu"):
    """``(model, itos, checkpoint)`` from a transformer checkpoint; the shipped one when ``path`` is None.

    Loaded with ``weights_only=True`` (through :func:`mllm_utils.checkpoints.load_checkpoint`);
    the model comes back in eval mode. An LSTM checkpoint, or one whose parts
    do not fit together, is refused with a :class:`~mllm_utils.checkpoints.CheckpointError`.
    Introduced in notebook 10.
    """
    path = shipped_checkpoint_path() if path is None else path
    checkpoint = check_model_checkpoint(load_checkpoint(path, map_location), ARCHITECTURE, path)
    return build_model(TransformerLM, checkpoint, path), checkpoint["itos"], checkpoint


def train(
    model: TransformerLM,
    train_data: torch.Tensor,
    val_data: torch.Tensor,
    itos: list[str],
    checkpoint_path=None,
    steps: int = 200,
    batch_size: int = 16,
    seq_len: int | None = None,
    lr: float = 2e-3,
    lr_min: float = 1e-4,
    warmup: int = 20,
    clip: float = 1.0,
    eval_every: int = 50,
    eval_tokens: int | None = 32_768,
    seed: int = 0,
    log=print,
) -> dict:
    """Train for a fixed number of steps on shuffled windows; validate and checkpoint every ``eval_every``.

    A step budget (not epochs) because on a CPU one pass over the novel takes
    longer than the whole run: the windows (``seq_len``, default the model's
    ``context_len``) are cut at a random offset and shuffled; when a pass ends
    the next one starts from a new offset and order, until ``steps`` batches.
    Adam with warm-up and cosine decay (:func:`mllm_utils.chartrain.lr_at`), gradient-norm clipping (one
    :func:`mllm_utils.chartrain.train_step` per batch, as the LSTM), validation with
    :func:`mllm_utils.chartrain.evaluate` (the 07 protocol: 64-character windows) on
    the first ``eval_tokens`` validation characters (``None``: all of them).
    Returns the checkpoint dict (``"history"`` holds the losses); its weights and
    Adam's state are CPU copies, so it loads on any device.
    Training runs where the model lives (move it first: ``model.to(device)``).
    Under ``MLLM_SMOKE=1`` only a few steps run. Introduced in notebook 10.
    """
    if not isinstance(model, TransformerLM):
        raise TypeError(f"model must be a TransformerLM (for a CharLSTM use charlstm.train), got {describe(model)}")
    checkpoint_path = check_path("checkpoint_path", checkpoint_path, none_ok=True)
    if checkpoint_path is not None:  # a folder, or a file in the way, is refused now, not at the first save
        check_writable_path("checkpoint_path", checkpoint_path)
    check_int("steps", steps, 1, hint="the number of training batches")
    check_int("seq_len", seq_len, 1, model.context_len, none_ok=True, hint="at most the model's context_len")
    seq_len = model.context_len if seq_len is None else seq_len
    check_int("eval_every", eval_every, 1, hint="validate every this many steps")
    check_run(model, train_data, val_data, itos, batch_size=batch_size, seq_len=seq_len, lr=lr, lr_min=lr_min,
              warmup=warmup, clip=clip, seed=seed, log=log)  # fmt: skip
    val_seq_len = min(POST_SEQ_LEN, model.context_len)
    check_int("eval_tokens", eval_tokens, val_seq_len, none_ok=True,
              hint=f"the validation characters to score; one window needs {val_seq_len}")  # fmt: skip
    if len(val_data) < val_seq_len + 1:
        raise ValueError(f"val_data has {len(val_data)} tokens, too few for one validation window of {val_seq_len}")
    check_batches_fit(train_data, batch_size, seq_len)
    if smoke():  # MLLM_SMOKE=1: the same code path, a few steps, one evaluation at the end
        steps = min(steps, SMOKE_STEPS)
    device = model_device(model)  # the data stays on the CPU; each batch moves
    gen = torch.Generator().manual_seed(seed)  # the data's order, on the CPU with the data

    def endless_batches():  # pass after pass, each from a new random offset and order
        while True:
            offset = int(torch.randint(seq_len, (1,), generator=gen))
            yield from window_batches(train_data, batch_size, seq_len, generator=gen, offset=offset, drop_last=True)

    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    config = {"steps": steps, "batch_size": batch_size, "seq_len": seq_len, "lr": lr, "lr_min": lr_min,
              "warmup": warmup, "clip": clip, "seed": seed, "eval_tokens": eval_tokens, "val_seq_len": val_seq_len}
    checkpoint = new_checkpoint(model, itos, config, HISTORY_KEYS, ARCHITECTURE)
    history = checkpoint["history"]
    model.train()
    started = time.perf_counter()
    batches = endless_batches()
    for step in progress(range(1, steps + 1), desc="training"):
        X, Y = (t.to(device) for t in next(batches))
        loss, _ = train_step(model, optimizer, X, Y, lr_at(step - 1, steps, lr, lr_min, warmup), clip,
                             where=f" at step {step}")  # fmt: skip
        checkpoint["step"], checkpoint["token_steps"] = step, checkpoint["token_steps"] + Y.numel()
        history["step"].append(round(loss, 4))
        if step % eval_every == 0 or step == steps:
            val = evaluate(model, val_data, val_seq_len, max_tokens=eval_tokens, device=device)
            model.train()
            checkpoint["train_seconds"] = time.perf_counter() - started
            for key, value in (("val", val), ("val_step", step), ("token_steps", checkpoint["token_steps"]),
                               ("seconds", checkpoint["train_seconds"])):  # fmt: skip
                history[key].append(value)
            took = format_duration(checkpoint["train_seconds"])
            log(f"step {step}: train {loss:.4f}, validation {val:.4f} nats/char, "
                f"{checkpoint['token_steps']:,} token-steps, {took}")  # fmt: skip
            if checkpoint_path is not None:
                checkpoint["model"] = weights_of(model)
                checkpoint["optimizer"] = optimizer_state_of(optimizer)
                save_model(checkpoint, checkpoint_path)
    model.eval()
    checkpoint["model"] = weights_of(model)
    checkpoint["optimizer"] = optimizer_state_of(optimizer)
    return checkpoint
