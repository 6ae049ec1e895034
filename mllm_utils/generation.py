"""Running a language model token by token: :func:`generate` carries the model's state, and
:func:`generate_refeed` re-feeds the whole text each step (the slow reference it is measured against).

Each step picks the next token with :mod:`mllm_utils.sampling` (greedy, or a seeded draw after
temperature, top-k and top-p); that module imports nothing from this one. Notebooks import these two
functions from here (``from mllm_utils.generation import generate``). Introduced in notebook 06;
notebooks 07 and 10 generate text with them.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from mllm_utils import sampling
from mllm_utils.runtime import model_device

__all__ = ["generate", "generate_refeed"]


def _prompt_tensor(prompt_ids) -> tuple[torch.Tensor, bool]:
    """Return the prompt as a (B, T) long tensor and whether it came in 1-D."""
    prompt = torch.as_tensor(prompt_ids)
    if prompt.numel() == 0:
        raise ValueError("prompt_ids is empty: give at least one token to start from")
    if prompt.dtype not in (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8):
        raise TypeError(f"prompt_ids must hold integer token ids, got dtype {prompt.dtype}")
    if prompt.ndim not in (1, 2):
        raise ValueError(f"prompt_ids must have shape (B, T) or (T,), got {tuple(prompt.shape)}")
    one_d = prompt.ndim == 1
    prompt = prompt.long().unsqueeze(0) if one_d else prompt.long()
    if prompt.shape[1] == 0:
        raise ValueError("prompt_ids is empty: give at least one token to start from")
    return prompt, one_d


def _check_generation_args(length, temperature, top_k, top_p, greedy_decoding) -> None:
    if isinstance(length, bool) or not isinstance(length, int) or length < 0:
        raise ValueError(f"length must be an int >= 0 (the number of tokens to generate), got {length!r}")
    if not isinstance(greedy_decoding, bool):
        raise TypeError(f"greedy must be True or False, got {greedy_decoding!r}")
    sampling._check_temperature(temperature)
    if top_k is not None:
        sampling._check_k(top_k)
    if top_p is not None:
        sampling._check_p(top_p)


_model_device = model_device  # where the prompt goes (kept under its old name)


def _split_output(output, batch: int, steps: int):
    """Check a model's output is (logits (B, T, V), state) and return both."""
    if not (isinstance(output, (tuple, list)) and len(output) == 2):
        raise TypeError(
            "generate expects model(x, state=...) to return a pair (logits, state), got "
            f"{type(output).__name__}. Wrap the model so that its forward takes and returns its state."
        )
    logits, state = output
    if not (isinstance(logits, torch.Tensor) and logits.ndim == 3 and tuple(logits.shape[:2]) == (batch, steps)):
        shape = tuple(logits.shape) if isinstance(logits, torch.Tensor) else type(logits).__name__
        raise ValueError(
            f"the model's logits must have shape (B, T, V) = ({batch}, {steps}, V) for an input "
            f"of shape ({batch}, {steps}), got {shape} (is the model batch_first?)"
        )
    return logits, state


def _choose(logits, greedy_decoding, temperature, top_k, top_p, generator):
    """Next token ids (B,) from last-position logits (B, V), on the logits' device."""
    if greedy_decoding:
        return sampling.greedy(logits)
    if generator is not None and generator.device != logits.device:
        # Sample where the generator lives (a seeded CPU generator gives the same draws
        # whichever device the model runs on); the tokens go back to the model's device.
        return sampling.sample(logits.to(generator.device), temperature, top_k, top_p, generator).to(logits.device)
    return sampling.sample(logits, temperature, top_k, top_p, generator)


def _run_without_grad(model, body):
    """Run ``body()`` in eval mode without gradients; restore the model's mode even on error."""
    was_training = model.training
    model.eval()  # dropout off: generation should not be noisier than the trained model
    try:
        with torch.no_grad():
            return body()
    finally:
        model.train(was_training)


def generate(
    model: torch.nn.Module,
    prompt_ids: torch.Tensor | Sequence[int],
    length: int,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    greedy: bool = False,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Generate ``length`` new tokens after ``prompt_ids``, carrying the model's state between steps.

    The model contract
    ------------------
    ``model(x, state=None) -> (logits, state)`` with ``x`` a ``(B, T)`` long
    tensor of token ids (batch first) and ``logits`` of shape ``(B, T, V)``.
    ``state`` is whatever the model needs to continue where it stopped: an
    LSTM's ``(h, c)``, a GRU's ``h``, a transformer's key/value cache, or even
    just the tokens seen so far. ``generate`` never looks inside it; it passes
    back exactly what the model returned. With ``state=None`` the model starts
    fresh.

    What it does
    ------------
    1. feeds the whole prompt once: ``logits, state = model(prompt, state=None)``;
    2. picks the next token from ``logits[:, -1]`` (``greedy=True``: the most
       likely one; otherwise :func:`~mllm_utils.sampling.sample` with ``temperature``, ``top_k``,
       ``top_p`` and ``generator``);
    3. feeds only that new token with the carried state,
       ``logits, state = model(token[:, None], state=state)``, and repeats from 2.

    Each step therefore costs one token's work, not the whole text's (compare
    :func:`generate_refeed`). The model is put in eval mode and run under
    ``torch.no_grad()``; its previous mode (train or eval) is restored
    afterwards, also when an error interrupts generation. The prompt is moved
    to the device of the model's parameters. If ``generator`` lives on another
    device (a seeded CPU generator with a GPU model), each draw happens on the
    generator's device, so the same seed gives the same draws everywhere (up
    to the model's own numerical differences).

    ``greedy=True`` ignores ``temperature``, ``top_k``, ``top_p`` and
    ``generator`` (they are still checked). ``prompt_ids`` may be ``(B, T)`` or
    ``(T,)`` (a tensor or a list of ints); the result has shape
    ``(B, length)`` or ``(length,)`` respectively, dtype long, on the model's
    device, and holds only the new tokens (prepend the prompt yourself).

    Introduced in notebook 06; used by notebooks 07 and 10.
    """
    greedy_decoding = greedy
    _check_generation_args(length, temperature, top_k, top_p, greedy_decoding)
    prompt, one_d = _prompt_tensor(prompt_ids)
    device = _model_device(model)
    prompt = prompt.to(device)
    batch = prompt.shape[0]

    def body():
        new = torch.empty(batch, length, dtype=torch.long, device=device)
        if length == 0:
            return new
        logits, state = _split_output(model(prompt, state=None), batch, prompt.shape[1])
        for i in range(length):
            token = _choose(logits[:, -1, :], greedy_decoding, temperature, top_k, top_p, generator)
            new[:, i] = token
            if i + 1 < length:  # the last token needs no forward pass
                logits, state = _split_output(model(token[:, None], state=state), batch, 1)
        return new

    new = _run_without_grad(model, body)
    return new[0] if one_d else new


def generate_refeed(
    model: torch.nn.Module,
    prompt_ids: torch.Tensor | Sequence[int],
    length: int,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    greedy: bool = False,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Like :func:`generate`, but re-feeds the whole growing sequence at every step (slow reference).

    Each step calls ``model(all_tokens_so_far, state=None)`` and keeps only the
    last position's logits, so step ``t`` costs ``t`` tokens' work and a whole
    run grows quadratically. It gives the same tokens as :func:`generate` (up
    to float rounding) and exists to show, and measure, why carrying the state
    matters. Same arguments, checks and result as :func:`generate`.

    Introduced in notebook 06; notebook 07 measures it against :func:`generate`.
    """
    greedy_decoding = greedy
    _check_generation_args(length, temperature, top_k, top_p, greedy_decoding)
    prompt, one_d = _prompt_tensor(prompt_ids)
    device = _model_device(model)
    prompt = prompt.to(device)

    def body():
        tokens = prompt
        for _ in range(length):
            logits, _ = _split_output(model(tokens, state=None), tokens.shape[0], tokens.shape[1])
            token = _choose(logits[:, -1, :], greedy_decoding, temperature, top_k, top_p, generator)
            tokens = torch.cat([tokens, token[:, None]], dim=1)
        return tokens[:, prompt.shape[1] :]

    new = _run_without_grad(model, body)
    return new[0] if one_d else new
