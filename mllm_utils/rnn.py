"""A recurrent network written by hand, and the toy sequence tasks it learns.

``RNN`` is the Elman network of notebook 03, packed into an ``nn.Module`` in
notebook 04 (weights as ``nn.Parameter``s, so the optimizer finds them);
notebook 05 compares it with an LSTM. ``sequence_data`` builds the two toy
data sets: counting (notebook 04) and remembering the first element
(notebook 05).

Shapes follow ``torch.nn.RNN``'s default: time first, ``(L, B, D)``, or
``(L, D)`` for a single unbatched sequence.

Introduced in notebook 04 (learning to count).
"""

from __future__ import annotations

import math

import torch
from torch import nn

from mllm_utils._validate import check_choice, check_int, check_tensor

TASKS = ("count", "first")


class RNN(nn.Module):
    """An Elman RNN layer: ``h_t = tanh(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh)``.

    Introduced in notebook 04. Parameter names and shapes match
    ``torch.nn.RNN``'s ``weight_ih_l0`` etc., and so does the initialisation
    (uniform in ``[-1/sqrt(hidden_dim), 1/sqrt(hidden_dim)]``), so weights can
    be copied between the two.
    """

    def __init__(self, input_dim: int, hidden_dim: int):
        super().__init__()
        check_int("input_dim", input_dim)
        check_int("hidden_dim", hidden_dim)
        if input_dim < 1 or hidden_dim < 1:
            raise ValueError(
                f"input_dim and hidden_dim must be positive, got {input_dim} and {hidden_dim}"
            )
        self.input_dim, self.hidden_dim = input_dim, hidden_dim
        self.w_ih = nn.Parameter(torch.empty(hidden_dim, input_dim))
        self.w_hh = nn.Parameter(torch.empty(hidden_dim, hidden_dim))
        self.b_ih = nn.Parameter(torch.empty(hidden_dim))
        self.b_hh = nn.Parameter(torch.empty(hidden_dim))
        bound = 1 / math.sqrt(hidden_dim)
        for p in self.parameters():
            nn.init.uniform_(p, -bound, bound)

    def forward(self, x: torch.Tensor, h: torch.Tensor | None = None):
        """Run over ``x`` of shape ``(L, B, input_dim)`` or ``(L, input_dim)``.

        ``h`` is the hidden state to start from (zeros if ``None``), of shape
        ``(B, hidden_dim)`` or ``(hidden_dim,)``. Returns ``(out, h)``: every
        step's hidden state ``(L, [B,] hidden_dim)`` and the last one.
        """
        check_tensor("x", x, floating=True, hint="the RNN reads float vectors, e.g. one-hot: F.one_hot(ids).float()")
        if x.ndim not in (2, 3) or x.shape[-1] != self.input_dim:
            raise ValueError(
                f"x must have shape (L, B, {self.input_dim}) or (L, {self.input_dim}), "
                f"got {tuple(x.shape)}"
            )
        if x.shape[0] == 0:
            raise ValueError(f"x has no time steps (shape {tuple(x.shape)}): give at least one")
        if x.dtype != self.w_ih.dtype:
            raise TypeError(f"x has dtype {x.dtype} but the RNN's weights are {self.w_ih.dtype}: convert one, "
                            f"e.g. x.to({self.w_ih.dtype})")  # fmt: skip
        if h is None:
            h = x.new_zeros(*x.shape[1:-1], self.hidden_dim)
        elif check_tensor("h", h, floating=True).shape != (*x.shape[1:-1], self.hidden_dim):
            raise ValueError(
                f"h must have shape {(*x.shape[1:-1], self.hidden_dim)} for this x, "
                f"got {tuple(h.shape)}"
            )
        # The input half of every step does not depend on h: one matmul for all steps.
        x_part = x @ self.w_ih.T + self.b_ih
        out = []
        for t in range(x.shape[0]):
            h = torch.tanh(x_part[t] + h @ self.w_hh.T + self.b_hh)
            out.append(h)
        return torch.stack(out), h


def sequence_data(task: str, seq_len: int, vocab_size: int = 128):
    """All runs of ``seq_len`` consecutive numbers in ``0..vocab_size-1``, one-hot, with targets.

    ``task="count"`` (notebook 04): the target at each step is the next
    number, so the run starting at ``s`` has targets ``s+1 .. s+seq_len``.
    ``task="first"`` (notebook 05): the target at every step is the run's
    first number ``s``.

    Returns ``(X, Y)``: ``X`` of shape ``(seq_len, N, vocab_size)`` (float
    one-hot, time first like ``nn.RNN``) and ``Y`` of shape ``(seq_len, N)``
    (labels), where ``N = vocab_size - seq_len`` runs start at ``0 .. N-1``.
    ``X`` has PyTorch's default float type: float32 unless changed with
    ``torch.set_default_dtype`` (notebook 05 trains in float64).

    Introduced in notebook 04.
    """
    check_choice("task", task, TASKS)
    check_int("seq_len", seq_len)
    check_int("vocab_size", vocab_size, 2)
    if seq_len < 1 or seq_len >= vocab_size:
        raise ValueError(
            f"seq_len must be between 1 and vocab_size - 1 = {vocab_size - 1}, got {seq_len}: "
            "every run and its next number must fit in 0..vocab_size-1"
        )
    starts = torch.arange(vocab_size - seq_len)
    steps = torch.arange(seq_len)
    inputs = steps[:, None] + starts[None, :]  # (L, N): column n is the run starting at n
    if task == "count":
        targets = inputs + 1
    else:
        targets = starts.expand(seq_len, -1).clone()
    X = nn.functional.one_hot(inputs, num_classes=vocab_size).to(torch.get_default_dtype())
    return X, targets
