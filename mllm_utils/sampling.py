"""Choosing the next token from a model's logits: greedy, temperature, top-k, top-p.

A language model gives, for the next position, one score (a *logit*) per
vocabulary entry. This module turns those scores into a choice:

* :func:`greedy` takes the most likely token (deterministic);
* :func:`sample` draws from ``softmax(logits / T)`` after optional top-k and
  top-p (nucleus) filtering, with an explicit ``torch.Generator`` for
  reproducible draws;
* :func:`apply_temperature`, :func:`top_k_logits` and :func:`top_p_logits` are
  the three reshaping steps on their own. Each returns *logits* again, with the
  discarded entries set to ``-inf`` (so ``softmax`` gives them probability 0),
  which makes them easy to plot and to chain;
* :func:`distribution` is the probability vector :func:`sample` draws from, and
  :func:`draw` makes the draw: one uniform number per row from
  ``torch.rand``, looked up in the cumulative probabilities (inverse-CDF
  sampling);
* running a model token by token (``generate``, ``generate_refeed``) is the
  job of :mod:`mllm_utils.generation`, which builds on this module (this
  module imports nothing from it).

Every function works on the last dimension of a ``(..., V)`` tensor, so one
row, a batch ``(B, V)`` or a model output ``(B, T, V)`` all work.

Conventions and decisions
-------------------------
* Order: temperature first, then top-k, then top-p (on the renormalised
  distribution that top-k left), then one draw with :func:`draw`.
* Draws by inverse CDF, not ``torch.multinomial``: with the same seeded
  generator, ``torch.multinomial`` has drawn other tokens in other PyTorch
  releases (2.4 and 2.11 differ), while ``torch.rand`` gave the same numbers
  on every release the course's CI checks (2.5, 2.11 and 2.13, on a CPU), so a
  seeded sample reads the same on all of them.
* ``temperature`` must be a finite number > 0. ``T < 1`` sharpens the
  distribution (towards greedy), ``T > 1`` flattens it (towards uniform).
  ``T = 0`` is *not* accepted as a spelling of greedy decoding: call
  :func:`greedy` (or ``generation.generate(..., greedy=True)``) to say so
  explicitly. Nor is a temperature so small that it rounds to 0 (or to a
  subnormal number) in the logits' dtype, e.g. ``1e-50`` for float32 logits:
  dividing by it would give NaN, or silently greedy. The error says so; the
  smallest accepted value is ``torch.finfo(dtype).tiny`` (about ``1.2e-38``
  for float32; half-precision logits are tempered in float32).
* Ties in top-k: every token whose logit equals the k-th largest is kept, so
  top-k keeps exactly ``k`` tokens when the k-th and (k+1)-th logits differ and
  more when they tie. Dropping one of two equally likely tokens would be an
  arbitrary choice (``torch.topk`` does not promise which); keeping both does
  not depend on the implementation.
* Top-p keeps the smallest set of most likely tokens whose probability reaches
  ``p``: a token is kept when the mass of the tokens *strictly more likely*
  than it is below ``p``. The most likely token is therefore always kept, tied
  tokens are kept or dropped together, and ``p = 1`` keeps everything (even
  when rounding makes the probabilities sum to slightly less than 1, the case
  a loop ``while total <= p`` runs past the end on).
* Greedy ties go to the lowest index (``torch.argmax`` documents this).
* ``-inf`` logits are allowed (they mean "masked, never pick"); NaN and
  ``+inf`` are not, nor is a row whose logits are all ``-inf``.
* Devices: everything runs on the logits' device; the cumulative sums of
  top-p and of the draw are float64 there, except on Apple's MPS (no float64:
  float32, so a border that float32 rounding moves may differ there).

Introduced in notebook 06 (sampling); notebook 07 (War and Peace) and
notebook 10 (masked attention) generate text with it.
"""

from __future__ import annotations

import math

import torch

__all__ = [
    "apply_temperature",
    "distribution",
    "draw",
    "greedy",
    "sample",
    "top_k_logits",
    "top_p_logits",
]


# ---------------------------------------------------------------- validation


FLOAT32_ONLY_DEVICES = {"mps"}  # device types without float64 (as runtime.FLOAT32_ONLY_DEVICES; no import here)


def _wide(t: torch.Tensor) -> torch.dtype:
    """float64 for sums, except on Apple's MPS, which has no float64 (float32 there)."""
    return torch.float32 if t.device.type in FLOAT32_ONLY_DEVICES else torch.float64



def _check_logits(logits, name: str = "logits") -> torch.Tensor:
    """Raise a clear error unless ``logits`` is a usable (..., V) floating tensor."""
    if not isinstance(logits, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor of shape (..., V), got {type(logits).__name__}")
    if not logits.is_floating_point():
        raise TypeError(f"{name} must be a floating-point tensor (scores, not token ids), got dtype {logits.dtype}")
    if logits.ndim == 0:
        raise ValueError(f"{name} must have at least one dimension (..., V), got a 0-d tensor")
    if logits.shape[-1] == 0:
        raise ValueError(f"{name} has an empty last (vocabulary) dimension: shape {tuple(logits.shape)}")
    if torch.isnan(logits).any():
        raise ValueError(f"{name} contains NaN: check the model's output (a diverged training?)")
    if torch.isposinf(logits).any():
        raise ValueError(f"{name} contains +inf: only -inf is allowed (it masks a token); check the model's output")
    if logits.numel() and torch.isneginf(logits).all(dim=-1).any():
        raise ValueError(f"{name} has a row where every entry is -inf: there is no token left to choose")
    return logits


def _check_temperature(temperature) -> float:
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float)):
        raise TypeError(f"temperature must be a number > 0, got {temperature!r}")
    if not math.isfinite(temperature) or temperature <= 0:
        raise ValueError(
            f"temperature must be a finite number > 0, got {temperature!r}. For greedy decoding "
            "(the limit T -> 0) call greedy(logits) or generation.generate(..., greedy=True)."
        )
    return float(temperature)


def _check_k(k, vocab_size: int | None = None) -> int:
    if isinstance(k, bool) or not isinstance(k, int):
        raise TypeError(f"top_k must be an int between 1 and the vocabulary size, got {k!r}")
    if k < 1:
        raise ValueError(f"top_k must be at least 1, got {k}; use top_k=None to switch top-k off")
    if vocab_size is not None and k > vocab_size:
        raise ValueError(
            f"top_k={k} is larger than the vocabulary ({vocab_size} entries); "
            f"use at most {vocab_size}, or top_k=None to keep every token"
        )
    return k


def _check_p(p) -> float:
    if isinstance(p, bool) or not isinstance(p, (int, float)):
        raise TypeError(f"top_p must be a number in (0, 1], got {p!r}")
    if not (0.0 < p <= 1.0):  # also false for NaN
        raise ValueError(
            f"top_p must be in (0, 1], got {p!r}: it is the probability mass to keep "
            "(1.0 keeps every token; use top_p=None to switch top-p off)"
        )
    return float(p)


# ------------------------------------------------------- the reshaping steps


def apply_temperature(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """Divide the logits by ``temperature``: ``softmax(z / T)`` is the tempered distribution.

    ``T < 1`` sharpens the distribution (the largest logit wins more often;
    ``T -> 0`` approaches greedy decoding), ``T > 1`` flattens it (``T -> inf``
    approaches uniform over the unmasked tokens), ``T = 1`` leaves it as is.

    The row maximum is subtracted before dividing, i.e. the result is
    ``(z - max z) / T``. A constant per row cancels in softmax, so the
    probabilities are exactly those of ``z / T``; the shift keeps a very small
    ``T`` from overflowing to ``+inf`` (the largest entry is always 0).
    ``-inf`` entries stay ``-inf``.

    Raises ``ValueError`` for ``T <= 0``, non-finite ``T``, and ``T`` below
    ``torch.finfo(dtype).tiny`` for the logits' dtype (it would round to 0 or
    lose its precision in the division). Half-precision logits come back as
    float32. Introduced in notebook 06.
    """
    _check_logits(logits)
    return _temperature(logits, _check_temperature(temperature))


def _temperature(logits, temperature):
    if logits.dtype in (torch.float16, torch.bfloat16):
        logits = logits.float()  # a half-precision temperature below 6e-5 would already be subnormal
    tiny = torch.finfo(logits.dtype).tiny
    if temperature < tiny:
        raise ValueError(
            f"temperature={temperature!r} is too small for {str(logits.dtype).removeprefix('torch.')} logits: "
            f"it rounds to 0 (or loses its precision) in that dtype, so the division would give NaN or a "
            f"silently greedy choice. Use a temperature of at least {tiny:.1e}, or call greedy(logits) "
            "(generation.generate(..., greedy=True)) for the limit T -> 0."
        )
    top = logits.amax(dim=-1, keepdim=True)
    return (logits - top) / temperature


def top_k_logits(logits: torch.Tensor, k: int) -> torch.Tensor:
    """Keep the ``k`` largest logits of each row; set the others to ``-inf``.

    Ties: every entry equal to the k-th largest logit is kept, so exactly ``k``
    entries survive when the k-th and (k+1)-th largest differ, more when they
    tie. ``k`` must be between 1 and the vocabulary size ``V``; ``k = V`` keeps
    everything. Introduced in notebook 06.
    """
    _check_logits(logits)
    return _top_k(logits, _check_k(k, logits.shape[-1]))


def _top_k(logits, k):
    kth_largest = torch.topk(logits, k, dim=-1).values[..., -1:]
    return logits.masked_fill(logits < kth_largest, float("-inf"))


def top_p_logits(logits: torch.Tensor, p: float) -> torch.Tensor:
    """Nucleus filter: keep the smallest set of most likely tokens whose probability reaches ``p``.

    With the probabilities ``softmax(logits)`` sorted in decreasing order, a
    token is kept when the total probability of the tokens strictly more
    likely than it is below ``p``. So the most likely token is always kept,
    the kept mass is at least ``p``, and no smaller set of tokens reaches
    ``p`` (when there are no ties at the border; tied tokens are kept or
    dropped together). ``p = 1`` returns the logits unchanged, whatever the
    rounding of the float sum. The others are set to ``-inf``.

    ``p`` must be in ``(0, 1]``. Introduced in notebook 06.
    """
    _check_logits(logits)
    return _top_p(logits, _check_p(p))


def _top_p(logits, p):
    if p >= 1.0:
        return logits.clone()  # keep everything; no cumulative sum to round wrongly
    # Sums in float64 (float32 on Apple's MPS, which has no float64), so rounding does not move the
    # border for small p-values.
    probs = torch.softmax(logits.to(_wide(logits)), dim=-1)
    sorted_probs, order = torch.sort(probs, dim=-1, descending=True)
    # Exclusive cumulative sum: the mass of the tokens ranked before each one (shifted, not
    # cumsum - probs, so that a prefix summing to exactly p stops the nucleus exactly there).
    cumulative = torch.cumsum(sorted_probs, dim=-1)
    mass_before = torch.cat([torch.zeros_like(cumulative[..., :1]), cumulative[..., :-1]], dim=-1)
    # Tied tokens share the mass *strictly* above them: that of their group's first member.
    neg = (-sorted_probs).contiguous()  # ascending, as searchsorted wants
    first_of_tie = torch.searchsorted(neg, neg, side="left")
    mass_above = torch.gather(mass_before, -1, first_of_tie)
    keep_sorted = mass_above < p
    keep = torch.zeros_like(keep_sorted).scatter(-1, order, keep_sorted)
    return logits.masked_fill(~keep, float("-inf"))


def distribution(
    logits: torch.Tensor,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
) -> torch.Tensor:
    """The probabilities :func:`sample` draws from: temperature, then top-k, then top-p, then softmax.

    Returns a tensor of the shape of ``logits`` whose last dimension sums to 1
    (float32 or wider). Handy for plotting what each setting does.
    Introduced in notebook 06.
    """
    # Check everything once, then run the unchecked steps (generation calls this every token).
    _check_logits(logits)
    temperature = _check_temperature(temperature)
    if top_k is not None:
        top_k = _check_k(top_k, logits.shape[-1])
    if top_p is not None:
        top_p = _check_p(top_p)
    z = _temperature(logits, temperature)  # half precision comes back as float32: softmax and the draw want it
    if top_k is not None:
        z = _top_k(z, top_k)
    if top_p is not None:
        z = _top_p(z, top_p)
    return torch.softmax(z, dim=-1)


# ---------------------------------------------------------------- choosing


def greedy(logits: torch.Tensor) -> torch.Tensor:
    """Index of the largest logit along the last dimension: shape ``(...,)``, dtype long.

    Deterministic; ties go to the lowest index. It is the ``T -> 0`` limit of
    :func:`sample`. Introduced in notebook 06.
    """
    _check_logits(logits)
    return torch.argmax(logits, dim=-1)


def sample(
    logits: torch.Tensor,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Draw one token index per row from the filtered, tempered distribution: shape ``(...,)``.

    Steps: :func:`apply_temperature`, then :func:`top_k_logits` (if ``top_k``),
    then :func:`top_p_logits` (if ``top_p``), then ``softmax`` and one
    :func:`draw` per row with ``generator`` (pass a seeded
    ``torch.Generator`` for reproducible draws; it must live on the logits'
    device). ``top_k=None`` / ``top_p=None`` switch those filters off.

    Raises ``ValueError`` for ``temperature <= 0`` (use :func:`greedy` for
    greedy decoding) or too small for the logits' dtype (see
    :func:`apply_temperature`), ``top_k`` outside ``1..V``, ``top_p`` outside ``(0, 1]``
    and logits that are NaN, ``+inf`` or all ``-inf`` in a row.
    Introduced in notebook 06.
    """
    probs = distribution(logits, temperature, top_k, top_p)
    if generator is not None and generator.device != probs.device:
        raise ValueError(
            f"the generator is on {generator.device} but the logits are on {probs.device}: "
            "create the generator on the logits' device, e.g. torch.Generator(device=logits.device)"
        )
    return _draw(probs, generator)


def draw(probs: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
    """One index per row of ``probs`` (shape ``(..., V)``), drawn with those probabilities: shape ``(...,)``.

    Inverse-CDF sampling: one uniform number ``u`` per row from ``torch.rand``
    with ``generator``, and the first index whose cumulative probability
    exceeds ``u`` times the row's total (so rows need not sum exactly to 1).
    Zero-probability entries are never drawn. Unlike ``torch.multinomial``,
    the same seed gave the same draws on every PyTorch release the course's CI
    checks (2.5, 2.11 and 2.13, on a CPU).
    ``probs`` must be finite and non-negative with a positive sum in each row;
    ``generator`` must live on ``probs``' device. Introduced in notebook 06.
    """
    if not isinstance(probs, torch.Tensor):
        raise TypeError(f"probs must be a tensor of shape (..., V), got {type(probs).__name__}")
    if probs.dim() == 0 or probs.shape[-1] == 0:
        raise ValueError(f"probs must have shape (..., V) with V >= 1, got shape {tuple(probs.shape)}")
    if probs.is_complex() or not probs.is_floating_point():
        raise TypeError(f"probs must be floating point, got dtype {probs.dtype}")
    if not bool(torch.isfinite(probs).all()) or bool((probs < 0).any()):
        raise ValueError("probs must be finite and non-negative (got nan, inf or a negative entry)")
    if probs.numel() and bool((probs.sum(dim=-1) <= 0).any()):
        raise ValueError("every row of probs needs a positive sum (got a row of zeros)")
    if generator is not None and generator.device != probs.device:
        raise ValueError(
            f"the generator is on {generator.device} but probs are on {probs.device}: "
            "create the generator on the same device, e.g. torch.Generator(device=probs.device)"
        )
    return _draw(probs, generator)


def _draw(probs, generator):
    flat = probs.reshape(-1, probs.shape[-1])
    # Cumulative sums in float64 (float32 on MPS), so the lookup does not depend on float32 rounding of
    # the running sum.
    wide = _wide(flat)
    cdf = flat.to(wide).cumsum(dim=-1)
    u = torch.rand(flat.shape[0], 1, generator=generator, device=flat.device)  # not multinomial: see the module notes
    target = u.to(wide) * cdf[:, -1:]
    index = torch.searchsorted(cdf, target, right=True).clamp_(max=flat.shape[-1] - 1)
    return index.reshape(probs.shape[:-1])
