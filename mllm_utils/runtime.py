"""Run size (quick or full), seeding and device choice for the notebooks.

Every notebook calls :func:`start` in its first code cell after the setup
cell. It seeds every random number generator, decides the run size and
prints what was chosen, how long the notebook should take and how to switch.

Run size
--------
``MLLM_QUICK=1`` means *quick* (CI, laptops: minutes), ``MLLM_QUICK=0`` means
*full* (the posts' own settings, meant for a GPU). When the variable is unset
the machine decides: full where a CUDA GPU is available, quick otherwise, so
that a learner on a laptop never starts a day-long training by accident.
"""

from __future__ import annotations

import os
import random

import numpy as np
import torch

from mllm_utils._validate import check_int, check_str

QUICK_ENV = "MLLM_QUICK"


def run_size() -> str:
    """Return ``"quick"`` or ``"full"`` from ``MLLM_QUICK`` or, if unset, the machine."""
    value = os.environ.get(QUICK_ENV, "").strip()
    if value == "1":
        return "quick"
    if value == "0":
        return "full"
    if value:
        raise ValueError(
            f"{QUICK_ENV}={value!r} is not understood: use {QUICK_ENV}=1 for the quick "
            f"size or {QUICK_ENV}=0 for the full size (or leave it unset to let the "
            "machine decide)."
        )
    return "full" if torch.cuda.is_available() else "quick"


def is_quick() -> bool:
    """True when the notebooks run at their quick size (see :func:`run_size`)."""
    return run_size() == "quick"


def _size_reason() -> str:
    value = os.environ.get(QUICK_ENV, "").strip()
    if value:
        return f"{QUICK_ENV}={value}"
    return "a GPU was found" if torch.cuda.is_available() else "no GPU was found"


def seed_everything(seed: int = 0) -> None:
    """Seed Python's, NumPy's and PyTorch's random number generators."""
    check_int("seed", seed, 0, 2**32 - 1, hint="NumPy takes seeds from 0 to 2**32 - 1")
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def device() -> torch.device:
    """The fastest device here: CUDA, then Apple's MPS, then the CPU.

    Cells whose printed numbers are compared by nbval run on the CPU instead,
    because the same seed gives different numbers on different devices.
    """
    if torch.cuda.is_available():
        return torch.device("cuda")
    if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def _check_time(name: str, value: str) -> str:
    """A time estimate is one phrase: one level of parentheses at most, no full stop at the end."""
    check_str(name, value, empty_ok=False, hint="how long the notebook takes, e.g. 'about 1 minute on a CPU'")
    depth = 0
    for char in value:
        depth += {"(": 1, ")": -1}.get(char, 0)
        if depth < 0 or depth > 1:
            break
    if depth != 0 or "\n" in value or value.rstrip().endswith("."):
        raise ValueError(
            f"{name} must be one phrase on one line, with balanced parentheses that do not nest and no "
            f"full stop at the end (start() prints it inside a sentence), got {value!r}"
        )
    return value


def start(quick_time: str, full_time: str | None = None, seed: int = 0) -> str:
    """Seed everything, choose the run size and print what a learner should expect.

    Parameters
    ----------
    quick_time, full_time:
        How long the whole notebook takes at each size, e.g. ``"under 1 minute on
        a 2-core CPU"`` and ``"about 20 minutes on a GPU"``: one phrase each, at
        most one level of parentheses, no full stop. ``full_time=None`` says the
        notebook has one size only (it never reads the run size): then
        ``quick_time`` is its time at either size, and no switch is offered.
    seed:
        The seed for Python, NumPy and PyTorch.

    Prints three lines: the size and why, the expected time, and either how to
    switch to the other size (with its time) or that the notebook has one size.
    Returns ``"quick"`` or ``"full"``.
    """
    _check_time("quick_time", quick_time)
    if full_time is not None:
        _check_time("full_time", full_time)
    seed_everything(seed)
    size = run_size()
    print(f"Run size: {size} ({_size_reason()}), seed {seed}")
    if full_time is None:
        other = "full" if size == "quick" else "quick"
        print(f"Expected time: {quick_time}")
        print(
            f"This notebook has one size only: the {other} size ({QUICK_ENV}={'0' if other == 'full' else '1'}) "
            "runs the same settings."
        )
        return size
    other, other_time = ("full", full_time) if size == "quick" else ("quick", quick_time)
    print(f"Expected time: {quick_time if size == 'quick' else full_time}")
    print(
        f"{other.capitalize()} size: {other_time}. To run it, set {QUICK_ENV}={'0' if other == 'full' else '1'} "
        "in the environment and restart the kernel."
    )
    return size


def progress(iterable=None, **kwargs):
    """A ``tqdm.auto`` progress bar that honours ``TQDM_DISABLE=1``.

    tqdm's notebook bar passes ``disable=False`` itself, which overrides the
    environment variable, so tests and committed runs (which set it) would store
    progress widgets with timings in them. Keyword arguments go to tqdm.
    """
    from tqdm.auto import tqdm

    if iterable is not None and not hasattr(iterable, "__iter__"):
        raise TypeError(f"progress takes an iterable (e.g. range(n)) or None, got {type(iterable).__name__}")
    if os.environ.get("TQDM_DISABLE", "").strip().lower() in ("1", "true", "yes"):
        kwargs["disable"] = True
    return tqdm(iterable, **kwargs)
