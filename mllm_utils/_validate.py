"""Argument checks shared by the package's public functions: one wording for every mistake.

Every check raises ``TypeError`` (the wrong kind of value: a float where a count
belongs, a string where a list of them does) or ``ValueError`` (the right kind
with a value out of range) with a message that names the argument, shows what
it got and says what it needs, e.g. ``batch_size must be an int >= 1, got 0``.
A ``hint`` adds what to do. Each check returns the value unchanged, so a valid
call computes exactly what it computed before the check existed.

Internal: the public functions of the other modules call these.
"""

from __future__ import annotations

import math
import numbers
import os
from pathlib import Path

import torch  # only its functions are used, so that `import mllm_utils` stays free of torch work


def _integer_dtypes() -> tuple:
    return (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8)


def describe(value) -> str:
    """A short description of ``value`` for an error message."""
    if isinstance(value, torch.Tensor):
        return f"a tensor of shape {tuple(value.shape)} and dtype {value.dtype}"
    text = repr(value)
    if "\n" in text:  # a module's or a big object's repr: its type says enough
        return f"a {type(value).__name__}"
    if len(text) > 60:
        text = text[:57] + "..."
    if value is None or isinstance(value, (bool, int, float, str)):
        return text
    return f"{text} ({type(value).__name__})"


def _tail(hint: str) -> str:
    return f": {hint}" if hint else ""


def _range_text(minimum, maximum, low_open=False, high_open=False) -> str:
    if minimum is not None and maximum is not None:
        return f"in {'(' if low_open else '['}{minimum}, {maximum}{')' if high_open else ']'}"
    if minimum is not None:
        return f"{'>' if low_open else '>='} {minimum}"
    if maximum is not None:
        return f"{'<' if high_open else '<='} {maximum}"
    return ""


def check_int(name: str, value, minimum: int | None = None, maximum: int | None = None, *,
              none_ok: bool = False, hint: str = ""):  # fmt: skip
    """``value`` must be an int (not a bool, not a float such as ``32.0``) within the bounds."""
    if value is None and none_ok:
        return None
    need = " ".join(filter(None, ["an int", _range_text(minimum, maximum)])) + (" or None" if none_ok else "")
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be {need}, got {describe(value)}{_tail(hint)}")
    if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
        raise ValueError(f"{name} must be {need}, got {value}{_tail(hint)}")
    return value


def check_number(name: str, value, minimum=None, maximum=None, *, low_open: bool = False,
                 high_open: bool = False, none_ok: bool = False, hint: str = ""):  # fmt: skip
    """``value`` must be a finite real number (int or float, not a bool) within the bounds."""
    if value is None and none_ok:
        return None
    need = " ".join(filter(None, ["a finite number", _range_text(minimum, maximum, low_open, high_open)]))
    need += " or None" if none_ok else ""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be {need}, got {describe(value)}{_tail(hint)}")
    too_low = minimum is not None and (value <= minimum if low_open else value < minimum)
    too_high = maximum is not None and (value >= maximum if high_open else value > maximum)
    if not math.isfinite(value) or too_low or too_high:
        raise ValueError(f"{name} must be {need}, got {value!r}{_tail(hint)}")
    return value


def check_bool(name: str, value, hint: str = "") -> bool:
    """``value`` must be ``True`` or ``False``."""
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be True or False, got {describe(value)}{_tail(hint)}")
    return value


def check_str(name: str, value, *, none_ok: bool = False, empty_ok: bool = True, hint: str = ""):
    """``value`` must be a string (non-empty unless ``empty_ok``)."""
    if value is None and none_ok:
        return None
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str{' or None' if none_ok else ''}, got {describe(value)}{_tail(hint)}")
    if not empty_ok and not value:
        raise ValueError(f"{name} must not be empty{_tail(hint)}")
    return value


def check_choice(name: str, value, choices, hint: str = ""):
    """``value`` must be one of ``choices``."""
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{name} must be one of {tuple(choices)}, got {describe(value)}{_tail(hint)}")
    return value


def check_callable(name: str, value, *, none_ok: bool = False, hint: str = ""):
    """``value`` must be callable (a function, a lambda, a module...)."""
    if value is None and none_ok:
        return None
    if not callable(value):
        raise TypeError(f"{name} must be callable (a function){' or None' if none_ok else ''}, "
                        f"got {describe(value)}{_tail(hint)}")  # fmt: skip
    return value


def check_path(name: str, value, *, none_ok: bool = False, hint: str = ""):
    """``value`` must be a file-system path (``str`` or ``os.PathLike``); returns a ``Path``."""
    if value is None and none_ok:
        return None
    if not isinstance(value, (str, os.PathLike)):
        raise TypeError(f"{name} must be a file path (str or pathlib.Path){' or None' if none_ok else ''}, "
                        f"got {describe(value)}{_tail(hint)}")  # fmt: skip
    if isinstance(value, str) and not value.strip():
        raise ValueError(f"{name} must be a file path, got an empty string{_tail(hint)}")
    return Path(value)


def check_tensor(name: str, value, *, ndim: int | None = None, integer: bool = False,
                 floating: bool = False, hint: str = "") -> torch.Tensor:  # fmt: skip
    """``value`` must be a tensor with ``ndim`` dimensions and integer (or floating) values."""
    kind = "integer " if integer else "float " if floating else ""
    dims = f"{ndim}-D " if ndim is not None else ""
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"{name} must be a {dims}{kind}tensor, got {describe(value)}{_tail(hint)}")
    if ndim is not None and value.ndim != ndim:
        raise ValueError(f"{name} must be a {dims}tensor, got shape {tuple(value.shape)}{_tail(hint)}")
    if integer and value.dtype not in _integer_dtypes():
        raise TypeError(f"{name} must hold integer token ids, got dtype {value.dtype}{_tail(hint)}")
    if floating and not value.is_floating_point():
        raise TypeError(f"{name} must be a floating-point tensor, got dtype {value.dtype}{_tail(hint)}")
    return value


def check_ids(name: str, ids: torch.Tensor, vocab_size: int, hint: str = "") -> torch.Tensor:
    """Integer token ids must lie in ``[0, vocab_size)``: an embedding has no row for the others."""
    if ids.numel():
        low, high = (int(v) for v in torch.aminmax(ids))
        if low < 0 or high >= vocab_size:
            raise ValueError(
                f"{name} holds token ids from {low} to {high}, but the vocabulary has {vocab_size} entries "
                f"(ids 0 to {vocab_size - 1}){_tail(hint or 'encode the text with the vocabulary of this model')}"
            )
    return ids


def check_itos(name: str, itos, unk: str | None = None) -> list:
    """A vocabulary list (index -> token): a non-empty list of strings, ``unk`` first if given."""
    if isinstance(itos, (str, bytes)) or not isinstance(itos, (list, tuple)):
        raise TypeError(f"{name} must be a list of tokens (index -> token), got {describe(itos)}")
    if not itos:
        raise ValueError(f"{name} is empty: a vocabulary needs at least {unk!r}" if unk else f"{name} is empty")
    bad = next((t for t in itos if not isinstance(t, str)), None)
    if bad is not None:
        raise TypeError(f"{name} must hold strings (tokens), got {describe(bad)} among them")
    if unk is not None and itos[0] != unk:
        raise ValueError(
            f"{name} must start with {unk!r} (index 0 is where unknown characters go), got {itos[0]!r} "
            "first: build it with build_vocab"
        )
    return itos


def check_device(name: str, value):
    """A device PyTorch knows and this machine has: ``"cpu"``, ``"cuda"``, ``"cuda:0"``, ``"mps"``..."""
    if not isinstance(value, (str, torch.device)):
        raise TypeError(f"{name} must be a device such as 'cpu' or 'cuda', got {describe(value)}")
    try:
        device = torch.device(value)
    except (RuntimeError, ValueError):
        raise ValueError(f"{name} must be a device such as 'cpu', 'cuda' or 'mps', got {value!r}") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"{name}={value!r}, but no CUDA GPU is available here: use 'cpu'")
    mps = getattr(torch.backends, "mps", None)
    if device.type == "mps" and not (mps is not None and mps.is_available()):
        raise ValueError(f"{name}={value!r}, but Apple's MPS is not available here: use 'cpu'")
    return value
