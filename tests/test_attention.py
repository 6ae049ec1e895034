"""mllm_utils.attention against PyTorch's own attention, masks, the cache, and bad input."""

import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from mllm_utils.attention import (
    MultiHeadAttention,
    causal_mask,
    load_torch_multihead_attention,
    scaled_dot_product_attention,
)

ATOL = 1e-5


def pair(embed_dim, num_heads, bias=True, seed=0):
    """A torch MultiheadAttention and our module holding the same parameters (eval mode)."""
    torch.manual_seed(seed)
    theirs = nn.MultiheadAttention(embed_dim, num_heads, bias=bias, batch_first=True).eval()
    ours = MultiHeadAttention(embed_dim, num_heads, bias=bias).eval()
    return theirs, load_torch_multihead_attention(ours, theirs)


def padding_mask(lengths, seq_len):
    """(B, S) bool, True at padding: sequence b has lengths[b] real tokens."""
    return torch.arange(seq_len)[None, :] >= torch.tensor(lengths)[:, None]


shapes = st.tuples(
    st.integers(1, 3),  # batch
    st.integers(1, 7),  # seq_len
    st.sampled_from([(8, 1), (8, 2), (12, 3), (16, 4)]),  # (embed_dim, num_heads)
    st.integers(0, 10_000),  # seed
)


@settings(max_examples=25, deadline=None)
@given(shapes, st.sampled_from(["none", "causal", "padding", "both", "float"]), st.booleans())
def test_matches_torch_multihead_attention(shape, mask_kind, bias):
    batch, seq_len, (embed_dim, num_heads), seed = shape
    theirs, ours = pair(embed_dim, num_heads, bias=bias, seed=seed)
    x = torch.randn(batch, seq_len, embed_dim)
    # torch warns when a bool key_padding_mask meets a float attn_mask, so "both" uses the bool form
    attn_mask = causal_mask(seq_len, dtype=torch.bool) if mask_kind in ("causal", "both") else None
    if mask_kind == "float":
        attn_mask = torch.randn(seq_len, seq_len)
    kpm = None
    if mask_kind in ("padding", "both"):
        # at least one real token per sequence, so no row is fully masked
        kpm = padding_mask(torch.randint(1, seq_len + 1, (batch,)).tolist(), seq_len)
    for average in (True, False):
        want, want_w = theirs(x, x, x, attn_mask=attn_mask, key_padding_mask=kpm, average_attn_weights=average)
        got, got_w = ours(x, attn_mask=attn_mask, key_padding_mask=kpm, average_attn_weights=average)
        torch.testing.assert_close(got, want, atol=ATOL, rtol=1e-4)
        torch.testing.assert_close(got_w, want_w, atol=ATOL, rtol=1e-4)
    fused, none = ours(x, attn_mask=attn_mask, key_padding_mask=kpm, need_weights=False)
    assert none is None
    torch.testing.assert_close(fused, want, atol=ATOL, rtol=1e-4)


@pytest.mark.parametrize("batch", [1, 2, 5])
def test_is_causal_equals_explicit_causal_mask(batch):
    theirs, ours = pair(16, 4)
    x = torch.randn(batch, 6, 16)
    want, want_w = theirs(x, x, x, attn_mask=causal_mask(6))
    got, got_w = ours(x, is_causal=True)
    torch.testing.assert_close(got, want, atol=ATOL, rtol=1e-4)
    torch.testing.assert_close(got_w, want_w, atol=ATOL, rtol=1e-4)
    torch.testing.assert_close(ours(x, is_causal=True, need_weights=False)[0], want, atol=ATOL, rtol=1e-4)


def test_bool_and_additive_masks_agree():
    _, ours = pair(8, 2)
    x = torch.randn(2, 5, 8)
    blocked = torch.rand(5, 5) < 0.3
    blocked.fill_diagonal_(False)
    additive = torch.zeros(5, 5).masked_fill(blocked, float("-inf"))
    torch.testing.assert_close(ours(x, attn_mask=blocked)[0], ours(x, attn_mask=additive)[0])


def test_mask_shapes_per_head_and_per_sequence():
    """(B*H, L, S) as in nn.MultiheadAttention, and its 4-D view, give the same result."""
    theirs, ours = pair(12, 3)
    batch, seq_len = 2, 4
    x = torch.randn(batch, seq_len, 12)
    mask3 = torch.randn(batch * 3, seq_len, seq_len)
    want, _ = theirs(x, x, x, attn_mask=mask3)
    torch.testing.assert_close(ours(x, attn_mask=mask3)[0], want, atol=ATOL, rtol=1e-4)
    torch.testing.assert_close(ours(x, attn_mask=mask3.view(batch, 3, seq_len, seq_len))[0], want, atol=ATOL, rtol=1e-4)
    per_seq = torch.randn(batch, 1, seq_len, seq_len)
    want2, _ = theirs(x, x, x, attn_mask=per_seq.expand(batch, 3, seq_len, seq_len).reshape(-1, seq_len, seq_len))
    torch.testing.assert_close(ours(x, attn_mask=per_seq)[0], want2, atol=ATOL, rtol=1e-4)


@settings(max_examples=20, deadline=None)
@given(
    st.integers(1, 3), st.integers(1, 6), st.integers(1, 6), st.sampled_from([1, 4, 8]), st.integers(0, 10_000)
)
def test_sdpa_function_matches_torch(batch, seq_len, key_len, head_dim, seed):
    torch.manual_seed(seed)
    q = torch.randn(batch, 2, seq_len, head_dim)
    k = torch.randn(batch, 2, key_len, head_dim)
    v = torch.randn(batch, 2, key_len, 3)
    blocked = torch.rand(seq_len, key_len) < 0.4
    blocked[:, 0] = False  # one visible key per row: torch and ours agree there
    out, weights = scaled_dot_product_attention(q, k, v, attn_mask=blocked)
    # torch's boolean mask means "may attend": the opposite of ours
    want = F.scaled_dot_product_attention(q, k, v, attn_mask=~blocked)
    torch.testing.assert_close(out, want, atol=ATOL, rtol=1e-4)
    torch.testing.assert_close(weights.sum(-1), torch.ones(batch, 2, seq_len))
    assert torch.all(weights[..., blocked] == 0)


def test_scaling_is_by_head_dim_not_model_dim():
    """With 4 heads of 4 dims in a 16-dim model, scores are divided by sqrt(4), not sqrt(16)."""
    embed_dim, num_heads = 16, 4
    head_dim = embed_dim // num_heads
    torch.manual_seed(0)
    ours = MultiHeadAttention(embed_dim, num_heads).eval()
    x = torch.randn(1, 5, embed_dim) * 3
    _, weights = ours(x, average_attn_weights=False)
    q, k, _ = ours.in_proj(x).view(1, 5, 3, num_heads, head_dim).permute(2, 0, 3, 1, 4)
    by_head = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(head_dim), dim=-1)
    by_model = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(embed_dim), dim=-1)
    torch.testing.assert_close(weights, by_head)
    assert (weights - by_model).abs().max() > 1e-2  # the two scalings are told apart here
    # the function alone: d is the last dimension of q
    out = scaled_dot_product_attention(q, k, k)[1]
    torch.testing.assert_close(out, by_head)


def test_causal_mask_values():
    mask = causal_mask(4)
    assert mask.dtype == torch.float32 and mask.shape == (4, 4)
    assert torch.equal(mask == float("-inf"), torch.ones(4, 4, dtype=torch.bool).triu(1))
    assert torch.all(mask.tril() == 0)
    assert torch.equal(causal_mask(4, dtype=torch.bool), torch.isinf(mask))
    # with a cache of 3 earlier positions, the 2 new queries are positions 3 and 4
    shifted = causal_mask(2, 5, dtype=torch.bool)
    assert shifted.tolist() == [[False] * 4 + [True], [False] * 5]


def test_causal_weights_zero_above_diagonal_rows_sum_to_one():
    _, ours = pair(16, 4)
    _, weights = ours(torch.randn(3, 6, 16), is_causal=True, average_attn_weights=False)
    assert torch.all(weights.triu(1) == 0)
    torch.testing.assert_close(weights.sum(-1), torch.ones(3, 4, 6))


@pytest.mark.parametrize("need_weights", [True, False])
def test_fully_masked_row_gives_zeros_not_nan(need_weights):
    """A sequence that is all padding: torch gives NaN; ours gives zero weights and zero head outputs."""
    theirs, ours = pair(8, 2)
    x = torch.randn(3, 4, 8, requires_grad=True)
    kpm = padding_mask([4, 0, 2], 4)  # sequence 1 is all padding
    attn_mask = torch.zeros(4, 4, dtype=torch.bool)
    attn_mask[2] = True  # query 2 may see no key in any sequence
    out, weights = ours(x, attn_mask=attn_mask, key_padding_mask=kpm, need_weights=need_weights)
    assert not torch.isnan(out).any()
    # the output of a row that attends to nothing is the output projection's bias
    torch.testing.assert_close(out[1], ours.out_proj.bias.expand(4, 8))
    torch.testing.assert_close(out[:, 2], ours.out_proj.bias.expand(3, 8))
    if need_weights:
        assert torch.all(weights[1] == 0) and torch.all(weights[:, 2] == 0)
    out.sum().backward()
    assert torch.isfinite(x.grad).all() and torch.isfinite(ours.in_proj.weight.grad).all()
    # torch really gives NaN there; everywhere else we agree
    want, _ = theirs(x, x, x, attn_mask=attn_mask, key_padding_mask=kpm)
    assert torch.isnan(want[1]).all()
    rows = torch.ones(3, 4, dtype=torch.bool)
    rows[1] = False
    rows[:, 2] = False
    torch.testing.assert_close(out[rows], want[rows], atol=ATOL, rtol=1e-4)


def test_fully_masked_row_in_function_and_float_mask():
    q = torch.randn(2, 3, 4)
    mask = torch.zeros(3, 3)
    mask[0] = float("-inf")
    out, weights = scaled_dot_product_attention(q, q, q, attn_mask=mask)
    assert torch.all(out[:, 0] == 0) and torch.all(weights[:, 0] == 0)
    torch.testing.assert_close(weights[:, 1:].sum(-1), torch.ones(2, 2))


@pytest.mark.parametrize("need_weights", [True, False])
@pytest.mark.parametrize("chunks", [[1] * 7, [3, 1, 1, 2], [7]])
def test_kv_cache_matches_full_causal_pass(chunks, need_weights):
    _, ours = pair(16, 4)
    x = torch.randn(2, sum(chunks), 16)
    want, _ = ours(x, is_causal=True)
    cache, outs, start = None, [], 0
    for size in chunks:
        out, weights, cache = ours(
            x[:, start : start + size], is_causal=True, past_kv=cache, use_cache=True, need_weights=need_weights
        )
        if need_weights:
            assert weights.shape == (2, size, start + size)
            assert torch.all(weights[:, :, start:].triu(diagonal=1) == 0)  # no query sees a later key
        outs.append(out)
        start += size
    torch.testing.assert_close(torch.cat(outs, dim=1), want, atol=ATOL, rtol=1e-4)
    assert cache[0].shape == (2, 4, sum(chunks), 4) and cache[1].shape == cache[0].shape


def test_bias_false_and_dropout_only_in_training():
    theirs, ours = pair(8, 2, bias=False)
    assert ours.in_proj.bias is None and ours.out_proj.bias is None
    x = torch.randn(2, 3, 8)
    torch.testing.assert_close(ours(x)[0], theirs(x, x, x)[0], atol=ATOL, rtol=1e-4)
    drop = MultiHeadAttention(8, 2, dropout=0.5)
    drop.eval()
    torch.testing.assert_close(drop(x)[0], drop(x)[0])
    drop.train()
    torch.manual_seed(1)
    a = drop(x)[0]
    torch.manual_seed(2)
    assert not torch.allclose(a, drop(x)[0])


def test_bad_construction_raises():
    with pytest.raises(ValueError, match="multiple of num_heads"):
        MultiHeadAttention(10, 3)
    with pytest.raises(ValueError, match="dropout"):
        MultiHeadAttention(8, 2, dropout=1.0)


def test_bad_input_raises():
    mha = MultiHeadAttention(8, 2)
    with pytest.raises(ValueError, match=r"\(batch, seq_len, embed_dim=8\).*unsqueeze"):
        mha(torch.randn(5, 8))
    with pytest.raises(ValueError, match="embed_dim=8"):
        mha(torch.randn(1, 5, 6))
    with pytest.raises(TypeError, match="float input"):
        mha(torch.ones(1, 5, 8, dtype=torch.long))


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        ({"attn_mask": torch.zeros(5, 4)}, ValueError, r"attn_mask has shape \(5, 4\)"),
        ({"attn_mask": torch.zeros(3, 5, 5)}, ValueError, r"\(4, 5, 5\) \(batch-major"),
        ({"attn_mask": torch.zeros(2, 3, 5, 5)}, ValueError, "H or 1"),
        ({"attn_mask": torch.zeros(5, 5, dtype=torch.long)}, TypeError, "bool tensor"),
        ({"key_padding_mask": torch.zeros(2, 5)}, TypeError, "key_padding_mask must be a bool"),
        ({"key_padding_mask": torch.zeros(2, 4, dtype=torch.bool)}, ValueError, r"\(2, 5\)"),
        ({"past_kv": torch.zeros(2, 2, 3, 4)}, ValueError, "past_kv must be the"),
        ({"past_kv": (torch.zeros(2, 2, 3, 4), torch.zeros(2, 2, 3, 3))}, ValueError, "head_dim=4"),
    ],
)
def test_bad_masks_and_cache_raise(kwargs, error, message):
    mha = MultiHeadAttention(8, 2)
    with pytest.raises(error, match=message):
        mha(torch.randn(2, 5, 8), **kwargs)


def test_sdpa_function_bad_shapes_raise():
    q = torch.randn(2, 3, 4)
    with pytest.raises(ValueError, match="same last dimension"):
        scaled_dot_product_attention(q, torch.randn(2, 3, 5), torch.randn(2, 3, 5))
    with pytest.raises(ValueError, match="every key needs one value"):
        scaled_dot_product_attention(q, q, torch.randn(2, 4, 4))
    with pytest.raises(ValueError, match="does not broadcast"):
        scaled_dot_product_attention(q, q, q, attn_mask=torch.zeros(4, 3, dtype=torch.bool))
    with pytest.raises(ValueError, match="at least 2 dimensions"):
        scaled_dot_product_attention(torch.randn(4), q, q)


def test_causal_mask_bad_sizes_raise():
    with pytest.raises(ValueError, match="seq_len <= key_len"):
        causal_mask(5, 3)
    with pytest.raises(ValueError, match="dtype"):
        causal_mask(3, dtype=torch.long)


def test_load_rejects_incompatible_modules():
    ours = MultiHeadAttention(8, 2)
    with pytest.raises(ValueError, match="batch_first=True"):
        load_torch_multihead_attention(ours, nn.MultiheadAttention(8, 2))
    with pytest.raises(ValueError, match="embed_dim/num_heads"):
        load_torch_multihead_attention(ours, nn.MultiheadAttention(8, 4, batch_first=True))
    with pytest.raises(ValueError, match="bias"):
        load_torch_multihead_attention(ours, nn.MultiheadAttention(8, 2, bias=False, batch_first=True))
    with pytest.raises(ValueError, match="kdim/vdim"):
        load_torch_multihead_attention(ours, nn.MultiheadAttention(8, 2, kdim=4, vdim=4, batch_first=True))
