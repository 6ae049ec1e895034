"""Tests for mllm_utils.sampling: the filters' properties, the draws, the errors and generation."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from mllm_utils.generation import generate, generate_refeed
from mllm_utils.sampling import (
    apply_temperature,
    distribution,
    draw,
    greedy,
    sample,
    top_k_logits,
    top_p_logits,
)

SETTINGS = settings(max_examples=40, deadline=None)

# Distinct logits at least 0.1 apart, so that their probabilities differ too
# (two logits a hair apart can round to the same probability, a tie).
distinct_logits = st.lists(st.integers(-300, 300), min_size=1, max_size=40, unique=True).map(
    lambda xs: torch.tensor(xs, dtype=torch.float32) / 10
)
any_logits = st.lists(st.floats(-30, 30, allow_nan=False, width=32), min_size=1, max_size=40).map(
    lambda xs: torch.tensor(xs, dtype=torch.float32)
)


def kept(filtered: torch.Tensor) -> set:
    return set(torch.nonzero(torch.isfinite(filtered)).flatten().tolist())


# --------------------------------------------------------------------- top-k


@SETTINGS
@given(distinct_logits, st.data())
def test_top_k_keeps_exactly_the_k_largest(z, data):
    k = data.draw(st.integers(1, len(z)))
    out = top_k_logits(z, k)
    largest = set(torch.argsort(z, descending=True)[:k].tolist())
    assert kept(out) == largest
    assert len(kept(out)) == k
    assert torch.equal(out[list(largest)], z[list(largest)])  # kept logits are unchanged


@SETTINGS
@given(any_logits, st.data())
def test_top_k_keeps_every_tie_of_the_kth_largest(z, data):
    k = data.draw(st.integers(1, len(z)))
    kth = torch.sort(z, descending=True).values[k - 1]
    assert kept(top_k_logits(z, k)) == set(torch.nonzero(z >= kth).flatten().tolist())


def test_top_k_tie_example():
    z = torch.tensor([3.0, 1.0, 2.0, 2.0, 0.0])
    assert kept(top_k_logits(z, 2)) == {0, 2, 3}  # both 2.0s tie for second place
    assert kept(top_k_logits(z, 3)) == {0, 2, 3}
    assert kept(top_k_logits(z, 4)) == {0, 1, 2, 3}


def test_top_k_works_on_batches_row_by_row():
    z = torch.tensor([[[0.0, 1.0, 2.0], [2.0, 1.0, 0.0]]])  # (1, 2, 3)
    out = top_k_logits(z, 1)
    assert out.shape == z.shape
    assert torch.isfinite(out).tolist() == [[[False, False, True], [True, False, False]]]


# --------------------------------------------------------------------- top-p


@SETTINGS
@given(distinct_logits, st.floats(0.0, 1.0, exclude_min=True))
def test_top_p_keeps_the_smallest_set_reaching_p(z, p):
    out = top_p_logits(z, p)
    probs = torch.softmax(z.double(), dim=-1)
    order = torch.argsort(probs, descending=True).tolist()
    n = len(kept(out))
    assert n >= 1
    assert kept(out) == set(order[:n])  # a prefix of the most likely tokens
    mass = probs[order[:n]].sum().item()
    assert mass >= p - 1e-9 or n == len(z)  # it reaches p ...
    assert probs[order[: n - 1]].sum().item() < p + 1e-9  # ... and one token fewer does not
    assert torch.equal(out[order[:n]], z[order[:n]])


@SETTINGS
@given(any_logits)
def test_top_p_one_keeps_everything(z):
    assert torch.equal(top_p_logits(z, 1.0), z)


def test_top_p_near_one_with_a_float32_sum_below_p():
    # Many tiny probabilities: the float32 sum falls short of 1, so a loop that
    # adds them up "while total <= p" would run past the end of the list.
    z = torch.cat([torch.tensor([0.0]), torch.full((50_000,), -12.0)])
    total32 = torch.cumsum(torch.softmax(z, dim=-1), dim=-1)[-1].item()  # added one by one
    p = 1.0 - 1e-9
    assert total32 < p, "the example no longer has a float32 sum below p"
    out = top_p_logits(z, p)
    assert 1 <= len(kept(out)) <= len(z)
    assert torch.equal(top_p_logits(z, 1.0), z)
    generator = torch.Generator().manual_seed(0)
    for top_p in (p, 1.0):
        assert 0 <= sample(z, top_p=top_p, generator=generator).item() < len(z)


def test_top_p_stops_when_the_mass_reaches_p_exactly():
    z = torch.tensor([1.0, 0.0, -1.0])
    probs = torch.softmax(z.double(), dim=-1)
    first = probs[0].item()
    assert kept(top_p_logits(z, first)) == {0}  # the first token alone reaches p: smallest set
    assert kept(top_p_logits(z, math.nextafter(first, 1.0))) == {0, 1}
    two = (probs[0] + probs[1]).item()
    assert kept(top_p_logits(z, two)) == {0, 1}


def test_top_p_always_keeps_the_most_likely_token():
    z = torch.tensor([5.0, 0.0, 0.0])
    assert kept(top_p_logits(z, 1e-6)) == {0}


def test_top_p_keeps_or_drops_ties_together():
    z = torch.tensor([1.0, 1.0, 0.0])  # probabilities 0.42, 0.42, 0.16
    assert kept(top_p_logits(z, 0.3)) == {0, 1}
    assert kept(top_p_logits(z, 0.9)) == {0, 1, 2}


def test_top_p_ignores_masked_tokens():
    z = torch.tensor([0.0, -math.inf, 0.0, -math.inf])
    assert kept(top_p_logits(z, 1.0)) == {0, 2}
    assert kept(top_p_logits(z, 0.99)) == {0, 2}


# ------------------------------------------------------------- temperature


@SETTINGS
@given(distinct_logits, st.floats(0.05, 20), st.floats(0.05, 20))
def test_lower_temperature_sharpens(z, t1, t2):
    low, high = min(t1, t2), max(t1, t2)
    top = greedy(z)
    assert distribution(z, low)[top] >= distribution(z, high)[top] - 1e-6

    def entropy(probs):
        return -(probs * torch.log(probs.clamp_min(1e-30))).sum().item()

    assert entropy(distribution(z.double(), low)) <= entropy(distribution(z.double(), high)) + 1e-9


@SETTINGS
@given(distinct_logits)
def test_temperature_to_zero_approaches_greedy(z):
    gap = torch.sort(z, descending=True).values[:2].diff().abs().min().item() if len(z) > 1 else 1.0
    temperature = gap / 50  # p(best) >= 1 - (V - 1) * exp(-50)
    probs = distribution(z, temperature)
    assert probs[greedy(z)].item() > 1 - 1e-6
    generator = torch.Generator().manual_seed(0)
    draws = sample(z.expand(100, -1), temperature=temperature, generator=generator)
    assert (draws == greedy(z)).all()


def test_temperature_keeps_softmax_and_masks_and_does_not_overflow():
    z = torch.tensor([2.0, 1.0, -math.inf, 0.5])
    for t in (0.3, 1.0, 4.0):
        torch.testing.assert_close(torch.softmax(apply_temperature(z, t), -1), torch.softmax(z / t, -1))
    big = torch.tensor([200.0, 100.0, -math.inf, 50.0])  # 200 / 1e-37 would overflow float32 without the shift
    tiny = apply_temperature(big, 1e-37)
    assert not torch.isnan(torch.softmax(tiny, -1)).any()
    assert torch.isneginf(tiny[2])


@pytest.mark.parametrize(
    ("dtype", "temperature"),
    [(torch.float32, 1e-50), (torch.float32, 1e-40), (torch.float16, 1e-50), (torch.float64, 1e-310)],
)
def test_a_temperature_too_small_for_the_dtype_is_refused_not_drawn_from(dtype, temperature):
    # 1e-50 rounds to 0 in float32: the division gave NaN probabilities and a draw of the last index.
    z = torch.tensor([2.0, 1.0, 0.5, 2.0], dtype=dtype)
    for call in (lambda: sample(z, temperature=temperature), lambda: distribution(z, temperature),
                 lambda: apply_temperature(z, temperature)):  # fmt: skip
        with pytest.raises(ValueError, match=rf"temperature={temperature!r} is too small .*greedy\(logits\)"):
            call()


def test_the_smallest_accepted_temperature_is_the_dtypes_tiny():
    z = torch.tensor([2.0, 1.0, 0.5, 2.0])
    probs = distribution(z, torch.finfo(torch.float32).tiny)  # the limit T -> 0: the two tied maxima share
    torch.testing.assert_close(probs, torch.tensor([0.5, 0.0, 0.0, 0.5]))
    # Half-precision logits are tempered in float32, so 1e-30 is fine for them, and float64 takes 1e-300.
    assert distribution(z.half(), 1e-30).dtype == torch.float32
    torch.testing.assert_close(distribution(z.double(), 1e-300), torch.tensor([0.5, 0.0, 0.0, 0.5]).double())


def test_high_temperature_approaches_uniform():
    z = torch.tensor([3.0, 1.0, 0.0, -2.0])
    torch.testing.assert_close(distribution(z, 1e6), torch.full((4,), 0.25), atol=1e-5, rtol=0)


# ------------------------------------------------------------------ drawing


@SETTINGS
@given(any_logits, st.integers(0, 2**31), st.data())
def test_seeded_sampling_is_reproducible_and_respects_the_filters(z, seed, data):
    k = data.draw(st.integers(1, len(z)))
    p = data.draw(st.floats(0.0, 1.0, exclude_min=True))
    temperature = data.draw(st.floats(0.1, 5))
    batch = z.expand(20, -1)
    first = sample(batch, temperature, k, p, torch.Generator().manual_seed(seed))
    again = sample(batch, temperature, k, p, torch.Generator().manual_seed(seed))
    assert torch.equal(first, again)
    assert first.shape == (20,) and first.dtype == torch.long
    allowed = kept(top_p_logits(top_k_logits(apply_temperature(z, temperature), k), p))
    assert set(first.tolist()) <= allowed


def test_sample_shape_follows_the_leading_dimensions():
    z = torch.zeros(2, 3, 7)
    assert sample(z, generator=torch.Generator().manual_seed(0)).shape == (2, 3)
    assert greedy(z).shape == (2, 3)
    assert sample(torch.zeros(7)).shape == ()


def test_sample_frequencies_follow_the_distribution():
    z = torch.log(torch.tensor([0.5, 0.3, 0.2]))
    draws = sample(z.expand(20_000, -1), generator=torch.Generator().manual_seed(1))
    freq = torch.bincount(draws, minlength=3).double() / len(draws)
    torch.testing.assert_close(freq, torch.tensor([0.5, 0.3, 0.2], dtype=torch.double), atol=0.015, rtol=0)


def test_draw_is_the_inverse_cdf_of_torch_rand():
    """The draw is a pure function of torch.rand's numbers, which every supported PyTorch gives alike
    for the same seed (torch.multinomial's draws changed between releases)."""
    probs = torch.tensor([[0.1, 0.0, 0.6, 0.3], [0.25, 0.25, 0.25, 0.25], [0.0, 0.0, 0.0, 2.0]])
    got = draw(probs, torch.Generator().manual_seed(7))
    u = torch.rand(3, 1, generator=torch.Generator().manual_seed(7)).double()
    cdf = probs.double().cumsum(-1)
    expected = (cdf <= u * cdf[:, -1:]).sum(-1)  # how many cumulative sums u has passed
    assert torch.equal(got, expected)
    assert got[2].item() == 3, "a row with one non-zero entry always draws it"


def test_seeded_draws_are_pinned():
    """The first draws of seed 0, fixed for good: a change here changes every sampled text in the course."""
    g = torch.Generator().manual_seed(0)
    z = torch.log(torch.tensor([0.5, 0.3, 0.2]))
    assert sample(z.expand(8, -1), generator=g).tolist() == [0, 1, 0, 0, 0, 1, 0, 2]
    u = torch.rand(4, generator=torch.Generator().manual_seed(0))
    assert [round(x, 4) for x in u.tolist()] == [0.4963, 0.7682, 0.0885, 0.132]


def test_draw_never_picks_a_zero_probability_entry():
    probs = torch.tensor([0.0, 0.5, 0.0, 0.5, 0.0])
    draws = draw(probs.expand(5_000, -1), torch.Generator().manual_seed(3))
    assert set(draws.tolist()) == {1, 3}


@pytest.mark.parametrize(
    "probs, error, match",
    [
        ([0.5, 0.5], TypeError, "probs must be a tensor"),
        (torch.tensor(1.0), ValueError, r"shape \(\.\.\., V\)"),
        (torch.tensor([1, 2]), TypeError, "floating point"),
        (torch.tensor([0.5, -0.1]), ValueError, "non-negative"),
        (torch.tensor([0.5, math.nan]), ValueError, "finite"),
        (torch.tensor([[0.5, 0.5], [0.0, 0.0]]), ValueError, "positive sum"),
    ],
)
def test_draw_rejects_what_is_not_a_distribution(probs, error, match):
    with pytest.raises(error, match=match):
        draw(probs)


def test_greedy_ties_go_to_the_lowest_index():
    assert greedy(torch.tensor([1.0, 3.0, 3.0])).item() == 1


# ------------------------------------------------------------------- errors

Z = torch.tensor([[1.0, 2.0, 3.0]])


@pytest.mark.parametrize(
    "call, error, match",
    [
        (lambda: sample(Z, temperature=0), ValueError, "temperature must be a finite number > 0"),
        (lambda: sample(Z, temperature=-1.0), ValueError, "greedy"),
        (lambda: sample(Z, temperature=math.inf), ValueError, "finite"),
        (lambda: sample(Z, temperature=math.nan), ValueError, "finite"),
        (lambda: apply_temperature(Z, "hot"), TypeError, "temperature must be a number"),
        (lambda: sample(Z, top_k=0), ValueError, "at least 1"),
        (lambda: top_k_logits(Z, 4), ValueError, "larger than the vocabulary"),
        (lambda: top_k_logits(Z, 1.5), TypeError, "top_k must be an int"),
        (lambda: sample(Z, top_p=0.0), ValueError, r"top_p must be in \(0, 1\]"),
        (lambda: top_p_logits(Z, 1.01), ValueError, r"\(0, 1\]"),
        (lambda: top_p_logits(Z, math.nan), ValueError, r"\(0, 1\]"),
        (lambda: sample(torch.tensor([1.0, math.nan])), ValueError, "NaN"),
        (lambda: greedy(torch.tensor([1.0, math.inf])), ValueError, r"\+inf"),
        (lambda: sample(torch.tensor([[0.0, 1.0], [-math.inf, -math.inf]])), ValueError, "every entry is -inf"),
        (lambda: greedy(torch.tensor(1.0)), ValueError, "at least one dimension"),
        (lambda: greedy(torch.zeros(2, 0)), ValueError, "empty last"),
        (lambda: sample(torch.tensor([1, 2, 3])), TypeError, "floating-point"),
        (lambda: sample([1.0, 2.0]), TypeError, "torch.Tensor"),
    ],
)
def test_bad_input_raises_a_clear_error(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_minus_inf_masks_are_allowed():
    z = torch.tensor([-math.inf, 0.0, -math.inf])
    assert greedy(z).item() == 1
    assert sample(z, generator=torch.Generator().manual_seed(0)).item() == 1


# --------------------------------------------------------------- generation


class TinyLSTM(torch.nn.Module):
    """The contract generate() expects: model(x (B, T), state=None) -> (logits (B, T, V), state)."""

    def __init__(self, vocab_size=11, hidden_dim=16, dropout=0.5):
        super().__init__()
        self.embedding = torch.nn.Embedding(vocab_size, 8)
        self.lstm = torch.nn.LSTM(8, hidden_dim, num_layers=2, batch_first=True, dropout=dropout)
        self.head = torch.nn.Linear(hidden_dim, vocab_size)
        self.seen = []  # (training, grad enabled, input length) at each call

    def forward(self, x, state=None):
        self.seen.append((self.training, torch.is_grad_enabled(), x.shape[1]))
        out, state = self.lstm(self.embedding(x), state)
        return self.head(out), state


def make_model(**kwargs):
    torch.manual_seed(0)
    return TinyLSTM(**kwargs)


def refeed_by_hand(model, prompt, length):
    """The obvious slow loop, written independently of the package: greedy on the whole text."""
    model.eval()
    tokens = prompt
    with torch.no_grad():
        for _ in range(length):
            logits, _ = model(tokens)
            tokens = torch.cat([tokens, logits[:, -1].argmax(-1, keepdim=True)], dim=1)
    return tokens[:, prompt.shape[1] :]


def test_carried_state_gives_the_same_tokens_as_refeeding():
    model = make_model()
    prompt = torch.tensor([[1, 2, 3], [4, 5, 6]])
    fast = generate(model, prompt, 30, greedy=True)
    assert fast.shape == (2, 30) and fast.dtype == torch.long
    assert torch.equal(fast, refeed_by_hand(model, prompt, 30))
    assert torch.equal(fast, generate_refeed(model, prompt, 30, greedy=True))


def test_generate_feeds_the_prompt_once_then_one_token_per_step():
    model = make_model()
    generate(model, torch.tensor([[1, 2, 3, 4]]), 5, greedy=True)
    assert [length for _, _, length in model.seen] == [4, 1, 1, 1, 1]


def test_seeded_generation_is_reproducible_and_matches_refeeding():
    model = make_model()
    prompt = [1, 2, 3]
    args = dict(temperature=0.8, top_k=5, top_p=0.9)
    a = generate(model, prompt, 25, generator=torch.Generator().manual_seed(3), **args)
    b = generate(model, prompt, 25, generator=torch.Generator().manual_seed(3), **args)
    c = generate_refeed(model, prompt, 25, generator=torch.Generator().manual_seed(3), **args)
    assert a.shape == (25,)
    assert torch.equal(a, b) and torch.equal(a, c)


@pytest.mark.parametrize("training", [True, False])
def test_generate_uses_eval_and_no_grad_and_restores_the_mode(training):
    model = make_model()
    model.train(training)
    out = generate(model, torch.tensor([[1, 2]]), 4)
    assert model.training is training
    assert all(not mode and not grad for mode, grad, _ in model.seen)
    assert not out.requires_grad


def test_generate_restores_the_mode_after_an_error():
    model = make_model()
    model.train()
    original = model.forward

    def broken(x, state=None):
        if state is not None:
            raise RuntimeError("boom")
        return original(x, state)

    model.forward = broken
    with pytest.raises(RuntimeError, match="boom"):
        generate(model, torch.tensor([[1, 2]]), 3, greedy=True)
    assert model.training


def test_generate_edge_cases_and_errors():
    model = make_model()
    assert generate(model, torch.tensor([[1, 2]]), 0).shape == (1, 0)
    with pytest.raises(ValueError, match="prompt_ids is empty"):
        generate(model, torch.zeros(1, 0, dtype=torch.long), 3)
    with pytest.raises(ValueError, match="length must be an int >= 0"):
        generate(model, [1, 2], -1)
    with pytest.raises(ValueError, match="temperature"):
        generate(model, [1, 2], 3, temperature=0)
    with pytest.raises(ValueError, match=r"top_p must be in \(0, 1\]"):
        generate(model, [1, 2], 3, top_p=2.0)
    with pytest.raises(TypeError, match="integer token ids"):
        generate(model, torch.tensor([1.0, 2.0]), 3)
    with pytest.raises(ValueError, match=r"shape \(B, T\) or \(T,\)"):
        generate(model, torch.zeros(1, 1, 1, dtype=torch.long), 3)
    model.train()
    with pytest.raises(ValueError, match="larger than the vocabulary"):
        generate(model, [1, 2], 3, top_k=100)
    assert model.training  # restored after the error raised mid-generation


def test_generate_explains_a_model_without_the_state_contract():
    class NoState(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.head = torch.nn.Embedding(5, 5)

        def forward(self, x, state=None):
            return self.head(x)

    with pytest.raises(TypeError, match=r"return a pair \(logits, state\)"):
        generate(NoState(), [1, 2], 3)


def test_sampling_imports_nothing_from_generation():
    # generation builds on sampling; an import back would make a circle (and two names for one function).
    import ast
    import inspect

    from mllm_utils import sampling

    tree = ast.parse(inspect.getsource(sampling))
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    imported |= {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    assert not any(name and name.startswith("mllm_utils") for name in imported), imported
    assert not hasattr(sampling, "generate") and not hasattr(sampling, "generate_refeed")
