"""Checkers for exercise cells: say what was expected, what came, and what to try.

A check cell calls these after a learner's solution. Each accepts tensors, NumPy arrays, lists, tuples
and plain numbers, prints a one-line confirmation when the answer is right, and otherwise raises
:class:`CheckFailed` (an ``AssertionError``, so nbgrader and pytest count it as a failed test) with a
message of three parts: what was expected, what came, and a hint. A wrong *kind* of answer (``None``
because a function forgot to ``return``, a string where a number belongs) is reported the same way,
never as a Python type error from inside the checker.

The checkers compare real values only, so that an answer cannot decide its own check: tensors must be
plain ``torch.Tensor`` (a subclass is refused), compared with every ``__torch_function__`` override and
mode switched off; arrays plain ``numpy.ndarray`` with numbers in them; containers exactly ``list``,
``tuple`` and ``dict``; scalars Python's or NumPy's own. An object that defines its own ``==`` is refused,
never asked.

    check_shape("logits", logits, (B, T, V))          # None in the shape matches any size
    check_close("loss", loss, 2.3026, atol=1e-3)      # numbers and arrays, up to tolerance
    check_equal("tokens", tokens, ["the", "cat"])     # exact, kinds too: a list is not a tuple, an int not a
                                                      # float, a tensor's dtype counts
    check_true("accuracy", acc >= 0.9, expected="at least 0.9", got=acc, hint="train for all 100 epochs")

Diagnosis, not only comparison: ``check_close`` and ``check_equal`` take the usual mistakes of an exercise and
the values they give; a wrong answer that gives one of them is told that mistake in one line (and no hint, which
could be about another); any other is told where the values first differ (index, expected, got), the hint then
coming as things to check. ``attempt`` runs the learner's function so that an error inside it is reported as a
failed check with the line of the learner's code it came from:

    out = attempt("mask", combined_mask, ids, pad_id=0)
    check_equal("mask", out, expected, mistakes={"the mask is inverted: True must mark a blocked key": ~expected,
                                                 "compares with 0, not with pad_id": lambda: reference(ids, 0)})

What a check may watch while it runs a learner's function (each a context manager, so that the same check
runs in the learner's notebook and in the teacher's grader, where the learner's code runs in another
process and these are observed there):

    with torch_calls() as names: ...                 # names of the torch functions called
    with module_calls(layer) as calls: ...           # one entry per call of the module: its input's shape
                                                     # (with grad=True: (shape, was autograd recording?))
    with function_calls("rnn_forward") as calls: ... # one entry per call of a function of the notebook
    with switched_off("nn.MultiheadAttention"): ...  # calling it raises: "build no layer"
    with may_change(model, optimizer): ...           # arguments the function is meant to change (a training
                                                     # step, a generator's draws); any other must stay as it is
    check_not_called("no fused shortcut", names, ("cross_entropy", "log_softmax"))  # after torch_calls
    weights_of(layer)                                # its parameters and sizes, in a namespace that cannot
                                                     # be called like the layer: "don't run the layer"

An exercise's stub raises :class:`NotDone`; a check cell run before the exercise is written then shows one
line ("exercise 1 is not done yet: write `encode` above") instead of a traceback.
"""

from __future__ import annotations

import linecache
import math
import numbers
import os
import sys
import types
from contextlib import contextmanager
from pathlib import Path
from traceback import walk_tb

import numpy as np
import torch
from torch.overrides import TorchFunctionMode

__all__ = ["CheckFailed", "NotDone", "attempt", "check_close", "check_equal", "check_not_called", "check_shape",
           "check_true", "function_calls", "may_change", "module_calls", "switched_off", "torch_calls", "weights_of"]


class CheckFailed(AssertionError):
    """An exercise check that did not pass; the message says expected, got and a hint."""


def _fail(name: str, problem: str, expected, got, hint: str | None, *, where: str = "", mistake: str = "") -> None:
    """Raise CheckFailed. ``mistake``: the known mistake the result matched (then no hint is shown: it would be
    about another mistake); ``where``: where the values first differ, when no mistake matched (the hint then
    reads as things to check, not as a diagnosis)."""
    lines = [f"{name}: {problem}", f"  expected: {expected}", f"  got:      {got}"]
    if where:
        lines.append(f"  first differs: {where}")
    if hint and not mistake:
        lines.append(f"  {'things to check' if where else 'hint'}: {hint}")
    error = CheckFailed("\n".join(lines))
    # The parts on their own, for the teacher's grader, which builds feedback from some of them only. "where"
    # holds values of the compared case: not for a hidden test's feedback.
    error.parts = {"name": str(name), "problem": str(problem), "expected": str(expected),
                   "hint": "" if mistake else (hint or ""), "mistake": mistake, "where": where}
    raise error


def _describe(value, limit: int = 200) -> str:
    """A short, readable description of any value (type and shape for arrays)."""
    if isinstance(value, torch.Tensor):
        if value.numel() <= 8:
            return f"tensor({value.tolist()}, dtype={value.dtype})"
        return f"a tensor of shape {tuple(value.shape)}, dtype {value.dtype}{_preview(value)}"
    if isinstance(value, np.ndarray):
        if value.size <= 8:
            return f"array({value.tolist()}, dtype={value.dtype})"
        return f"an array of shape {value.shape}, dtype {value.dtype}{_preview(value)}"
    if isinstance(value, float | np.floating):
        return f"{float(value):.6g}"
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _number(value) -> str:
    """One entry of an array, short: 3, 0.25, -inf, True."""
    if isinstance(value, bool | np.bool_):
        return str(bool(value))
    if isinstance(value, numbers.Integral):
        return str(int(value))
    if isinstance(value, numbers.Real):
        return f"{float(value):.4g}"
    return _describe(value, limit=40)


def _preview(value, count: int = 6) -> str:
    """The first entries of a large array, in reading order: ", first values [3, 1, 4, 1, 5, 9, ...]"."""
    try:
        flat = _to_numpy(value).reshape(-1)
    except (TypeError, ValueError, RuntimeError):
        return ""
    return f", first values [{', '.join(_number(v) for v in flat[:count].tolist())}, ...]"


def _index(position: tuple) -> str:
    return "(" + ", ".join(str(int(i)) for i in position) + ("," if len(position) == 1 else "") + ")"


def _array_difference(got, expected, differ) -> str:
    """Where two arrays of the same shape first differ (``differ`` marks each entry), in reading order."""
    count, total = int(differ.sum()), differ.size
    if not count:
        return ""
    first = tuple(np.unravel_index(int(np.argmax(differ.reshape(-1))), differ.shape)) if differ.ndim else ()
    g, e = got[first], expected[first]
    text = f"at index {_index(first)}: expected {_number(e)}, got {_number(g)}" if first else \
        f"expected {_number(e)}, got {_number(g)}"
    if total > 1:
        text += f" ({count} of {total} entries differ)"
    return text


def _first_value_difference(got, expected, path: str = "") -> str:
    """Where two plain values of the same kind first differ, in words ("" when they do not, or it cannot tell)."""
    if not (_plain(got) and _plain(expected)) or not _same_kind(got, expected):
        return ""
    if isinstance(got, torch.Tensor | np.ndarray):
        g, e = _to_numpy(got), _to_numpy(expected)
        if g.shape != e.shape:
            return f"{path or 'the result'} has shape {g.shape}, expected {e.shape}"
        differ = (g != e) & ~(_isnan(g) & _isnan(e))
        found = _array_difference(g, e, np.asarray(differ))
        return f"{path} {found}".strip() if found else ""
    if type(got) in (list, tuple, torch.Size):
        for i, (g, e) in enumerate(zip(got, expected, strict=False)):
            if not _equal(g, e):
                inner = _first_value_difference(g, e, f"{path}[{i}]")
                return inner or f"at {path}[{i}]: expected {_describe(e, 60)}, got {_describe(g, 60)}"
        if len(got) != len(expected):
            return f"{path or 'the result'} has {len(got)} items, expected {len(expected)}"
        return ""
    if type(got) is dict:
        missing, extra = [k for k in expected if k not in got], [k for k in got if k not in expected]
        if missing or extra:
            return (f"{path or 'the result'} " + (f"lacks the keys {missing}" if missing else "")
                    + (" and " if missing and extra else "") + (f"has the extra keys {extra}" if extra else ""))
        for key in expected:
            if not _equal(got[key], expected[key]):
                inner = _first_value_difference(got[key], expected[key], f"{path}[{key!r}]")
                return inner or f"at {path}[{key!r}]: expected {_describe(expected[key], 60)}, got " \
                                f"{_describe(got[key], 60)}"
        return ""
    return ""


def _isnan(array) -> np.ndarray:
    if np.issubdtype(array.dtype, np.floating) or np.issubdtype(array.dtype, np.complexfloating):
        return np.isnan(array)
    return np.zeros(array.shape, dtype=bool)


def _mistake_values(mistakes):
    """Each known mistake's label and the value it gives (a zero-argument callable is called only now)."""
    if mistakes is None:
        return
    if not isinstance(mistakes, dict) or not all(isinstance(k, str) and k.strip() for k in mistakes):
        raise TypeError("mistakes must be a dict {'one line naming the mistake': the value it gives, ...}, got "
                        f"{type(mistakes).__name__}")
    for label, value in mistakes.items():
        yield label, (value() if callable(value) and not isinstance(value, torch.Tensor | np.ndarray) else value)


def _missing_hint(got) -> str | None:
    if got is None:
        return "your code gave None: does the function end with `return ...`?"
    return None


_TENSOR_TYPES = (torch.Tensor, torch.nn.Parameter)
_SCALAR_TYPES = (bool, int, float, complex, str, bytes, type(None), torch.dtype, torch.device)
_NUMPY_SCALARS = tuple({t for t in np.sctypeDict.values() if isinstance(t, type) and issubclass(t, np.generic)})
_no_overrides = torch._C.DisableTorchFunction  # subclasses' __torch_function__ and active modes, both off


def _plain(value) -> bool:
    """True when ``value`` is made only of types whose comparisons the student cannot change."""
    kind = type(value)
    if kind in _TENSOR_TYPES:
        return True
    if kind is np.ndarray:
        return value.dtype != object
    if kind in _SCALAR_TYPES or kind in _NUMPY_SCALARS:
        return True
    if kind in (list, tuple, torch.Size):
        return all(_plain(item) for item in value)
    if kind is dict:
        return all(_plain(k) and _plain(v) for k, v in value.items())
    return False


def _refuse_unplain(name: str, got, hint: str | None) -> None:
    if not _plain(got):
        what = "plain values (a torch.Tensor, a NumPy array, a list, tuple or dict of numbers or strings)"
        _fail(name, f"the result contains a {type(got).__name__} object, which the check cannot compare",
              what, _describe(got), _missing_hint(got) or hint or "return plain tensors, arrays, lists or numbers")


def _to_numpy(value):
    """A plain value as an array (tensors detached to the CPU, with every override off)."""
    if type(value) in _TENSOR_TYPES:
        with _no_overrides():
            return value.detach().cpu().numpy()
    return np.asarray(value)


def _as_float_tensor(name: str, value, role: str, hint: str | None) -> torch.Tensor:
    """Turn a number, list, array or tensor into a float64 tensor, or fail with a clear message."""
    if isinstance(value, torch.Tensor | np.ndarray | list | tuple) and not _plain(value):
        _refuse_unplain(name, value, hint)
    if isinstance(value, torch.Tensor):
        with _no_overrides():
            if value.is_complex():
                _fail(name, f"the {role} is complex", "real numbers", _describe(value), hint)
            return value.detach().to("cpu", torch.float64)
    if isinstance(value, bool) or not isinstance(value, numbers.Number | np.ndarray | list | tuple):
        what = "numbers (a tensor, an array, a list or a number)"
        _fail(name, f"the {role} is not made of numbers", what, _describe(value), _missing_hint(value) or hint)
    if not _plain(value):
        _refuse_unplain(name, value, hint)
    try:
        return torch.as_tensor(np.asarray(value, dtype=np.float64))
    except (TypeError, ValueError) as error:  # ragged lists, strings inside a list
        _fail(name, f"the {role} cannot be read as an array of numbers ({error})", "a rectangular array of numbers",
              _describe(value), hint)
    raise AssertionError("unreachable")  # _fail always raises


def _shape_of(value) -> tuple | None:
    if not _plain(value):
        return None
    if isinstance(value, torch.Tensor | np.ndarray):
        return tuple(value.shape)
    if isinstance(value, list | tuple):
        try:
            return tuple(np.asarray(value).shape)
        except ValueError:  # ragged
            return None
    return None


def check_shape(name: str, got, shape, hint: str | None = None) -> None:
    """Check that ``got`` has shape ``shape``; ``None`` in ``shape`` matches any size along that axis.

    ``got`` may be a tensor, an array or a (nested, rectangular) list.
    """
    if not isinstance(shape, tuple | list) or not all(s is None or type(s) is int for s in shape):
        raise TypeError(f"check_shape: shape must be a tuple of ints (None for any size), got {shape!r}; "
                        f"write (2,) for one axis of size 2")
    expected = tuple(shape)
    _refuse_unplain(name, got, hint)
    actual = _shape_of(got)
    if actual is None:
        _fail(name, "has no shape", f"something of shape {expected}", _describe(got),
              _missing_hint(got) or hint or "return a tensor, an array or a rectangular nested list")
    ok = len(actual) == len(expected) and all(w is None or g == w for g, w in zip(actual, expected, strict=False))
    if not ok:
        if len(actual) != len(expected):
            default = f"the result has {len(actual)} dimensions, not {len(expected)}: check for a missing or extra axis"
        else:
            default = "check which axis you reduced, stacked or transposed"
        _fail(name, "wrong shape", expected, actual, hint or default)
    print(f"{name}: shape {actual} ok")


def _close(got_t: torch.Tensor, exp_t: torch.Tensor, atol: float, rtol: float) -> torch.Tensor:
    """Entry by entry: within ``atol + rtol * |expected|`` (equal infinities and two nans count as close)."""
    with _no_overrides():
        diff = (got_t - exp_t).abs()
        return (diff <= atol + rtol * exp_t.abs()) | (got_t == exp_t) | (got_t.isnan() & exp_t.isnan())


def _matched_close(name, got_t, exp_t, mistakes, atol, rtol) -> str:
    """The first known mistake whose value ``got_t`` matches (same shape, same tolerance), or ""."""
    for label, value in _mistake_values(mistakes):
        mistake_t = _as_float_tensor(name, value, "value of a known mistake", None)
        if mistake_t.shape != got_t.shape:
            continue
        if mistake_t.shape == exp_t.shape and bool(_close(mistake_t, exp_t, atol, rtol).all()):
            continue  # that mistake gives the right answer on this case: it cannot tell
        if bool(_close(got_t, mistake_t, atol, rtol).all()):
            return label
    return ""


def _matched_equal(got, expected, mistakes) -> str:
    """The first known mistake whose value ``got`` equals exactly, or ""."""
    for label, value in _mistake_values(mistakes):
        if not _equal(value, expected) and _equal(got, value):
            return label
    return ""


def check_close(name: str, got, expected, atol: float = 1e-5, rtol: float = 1e-4, hint: str | None = None,
                mistakes: dict | None = None) -> None:
    """Check that ``got`` equals ``expected`` up to ``atol + rtol * |expected|``, element by element.

    Both may be tensors, arrays, lists or numbers; the message reports the largest difference and where it is.
    ``mistakes``: ``{"one line naming a usual mistake": the value that mistake gives, ...}`` (a value or a
    zero-argument function, called only when the answer fails); a wrong answer that matches one (same
    shape, same tolerance) is told that mistake, and no hint. Otherwise the message says where the values
    first differ, and the hint comes as things to check.
    """
    got_t = _as_float_tensor(name, got, "result", hint)
    exp_t = _as_float_tensor(name, expected, "expected value", None)
    if got_t.shape != exp_t.shape:
        if mistake := _matched_close(name, got_t, exp_t, mistakes, atol, rtol):
            _fail(name, f"wrong shape: {mistake}", tuple(exp_t.shape), tuple(got_t.shape), None, mistake=mistake)
        _fail(name, "wrong shape", tuple(exp_t.shape), tuple(got_t.shape),
              hint or "compare your result's shape with the expected one, axis by axis")
    if not bool(torch.isfinite(got_t).all()) and bool(torch.isfinite(exp_t).all()):
        if mistake := _matched_close(name, got_t, exp_t, mistakes, atol, rtol):
            _fail(name, f"the result has nan or inf values: {mistake}", _describe(expected), _describe(got), None,
                  mistake=mistake)
        finite = torch.isfinite(got_t).cpu().numpy()
        where = _array_difference(got_t.cpu().numpy(), exp_t.cpu().numpy(), ~finite) if got_t.dim() else ""
        _fail(name, "the result has nan or inf values", _describe(expected), _describe(got),
              hint or "look for a division by zero or a log of 0", where=where)
    if got_t.numel() == 0:
        print(f"{name}: matches (empty)")
        return
    with _no_overrides():
        diff = (got_t - exp_t).abs()
        close = bool((diff <= atol + rtol * exp_t.abs()).all())
    if not close:
        worst = int(torch.nan_to_num(diff, nan=math.inf).argmax())
        at = "" if got_t.dim() == 0 else f" at index {tuple(int(i) for i in np.unravel_index(worst, got_t.shape))}"
        largest = diff.flatten()[worst].item()
        problem = f"largest difference {largest:.3g}{at} is above the tolerance (atol={atol}, rtol={rtol})"
        if mistake := _matched_close(name, got_t, exp_t, mistakes, atol, rtol):
            _fail(name, f"this is what a known mistake gives: {mistake}", _describe(expected), _describe(got), None,
                  mistake=mistake)
        where = ""
        if got_t.dim():
            where = _array_difference(got_t.cpu().numpy(), exp_t.cpu().numpy(),
                                      ~_close(got_t, exp_t, atol, rtol).cpu().numpy())
        _fail(name, problem, _describe(expected), _describe(got), hint, where=where)
    # Not the difference itself: above 1e-6 its digits depend on the machine's last bits (kernels, threads).
    largest = diff.max().item()
    within = "largest difference < 1e-6" if largest < 1e-6 else f"within atol={atol}, rtol={rtol}"
    print(f"{name}: matches ({within})")


def _kind(value) -> str:
    """The kind of a plain value that check_equal compares: a tensor's dtype counts, a list is not a tuple."""
    kind = type(value)
    if kind in _TENSOR_TYPES:
        return f"a tensor of {value.dtype}"
    if kind is np.ndarray:
        return f"an array of {value.dtype}"
    if kind in (tuple, torch.Size):
        return "a tuple"
    if kind is bool or kind is np.bool_:
        return "a bool"
    if isinstance(value, numbers.Integral):
        return "an int"
    if isinstance(value, numbers.Real):
        return "a float"
    return f"a {kind.__name__}"


def _same_kind(got, expected) -> bool:
    # An int is also a float (2 for 2.0 is fine); a float is not an int (16640.0 is not a count).
    return _kind(got) == _kind(expected) or (_kind(got), _kind(expected)) == ("an int", "a float")


def _equal(got, expected) -> bool:
    """Equality of plain values of the same kind (see check_equal): nothing the student defined is asked."""
    if not (_plain(got) and _plain(expected)) or not _same_kind(got, expected):
        return False
    if isinstance(got, torch.Tensor | np.ndarray):
        g, e = _to_numpy(got), _to_numpy(expected)
        return g.shape == e.shape and bool((g == e).all())
    if type(got) in (list, tuple, torch.Size):
        return len(got) == len(expected) and all(_equal(g, e) for g, e in zip(got, expected, strict=True))
    if type(got) is dict:
        return got.keys() == expected.keys() and all(_equal(got[k], expected[k]) for k in expected)
    result = got == expected
    return result if isinstance(result, bool) else bool(np.all(result))


def _first_kind_difference(got, expected, where: str = "") -> str | None:
    """Where the kinds of ``got`` and ``expected`` first differ, in words, or None."""
    if not (_plain(got) and _plain(expected)):
        return None
    if not _same_kind(got, expected):
        return f"{where or 'the result'} is {_kind(got)}, expected {_kind(expected)}"
    if type(got) in (list, tuple, torch.Size) and len(got) == len(expected):
        for i, (g, e) in enumerate(zip(got, expected, strict=True)):
            if found := _first_kind_difference(g, e, f"{where or 'the result'}[{i}]"):
                return found
    if type(got) is dict and got.keys() == expected.keys():
        for key in expected:
            if found := _first_kind_difference(got[key], expected[key], f"{where or 'the result'}[{key!r}]"):
                return found
    return None


def check_equal(name: str, got, expected, hint: str | None = None, mistakes: dict | None = None) -> None:
    """Check exact equality of values of the same kind: a list must be a list and a tuple a tuple, an int an int
    (a float such as 16640.0 is not a count), a tensor a tensor with the same dtype, shape and values; strings,
    bools and dicts as they are. An int is accepted where a float is expected.

    Use :func:`check_close` for floats computed in different ways. ``mistakes``: as for :func:`check_close`,
    matched exactly.
    """
    if not _equal(got, expected):
        if mistake := _matched_equal(got, expected, mistakes):
            _fail(name, f"this is what a known mistake gives: {mistake}", _describe(expected), _describe(got), None,
                  mistake=mistake)
        problem = "not the expected value"
        g_shape, e_shape = _shape_of(got), _shape_of(expected)
        if kind := _first_kind_difference(got, expected):
            problem = f"not the expected kind of value ({kind})"
        elif g_shape is not None and e_shape is not None and g_shape != e_shape:
            problem = f"not the expected value (shape {g_shape}, expected {e_shape})"
        where = "" if got is None or kind else _first_value_difference(got, expected)
        _fail(name, problem, _describe(expected), _describe(got), _missing_hint(got) or hint, where=where)
    print(f"{name}: ok")


def check_true(name: str, condition, expected: str, got, hint: str | None = None) -> None:
    """Check a property that is not an equality (a bound, an ordering). ``expected`` says in words what
    should hold (e.g. ``"at least 0.9"``), ``got`` is the value that was measured."""
    if isinstance(condition, torch.Tensor | np.ndarray):
        size = condition.size if isinstance(condition, np.ndarray) else condition.numel()
        if size != 1:
            raise TypeError(f"check_true: condition must be one boolean, got {_describe(condition)}")
        condition = bool(condition.item())
    if not isinstance(condition, bool | np.bool_):
        raise TypeError(f"check_true: condition must be a boolean, got {_describe(condition)}")
    if not condition:
        _fail(name, "does not hold", expected, _describe(got), _missing_hint(got) or hint)
    print(f"{name}: ok ({_describe(got, limit=60)}, {expected})")


class NotDone(NotImplementedError):
    """Raised by an exercise's stub until the learner writes it: ``raise NotDone(1, "encode")``."""

    def __init__(self, exercise, name: str):
        super().__init__(f"exercise {exercise} is not done yet: write `{name}` above")

    def _render_traceback_(self):
        # IPython shows what this returns in place of the traceback: one line, not the check's internals.
        return [str(self)]


# Files that are not the learner's: a traceback's innermost frame outside these is the learner's own line.
_NOT_LEARNERS = tuple(str(Path(m.__file__).resolve().parent) + os.sep for m in (torch, np, sys.modules[__name__]))
_NOT_LEARNERS_TOO = (str(Path(os.__file__).resolve().parent) + os.sep, "<frozen ")


def _learners_frame(traceback):
    """The innermost frame of ``traceback`` in the learner's code (a notebook cell): (file, line, function)."""
    found = None
    for frame, line in walk_tb(traceback):
        file = frame.f_code.co_filename
        try:
            resolved = str(Path(file).resolve()) if not file.startswith("<") else file
        except (OSError, ValueError):
            resolved = file
        if resolved.startswith(_NOT_LEARNERS + _NOT_LEARNERS_TOO) or "site-packages" in resolved \
                or resolved.startswith(str(Path(__file__).resolve().parent.parent / "mllm_classroom")):
            continue
        found = (file, line, frame.f_code.co_name, frame.f_globals, frame.f_locals)
    return found


def _shapes_on(code: str, local: dict) -> str:
    """The shapes of the tensors a line of code names: "q (2, 1, 8), k (2, 1, 16)" (what a shape error is about)."""
    import re

    shown = []
    for word in dict.fromkeys(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", code)):
        value = local.get(word)
        if type(value) in _TENSOR_TYPES:
            shown.append(f"{word} {tuple(value.shape)}")
        elif type(value) in (list, tuple) and 0 < len(value) <= 4 and all(type(v) in _TENSOR_TYPES for v in value):
            shown.append(f"{word} [{', '.join(str(tuple(v.shape)) for v in value)}]")
    return ", ".join(shown[:6])


def attempt(name: str, function, *args, **kwargs):
    """``function(*args, **kwargs)``, run for a check: an error raised inside the learner's code comes back as a
    failed check that names the error, its message and the line of the learner's code it came from, not as a
    traceback through torch::

        out, cache = attempt("head_step", head_step, head, x_new, None)

    :class:`NotDone` (an exercise not written yet) and :class:`CheckFailed` pass through unchanged, and so does
    what the teacher's grader raises for a function that ran in another process (it reports those itself).
    """
    try:
        return function(*args, **kwargs)
    except (NotDone, CheckFailed):
        raise
    except Exception as error:
        if getattr(error, "mllm_student", None) is not None or type(error).__module__.startswith("mllm_classroom"):
            raise
        kind = type(error).__name__
        said = " ".join(str(error).split())
        said = said if len(said) <= 300 else said[:297] + "..."
        where = ""
        if found := _learners_frame(error.__traceback__):
            file, line, function_name, namespace, local = found
            code = linecache.getline(file, line, namespace).strip()
            place = f"line {line}" + (f", in {function_name}" if function_name != "<module>" else "")
            where = place + (f": {code}" if code else "")
            shapes = _shapes_on(code, local) if code else ""
        problem = f"raised {kind}" + (f": {said}" if said else "")
        lines = [f"{name}: {problem}", "  expected: a result, without an error"]
        if where:
            lines.append(f"  where:    {where}")
        if where and shapes:
            lines.append(f"  shapes:   {shapes}")
        failed = CheckFailed("\n".join(lines))
        failed.parts = {"name": str(name), "problem": problem, "expected": "a result, without an error", "hint": "",
                        "mistake": "", "where": where + (f" (shapes: {shapes})" if where and shapes else "")}
        raise failed from None


# What is being watched now, innermost last. The teacher's grader (mllm_classroom) reads this list when a
# check calls a learner's function that runs in another process, and has the same watched there.
WATCHING: list = []


@contextmanager
def _paused():
    """Every open watch paused (for the grader's own work during a call, which is not the learner's)."""
    open_now = list(WATCHING)
    for watch in reversed(open_now):
        watch._stop()
    try:
        yield open_now
    finally:
        for watch in open_now:
            watch._start()


class _Watch:
    """A context manager that is listed in WATCHING while it is open."""

    def __enter__(self):
        self._start()
        WATCHING.append(self)
        return self.calls

    def __exit__(self, *exc):
        WATCHING.remove(self)
        self._stop()
        return False

    def _start(self):
        pass

    def _stop(self):
        pass


class _RecordCalls(TorchFunctionMode):
    def __init__(self, names: list):
        super().__init__()
        self.names = names

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.names.append(getattr(func, "__name__", str(func)))
        return func(*args, **(kwargs or {}))


class torch_calls(_Watch):
    """Record the name of every torch function called inside the block, for checks that forbid a
    shortcut (``F.log_softmax`` in a hand-written cross-entropy) or a Python loop over rows::

        with torch_calls() as names:
            answer(x)
        check_true("no log_softmax", "log_softmax" not in names, expected="...", got=names)
    """

    def __init__(self):
        self.calls: list[str] = []

    def _start(self):
        self._mode = _RecordCalls(self.calls)
        self._mode.__enter__()

    def _stop(self):
        self._mode.__exit__(None, None, None)


def _first_shape(inputs) -> tuple | None:
    first = inputs[0] if inputs else None
    return tuple(first.shape) if isinstance(first, torch.Tensor) else None


class module_calls(_Watch):
    """Record every call of ``module`` (through ``module(...)``) inside the block: one entry per call, the
    shape of its first input (``None`` when that is not a tensor)::

        with module_calls(model) as calls:
            predict_batch(model, runs)
        check_equal("calls of model", len(calls), 1)

    With ``grad=True`` each entry is ``(shape, recording)``, ``recording`` being whether autograd was recording
    during the call (``False`` under ``torch.no_grad()`` or ``torch.inference_mode()``).
    """

    def __init__(self, module, *, grad: bool = False):
        if not isinstance(module, torch.nn.Module):
            raise TypeError(f"module_calls: module must be a torch.nn.Module, got {type(module).__name__}")
        if type(grad) is not bool:
            raise TypeError(f"module_calls: grad must be True or False, got {grad!r}")
        self.module = module
        self.grad = grad
        self.calls: list = []

    def _record(self, _module, inputs, _output) -> None:
        shape = _first_shape(inputs)
        self.calls.append((shape, torch.is_grad_enabled()) if self.grad else shape)

    def _start(self):
        self._handle = self.module.register_forward_hook(self._record)

    def _stop(self):
        self._handle.remove()


def _resolve(name: str, namespace: dict):
    """The owner of the last part of a dotted ``name`` and that part: (``namespace`` or an object, attribute)."""
    if not isinstance(name, str) or not all(part.isidentifier() for part in name.split(".")):
        raise TypeError(f"name must be a dotted name such as 'rnn_forward' or 'sampling.sample', got {name!r}")
    first, *rest = name.split(".")
    if not rest:
        if first not in namespace:
            raise NameError(f"{name!r} is not defined in this notebook")
        return namespace, first
    if first in namespace:
        owner = namespace[first]
    else:
        import importlib

        try:
            owner = importlib.import_module(first)
        except ImportError:
            raise NameError(f"{first!r} (in {name!r}) is not defined in this notebook") from None
    for part in rest[:-1]:
        owner = getattr(owner, part)
    if not hasattr(owner, rest[-1]):
        raise AttributeError(f"{name!r}: {type(owner).__name__} has no attribute {rest[-1]!r}")
    return owner, rest[-1]


class _Replace(_Watch):
    """Replace named functions (globals of the notebook, or dotted attributes) while the block runs."""

    def __init__(self, names, namespace):
        self.names = list(names)
        self.namespace = namespace
        self.saved = []

    def _replacement(self, name, original):
        raise NotImplementedError

    def _start(self):
        for name in self.names:
            owner, attr = _resolve(name, self.namespace)
            if isinstance(owner, dict):
                original, own = owner[attr], True
                owner[attr] = self._replacement(name, original)
            else:
                original, own = getattr(owner, attr), attr in vars(owner)
                setattr(owner, attr, self._replacement(name, original))
            self.saved.append((owner, attr, original, own))

    def _stop(self):
        for owner, attr, original, own in reversed(self.saved):
            if isinstance(owner, dict):
                owner[attr] = original
            elif own:
                setattr(owner, attr, original)
            else:
                delattr(owner, attr)
        self.saved.clear()


class function_calls(_Replace):
    """Count the calls of a function of the notebook (``"rnn_forward"``) or of a module (``"sampling.sample"``,
    ``"torch.nn.modules.rnn.RNNBase.__init__"``) made inside the block: one entry (its name) per call::

        with function_calls("rnn_forward") as calls:
            two_layer_forward(x, rnn2)
        check_equal("calls of rnn_forward", len(calls), 2)
    """

    def __init__(self, name: str, *, namespace: dict | None = None):
        super().__init__([name], namespace if namespace is not None else sys._getframe(1).f_globals)
        self.name = name
        self.calls: list[str] = []

    def _replacement(self, name, original):
        calls = self.calls

        def counted(*args, **kwargs):
            calls.append(name)
            return original(*args, **kwargs)

        return counted


class switched_off(_Replace):
    """Make each named function or class raise when called inside the block, for exercises that must not
    use it (``"nn.MultiheadAttention"``, ``"generate"``)::

        with switched_off("torch.nn.MultiheadAttention"):
            got = mha_parameters(64, 8)
    """

    def __init__(self, *names: str, namespace: dict | None = None):
        if not names:
            raise TypeError("switched_off: name at least one function, e.g. switched_off('generate')")
        super().__init__(names, namespace if namespace is not None else sys._getframe(1).f_globals)
        self.calls = None

    def _replacement(self, name, original):
        def off(*args, **kwargs):
            raise CheckFailed(f"{name} is switched off during this check: the exercise asks you to do without it")

        return off


class may_change(_Watch):
    """The arguments a learner's function is meant to change while the block runs (a training step changes its
    model and optimizer, a sampler advances its generator)::

        with may_change(model, optimizer):
            loss = cbow_step(model, optimizer, X, Y)

    In a notebook it changes nothing. When a teacher grades, the learner's function runs in another process:
    what it does to these arguments (and to any ``torch.Generator`` it is given) is copied back; a change to
    any other argument fails the check ("changed its argument ..."), since an exercise's inputs must be left
    as they are.
    """

    def __init__(self, *objects):
        if not objects:
            raise TypeError("may_change: name the arguments the function may change, e.g. may_change(model)")
        self.objects = objects
        self.calls = None


def check_not_called(name: str, calls, forbidden, hint: str | None = None) -> None:
    """Check that none of the ``forbidden`` names (torch functions, as ``torch_calls`` records them) was called::

        with torch_calls() as names:
            stable_cross_entropy(logits, y)
        check_not_called("no fused shortcut", names, ("cross_entropy", "log_softmax", "logsumexp"))

    A recorded name matches when it contains a forbidden one. When a teacher grades, the learner's code is also
    read for these names (an alias taken beforehand would not show up here).
    """
    if isinstance(forbidden, str) or not all(isinstance(f, str) and f for f in forbidden):
        raise TypeError(f"check_not_called: forbidden must be a tuple of names, got {forbidden!r}")
    if not isinstance(calls, list | tuple):
        raise TypeError(f"check_not_called: calls must be the list torch_calls() recorded, got {type(calls).__name__}")
    used = sorted({str(c) for c in calls if any(f in str(c) for f in forbidden)})
    if used:
        _fail(name, "calls what the exercise asks you to do without", f"none of {', '.join(forbidden)}",
              ", ".join(used), hint)
    print(f"{name}: ok (none of {', '.join(forbidden)})")


# Attributes of a layer that say its sizes and settings (nn.RNN's hidden_size, nn.MultiheadAttention's num_heads).
_SETTING_TYPES = (bool, int, float, str, type(None))


def weights_of(module) -> types.SimpleNamespace:
    """Copies of ``module``'s parameters and buffers, and its settings (sizes, flags), in a plain namespace, its
    submodules as namespaces too: everything a hand-written forward pass reads, and nothing that runs the layer::

        relu_rnn_forward(x, weights_of(rnn))   # rnn.weight_ih_l0, rnn.hidden_size ...; rnn(x) raises TypeError
    """
    if not isinstance(module, torch.nn.Module):
        raise TypeError(f"weights_of: module must be a torch.nn.Module, got {type(module).__name__}")
    fields = {}
    for key, value in vars(module).items():
        if not key.startswith("_") and key != "training" and (isinstance(value, _SETTING_TYPES)
                                        or (type(value) is tuple and all(isinstance(v, int) for v in value))):
            fields[key] = value
    # Copies: what a function does to them never reaches the layer itself.
    fields.update((name, p.detach().clone().requires_grad_(p.requires_grad))
                  for name, p in module.named_parameters(recurse=False))
    fields.update((name, b.detach().clone()) for name, b in module.named_buffers(recurse=False))
    fields.update((name, weights_of(child)) for name, child in module.named_children())
    return types.SimpleNamespace(**fields)
