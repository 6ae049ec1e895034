"""Checkers for exercise cells: say what matched and by how much.

A check cell calls one of these after a learner's solution; each raises
``AssertionError`` with a readable message when the answer is off, and prints
a one-line confirmation otherwise.
"""

from __future__ import annotations

import torch


def check_shape(name: str, tensor: torch.Tensor, shape: tuple) -> None:
    """Assert ``tensor.shape == shape`` (``None`` in ``shape`` matches any size)."""
    got = tuple(tensor.shape)
    ok = len(got) == len(shape) and all(w is None or g == w for g, w in zip(got, shape, strict=True))
    assert ok, f"{name}: expected shape {tuple(shape)}, got {got}"
    print(f"{name}: shape {got} ok")


def check_close(name: str, got, expected, atol: float = 1e-5, rtol: float = 1e-4) -> None:
    """Assert two tensors (or numbers) are equal up to tolerance; report the largest difference."""
    got_t = torch.as_tensor(got, dtype=torch.float64)
    exp_t = torch.as_tensor(expected, dtype=torch.float64)
    assert got_t.shape == exp_t.shape, f"{name}: expected shape {tuple(exp_t.shape)}, got {tuple(got_t.shape)}"
    diff = (got_t - exp_t).abs().max().item() if got_t.numel() else 0.0
    ok = torch.allclose(got_t, exp_t, atol=atol, rtol=rtol)
    assert ok, f"{name}: largest difference {diff:.3g} is above the tolerance (atol={atol}, rtol={rtol})"
    print(f"{name}: matches (largest difference {'< 1e-6' if diff < 1e-6 else f'{diff:.1e}'})")


def check_equal(name: str, got, expected) -> None:
    """Assert exact equality (lists, strings, ints, bools)."""
    assert got == expected, f"{name}: expected {expected!r}, got {got!r}"
    print(f"{name}: ok")
