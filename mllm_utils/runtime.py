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

Smoke test
----------
``MLLM_SMOKE=1`` (CI's ``python tools/full_size.py smoke``) runs the *full* size's
code paths (full data, full models, full-size plots and tables) with every
training loop capped to a few steps, so that a broken full-size branch fails
in minutes. The package's loops cap themselves; a notebook's own loop asks
:func:`smoke_cap` for its number of steps, and a check of what training
achieved asks :func:`smoke` whether it may expect anything.

Devices
-------
:func:`device` picks the fastest device; :func:`model_device` says where a
model lives (the package's loops and evaluations run there unless told
otherwise); :func:`synchronize` waits for a GPU before a timer is read.

Times and counts in words
-------------------------
:func:`format_duration` writes a duration so that it reads right at any speed
(``"38 seconds"``, ``"1 minute 16 seconds"``, ``"23 minutes"``, ``"37 hours"``:
never ``"0 hours"`` or ``"1 minutes"``); :func:`plural` writes a count with its
noun (``"1 epoch"``, ``"3,000 steps"``). The notebooks print times with them,
since the same cell runs in seconds on a GPU and in hours on a CPU.
"""

from __future__ import annotations

import os
import random

import numpy as np
import torch

from mllm_utils._validate import check_int, check_number, check_str

QUICK_ENV = "MLLM_QUICK"
SMOKE_ENV = "MLLM_SMOKE"
SMOKE_STEPS = 2  # what smoke_cap() allows a loop by default


def smoke() -> bool:
    """True under ``MLLM_SMOKE=1``: the full size's code paths with training capped (see the module notes)."""
    value = os.environ.get(SMOKE_ENV, "").strip()
    if value in ("", "0"):
        return False
    if value == "1":
        return True
    raise ValueError(f"{SMOKE_ENV}={value!r} is not understood: use {SMOKE_ENV}=1 for the smoke test, or unset it")


def smoke_cap(n: int, cap: int = SMOKE_STEPS) -> int:
    """``n``, or at most ``cap`` under ``MLLM_SMOKE=1``: the number of steps (epochs, batches) a loop runs.

    A notebook writes ``for step in range(smoke_cap(STEPS)):``; at the quick and
    the full size this is ``range(STEPS)``, in the smoke test a few steps.
    """
    check_int("n", n, 0, hint="the number of steps the loop runs")
    check_int("cap", cap, 1)
    return min(n, cap) if smoke() else n


def run_size() -> str:
    """Return ``"quick"`` or ``"full"`` from ``MLLM_QUICK`` or, if unset, the machine.

    The smoke test (``MLLM_SMOKE=1``) is always the full size.
    """
    value = os.environ.get(QUICK_ENV, "").strip()
    if smoke():
        if value == "1":
            raise ValueError(f"{SMOKE_ENV}=1 runs the full size's code paths: it cannot go with {QUICK_ENV}=1")
        return "full"
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


def _gpu_name() -> str | None:
    if not torch.cuda.is_available():
        return None
    try:
        return torch.cuda.get_device_name(0)
    except (RuntimeError, AssertionError):  # a driver that lists a GPU it cannot open
        return "a CUDA GPU"


def _size_reason() -> str:
    value = os.environ.get(QUICK_ENV, "").strip()
    if smoke():
        return f"{SMOKE_ENV}=1: a smoke test, every training loop capped at a few steps"
    if value:
        return f"{QUICK_ENV}={value}"
    gpu = _gpu_name()
    return f"a GPU was found: {gpu}" if gpu else "no GPU was found"


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


def model_device(model: torch.nn.Module) -> torch.device:
    """Where ``model`` lives: the device of its first parameter (or buffer); the CPU if it has neither."""
    for tensor in model.parameters():
        return tensor.device
    for tensor in model.buffers():
        return tensor.device
    return torch.device("cpu")


FLOAT32_ONLY_DEVICES = {"mps"}  # device types without float64 (Apple's MPS)


def wide_float(device) -> torch.dtype:
    """The widest float dtype ``device`` computes in: float64, but float32 on Apple's MPS (it has no float64).

    Every sum the package takes in float64 asks this first, so the same code runs on MPS.
    """
    return torch.float32 if torch.device(device).type in FLOAT32_ONLY_DEVICES else torch.float64


def synchronize(device=None) -> None:
    """Wait until ``device`` (default: every CUDA or MPS device in use) has finished its queued work.

    GPU operations return before they finish: read a timer only after this, or
    a GPU looks many times faster than it is. Does nothing on a CPU.
    """
    kind = torch.device(device).type if device is not None else None
    if kind in (None, "cuda") and torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize(device if kind == "cuda" else None)
    mps = getattr(torch, "mps", None)
    if kind in (None, "mps") and mps is not None and torch.backends.mps.is_available():
        mps.synchronize()


def plural(count: int, noun: str, plural_form: str | None = None) -> str:
    """``count`` with its noun, in the singular for exactly 1: ``"1 epoch"``, ``"22 epochs"``, ``"3,000 steps"``.

    ``plural_form`` is the noun's plural where adding an "s" is wrong (``plural(2, "batch", "batches")``).
    """
    check_int("count", count, hint="a whole number of things (use format_duration for times)")
    check_str("noun", noun, empty_ok=False, hint="the thing counted, in the singular, e.g. 'epoch'")
    check_str("plural_form", plural_form, none_ok=True, empty_ok=False, hint="the noun's plural, e.g. 'batches'")
    return f"{count:,} {noun if count == 1 else plural_form or noun + 's'}"


def format_duration(seconds: float) -> str:
    """A duration in words that reads right at any speed, from a tenth of a second to days.

    - under 10 seconds: one decimal, ``"0.4 seconds"``, ``"3.5 seconds"`` (``"under 0.1 seconds"`` below 0.05);
    - under a minute: whole seconds, ``"38 seconds"``;
    - under 10 minutes: minutes and seconds, ``"1 minute 16 seconds"``, ``"2 minutes"``;
    - under 2 hours: whole minutes, ``"23 minutes"``, ``"111 minutes"``;
    - under 10 hours: hours and minutes, ``"3 hours 20 minutes"``;
    - from 10 hours: whole hours, ``"37 hours"``.

    The singular where the number is exactly 1 (``"1 minute"``, ``"1 second"``); never ``"0 hours"`` or
    ``"0.0 minutes"``: a unit is chosen so that the number printed is at least 1 (or the time is under 0.1 s).
    """
    check_number("seconds", seconds, 0, hint="a duration in seconds, e.g. time.perf_counter() - start")
    seconds = float(seconds)
    if seconds < 0.05:
        return "under 0.1 seconds"
    if round(seconds, 1) < 10:
        tenths = f"{seconds:.1f}".removesuffix(".0")
        return f"{tenths} second{'' if tenths == '1' else 's'}"
    whole = round(seconds)
    if whole < 60:
        return plural(whole, "second")
    if whole < 600:
        minutes, rest = divmod(whole, 60)
        return plural(minutes, "minute") + (f" {plural(rest, 'second')}" if rest else "")
    total_minutes = round(seconds / 60)
    if total_minutes < 120:
        return plural(total_minutes, "minute")
    if total_minutes < 600:
        hours, rest = divmod(total_minutes, 60)
        return plural(hours, "hour") + (f" {plural(rest, 'minute')}" if rest else "")
    return plural(round(seconds / 3600), "hour")


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


def _check_phrase(name: str, value, hint: str) -> str | None:
    if value is None:
        return None
    check_str(name, value, empty_ok=False, hint=hint)
    if "\n" in value or value.rstrip().endswith("."):
        raise ValueError(f"{name} must be one phrase on one line with no full stop at the end (start() prints it "
                         f"inside a sentence), got {value!r}")  # fmt: skip
    return value


def start(
    quick_time: str,
    full_time: str | None = None,
    seed: int = 0,
    *,
    gpu_time: str | None = None,
    gpu_measured: dict[str, str] | None = None,
    full_does: str | None = None,
    afterwards: str | None = None,
) -> str:
    """Seed everything, choose the run size and print what a learner should expect.

    Parameters
    ----------
    quick_time, full_time:
        How long the whole notebook takes at each size on a CPU, measured, with
        the machine named, e.g. ``"under 1 minute on a 2-core CPU"`` and ``"about
        20 minutes on a 2-core CPU"``: one phrase each, at most one level of
        parentheses, no full stop. ``full_time=None`` says the notebook has one
        size only (it never reads the run size): then ``quick_time`` is its time
        at either size, and no switch is offered.
    seed:
        The seed for Python, NumPy and PyTorch.
    gpu_time:
        For a notebook whose full size runs on a GPU when there is one: its time
        there, saying whether it was measured or estimated and on which GPU
        (``"an estimated 10 minutes on a T4 GPU, from FLOPs"``). Printed as the
        expected time where a GPU is found. Without it, a GPU machine is told
        that the notebook runs on the CPU anyway, and how long that takes.
    gpu_measured:
        Times measured on particular GPUs, each keyed by a part of the GPU's
        name (``{"H100": "about 2 minutes on an NVIDIA H100, measured"}``): on a
        GPU whose name contains a key (in any case), its phrase is the expected
        time; on any other GPU, ``gpu_time`` (then an estimate). Each phrase
        says "measured". Needs ``gpu_time``.
    full_does:
        What the full size does beyond the quick one, e.g. ``"trains the LSTM
        from scratch for 22 epochs"`` (completes "it ...").
    afterwards:
        What the model the learner trains at the full size is used for after
        its training, e.g. ``"the later sections evaluate and sample your LSTM"``.

    Prints the size and why (the GPU's name when one decided it), the expected
    time (on a GPU: named, with the time measured on its kind where there is
    one, the estimate otherwise), what the full size does and what follows from it (at the full size),
    and how to switch to the other size, with its time. Returns ``"quick"`` or
    ``"full"``.
    """
    _check_time("quick_time", quick_time)
    if full_time is not None:
        _check_time("full_time", full_time)
    if gpu_time is not None:
        _check_time("gpu_time", gpu_time)
        if not any(word in gpu_time for word in ("measured", "estimated")):
            raise ValueError(f"gpu_time must say whether it was measured or estimated, got {gpu_time!r}")
    if gpu_measured is not None:
        if gpu_time is None:
            raise ValueError("gpu_measured gives times on particular GPUs: give gpu_time too, for any other GPU")
        if not isinstance(gpu_measured, dict) or not gpu_measured:
            example = "{'H100': 'about 2 minutes on an NVIDIA H100, measured'}"
            raise TypeError(f"gpu_measured must be a dict from a part of a GPU's name to its measured time, e.g. "
                            f"{example}, got {gpu_measured!r}")  # fmt: skip
        for key, phrase in gpu_measured.items():
            check_str("a key of gpu_measured", key, empty_ok=False, hint="a part of the GPU's name, e.g. 'H100'")
            _check_time(f"gpu_measured[{key!r}]", phrase)
            if "measured" not in phrase:
                raise ValueError(f"gpu_measured[{key!r}] must say that it was measured, got {phrase!r}")
    _check_phrase("full_does", full_does, "what the full size does, e.g. 'trains the LSTM from scratch'")
    _check_phrase("afterwards", afterwards, "what the model trained at the full size is used for afterwards")
    if full_time is None and (gpu_time or full_does or afterwards):
        raise ValueError("gpu_time, full_does and afterwards describe the full size: give full_time too")
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
    on_gpu = torch.cuda.is_available()
    expected = "Expected time"
    if gpu_time is None:
        full_here = f"{full_time}, on the CPU even where there is a GPU" if on_gpu else full_time
        full_all = full_time
    else:
        with_gpu = ", ".join([*(gpu_measured or {}).values(), gpu_time])
        full_all = f"{full_time}; with a GPU, {with_gpu}"
        full_here = full_all
        if on_gpu:
            name = _gpu_name()
            full_here = next((phrase for key, phrase in (gpu_measured or {}).items() if key.lower() in name.lower()),
                             gpu_time)  # fmt: skip
            expected = f"Expected time on this GPU, {name}"
    if size == "quick":
        print(f"Expected time: {quick_time}")
        does = f"; it {full_does}" if full_does else ""
        print(f"Full size: {full_all}{does}. To run it, set {QUICK_ENV}=0 in the environment and restart the kernel.")
        return size
    print(f"{expected}: {full_here}")
    if full_does or afterwards:
        parts = [f"It {full_does}" if full_does else None, afterwards]
        text = "; ".join(p for p in parts if p)
        print(text[0].upper() + text[1:] + ".")
    print(f"Quick size: {quick_time}. To run it, set {QUICK_ENV}=1 in the environment and restart the kernel.")
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


RUN_TIMES_FILE = "run_times.json"  # package data: each notebook's measured quick run time (tools/run_times.py)


def quick_time(notebook: str, detail: str | None = None) -> str:
    """The measured quick-size run time of ``notebook`` (``"05_lstm"``), as ``start(quick_time=...)`` prints it:
    ``"about 27 seconds on a 2-core CPU, as measured for the course"``, ``detail`` added in parentheses.

    The seconds come from ``mllm_utils/data/run_times.json``, written by ``tools/run_times.py write`` from the
    time ``tools/notebooks.py run`` measured (the same figure as the README's and ``student/README.md``'s tables).
    """
    import json
    from importlib import resources

    check_str("notebook", notebook, empty_ok=False, hint="the notebook's name without .ipynb, e.g. '05_lstm'")
    times = json.loads((resources.files("mllm_utils") / "data" / RUN_TIMES_FILE).read_text(encoding="utf-8"))
    if notebook not in times:
        raise ValueError(f"notebook: no measured run time for {notebook!r}; known: {', '.join(times)}")
    phrase = f"about {format_duration(times[notebook])} on a 2-core CPU, as measured for the course"
    if detail is not None:
        check_str("detail", detail, empty_ok=False, hint="what the quick size runs, e.g. 'the lengths 4 to 20'")
        phrase += f" ({detail})"
    return _check_time("quick_time", phrase)
