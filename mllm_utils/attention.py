"""Scaled dot-product attention and an efficient multi-head self-attention module.

Introduced in notebook 09 (self-attention), where every piece is first written
by hand and then checked against ``torch.nn.MultiheadAttention`` and
``torch.nn.functional.scaled_dot_product_attention``; notebook 10 builds its
decoder-only text generator on :class:`MultiHeadAttention` (``is_causal=True``
and the key/value cache).

Mask convention (one for the whole module)
------------------------------------------
A **boolean** mask marks what is *blocked*: ``True`` means "this query may not
look at this key", exactly as in ``nn.MultiheadAttention`` (``attn_mask`` and
``key_padding_mask``). Note that ``F.scaled_dot_product_attention`` reads a
boolean mask the other way round (``True`` = may attend); pass it ``~mask``.
A **float** mask is *added* to the scores before the softmax: ``0`` keeps a
score, ``-inf`` blocks it, anything else shifts it.

Shapes accepted for ``attn_mask`` (``L`` queries, ``S`` keys, ``B`` batch,
``H`` heads): ``(L, S)`` (the same for every sequence and head), ``(B * H, L, S)``
(as in ``nn.MultiheadAttention``, batch-major: row ``b * H + h``), or
``(B or 1, H or 1, L, S)`` (broadcast). ``key_padding_mask`` is boolean
``(B, S)``, ``True`` at padding positions.

A fully masked row
------------------
A query whose every key is blocked has nothing to attend to. The plain formula
gives ``softmax([-inf, ..., -inf]) = 0/0 = NaN`` (``nn.MultiheadAttention`` returns
NaN there), and a NaN spreads through every later layer and into the gradients.
Here such a row gets **all-zero attention weights and a zero attention output**
(per head, before the output projection, so the module's output for that row is
``out_proj.bias``), with finite gradients. ``F.scaled_dot_product_attention``
also returns zeros there on the CPU in recent PyTorch versions.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from mllm_utils._validate import check_bool, check_int, check_number, check_tensor, describe

__all__ = [
    "MultiHeadAttention",
    "causal_mask",
    "load_torch_multihead_attention",
    "scaled_dot_product_attention",
]


def causal_mask(
    seq_len: int,
    key_len: int | None = None,
    *,
    dtype: torch.dtype = torch.float32,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    """The look-ahead mask: query ``i`` may only see keys ``j <= i``.

    Introduced in notebook 09. Returns an additive float mask of shape
    ``(seq_len, key_len)``: ``0`` on and below the diagonal, ``-inf`` above it.
    With ``dtype=torch.bool`` it returns the boolean form (``True`` = blocked).

    ``key_len`` (default ``seq_len``) is for a key/value cache: the queries are
    then the *last* ``seq_len`` positions of ``key_len``, so the diagonal is
    shifted right by ``key_len - seq_len`` (the newest query sees every key).
    """
    check_int("seq_len", seq_len)
    check_int("key_len", key_len, none_ok=True)
    if not isinstance(dtype, torch.dtype):
        raise TypeError(f"causal_mask: dtype must be a torch.dtype (torch.bool or a float type), got {describe(dtype)}")
    key_len = seq_len if key_len is None else key_len
    if seq_len < 1 or key_len < seq_len:
        raise ValueError(
            f"causal_mask needs 1 <= seq_len <= key_len, got seq_len={seq_len}, key_len={key_len} "
            "(with a cache, key_len = cached length + seq_len)."
        )
    blocked = torch.ones(seq_len, key_len, dtype=torch.bool, device=device).triu(
        diagonal=key_len - seq_len + 1
    )
    if dtype == torch.bool:
        return blocked
    if not dtype.is_floating_point:
        raise ValueError(f"causal_mask: dtype must be torch.bool or a float type, got {dtype}.")
    zeros = torch.zeros(seq_len, key_len, dtype=dtype, device=device)
    return zeros.masked_fill(blocked, float("-inf"))


def _as_additive(mask: torch.Tensor, dtype: torch.dtype, name: str) -> torch.Tensor:
    """A boolean (True = blocked) or float mask as an additive float mask."""
    if mask.dtype == torch.bool:
        return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill(
            mask, float("-inf")
        )
    if mask.is_floating_point():
        return mask.to(dtype)
    raise TypeError(
        f"{name} must be a bool tensor (True = blocked) or a float tensor (added to the scores), "
        f"got dtype {mask.dtype}."
    )


def _guard_fully_masked(mask: torch.Tensor | None):
    """Unblock rows that block every key (so softmax stays finite); return them to zero later.

    Returns ``(mask, rows)`` where ``rows`` is a bool tensor ``(..., L, 1)`` that is
    True for fully masked query rows, or ``None`` when there are none.
    """
    if mask is None:
        return None, None
    rows = torch.isneginf(mask).all(dim=-1, keepdim=True)
    if not rows.any():
        return mask, None
    return mask.masked_fill(rows, 0.0), rows


def scaled_dot_product_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    attn_mask: torch.Tensor | None = None,
    dropout_p: float = 0.0,
    scale: float | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """softmax(q kᵀ / sqrt(d) + mask) v, written out; returns ``(output, weights)``.

    Introduced in notebook 09. ``q`` is ``(..., L, d)``, ``k`` is ``(..., S, d)``,
    ``v`` is ``(..., S, d_v)``; ``d`` is the query/key dimension of *one head*, and
    the default scale is ``1 / sqrt(d)``. ``attn_mask`` broadcasts to ``(..., L, S)``;
    bool masks block where True, float masks are added (see the module docstring).
    A query row whose every key is blocked gets zero weights and a zero output.
    ``dropout_p`` drops weights with that probability whatever the mode: pass 0 when evaluating.
    """
    for name, t in (("q", q), ("k", k), ("v", v)):
        check_tensor(name, t, floating=True, hint="queries, keys and values are float tensors (..., seq_len, dim)")
    check_number("dropout_p", dropout_p, 0, 1, high_open=True, hint="the probability of dropping a weight")
    check_number("scale", scale, 0, low_open=True, none_ok=True, hint="None gives 1 / sqrt(d)")
    if attn_mask is not None and not isinstance(attn_mask, torch.Tensor):
        raise TypeError(f"attn_mask must be a bool or float tensor or None, got {describe(attn_mask)}")
    if q.dim() < 2 or k.dim() < 2 or v.dim() < 2:
        raise ValueError(
            "q, k and v need at least 2 dimensions (..., seq_len, dim), got shapes "
            f"{tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}."
        )
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(
            f"queries and keys must have the same last dimension to be compared, got q {tuple(q.shape)} "
            f"and k {tuple(k.shape)}."
        )
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(
            f"every key needs one value: k has {k.shape[-2]} positions, v has {v.shape[-2]} "
            f"(shapes {tuple(k.shape)} and {tuple(v.shape)})."
        )
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    scores = (q * scale) @ k.transpose(-2, -1)
    mask, rows = None, None
    if attn_mask is not None:
        mask = _as_additive(attn_mask, scores.dtype, "attn_mask")
        try:
            torch.broadcast_shapes(mask.shape, scores.shape)
        except RuntimeError:
            raise ValueError(
                f"attn_mask of shape {tuple(mask.shape)} does not broadcast to the scores' shape "
                f"{tuple(scores.shape)} (..., L queries, S keys)."
            ) from None
        mask, rows = _guard_fully_masked(mask)
        scores = scores + mask
    weights = torch.softmax(scores, dim=-1)
    if rows is not None:
        weights = weights.masked_fill(rows, 0.0)
    if dropout_p > 0.0:
        weights = F.dropout(weights, p=dropout_p)
    return weights @ v, weights


class MultiHeadAttention(nn.Module):
    """Multi-head self-attention on batch-first input ``(B, L, D)``, heads as a batch dimension.

    Introduced in notebook 09, used by notebook 10. One fused projection
    ``in_proj`` (``D -> 3D``: the rows are the queries', then the keys', then the
    values' weights, the layout of ``nn.MultiheadAttention.in_proj_weight``) and
    an output projection ``out_proj`` (``D -> D``). Head ``h`` owns rows
    ``h*head_dim:(h+1)*head_dim`` of each third.

    Parameters: ``embed_dim`` (D), ``num_heads`` (must divide D), ``bias`` (for
    both projections), ``dropout`` (on the attention weights, in training only).
    """

    def __init__(self, embed_dim: int, num_heads: int, bias: bool = True, dropout: float = 0.0):
        super().__init__()
        check_int("embed_dim", embed_dim)
        check_int("num_heads", num_heads)
        check_bool("bias", bias)
        check_number("dropout", dropout, 0, 1, high_open=True, hint="the probability of dropping a weight")
        if num_heads < 1 or embed_dim < 1 or embed_dim % num_heads:
            raise ValueError(
                f"embed_dim ({embed_dim}) must be a positive multiple of num_heads ({num_heads}): "
                "each head gets embed_dim // num_heads dimensions."
            )
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {dropout}.")
        self.embed_dim = embed_dim
        self.num_heads = num_heads
        self.head_dim = embed_dim // num_heads
        self.dropout = dropout
        self.in_proj = nn.Linear(embed_dim, 3 * embed_dim, bias=bias)
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=bias)

    def forward(
        self,
        x: torch.Tensor,
        attn_mask: torch.Tensor | None = None,
        key_padding_mask: torch.Tensor | None = None,
        need_weights: bool = True,
        average_attn_weights: bool = True,
        is_causal: bool = False,
        past_kv: tuple[torch.Tensor, torch.Tensor] | None = None,
        use_cache: bool = False,
    ):
        """Attend from every position of ``x`` to every allowed position; return ``(output, weights)``.

        ``x``: ``(B, L, D)``. ``attn_mask``, ``key_padding_mask``: see the module
        docstring. ``is_causal=True`` adds the look-ahead mask (shifted for a cache).
        ``need_weights=False`` skips the weights (``None``) and uses PyTorch's fused
        ``F.scaled_dot_product_attention``, like ``nn.MultiheadAttention`` does.
        ``average_attn_weights``: weights ``(B, L, S)`` averaged over heads, else
        ``(B, H, L, S)``.

        Key/value cache (for generating one token at a time): ``past_kv`` is the
        ``(keys, values)`` pair from the previous call, each ``(B, H, P, head_dim)``;
        the new keys and values are appended, so ``S = P + L``. With
        ``use_cache=True`` the result is ``(output, weights, (keys, values))``.
        """
        B, L = self._check_input(x)
        self._check_options(attn_mask, key_padding_mask, need_weights, average_attn_weights, is_causal, use_cache)
        qkv = self.in_proj(x).view(B, L, 3, self.num_heads, self.head_dim)
        q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)  # each (B, H, L, head_dim)
        if past_kv is not None:
            past_k, past_v = self._check_cache(past_kv, B, x)
            k = torch.cat([past_k, k], dim=2)
            v = torch.cat([past_v, v], dim=2)
        S = k.shape[2]
        dropout_p = self.dropout if self.training else 0.0
        only_causal = is_causal and L == S and attn_mask is None and key_padding_mask is None
        if not need_weights and only_causal:
            # The fused kernel builds the look-ahead mask itself (and skips the blocked tiles).
            out = F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p, is_causal=True)
            weights = None
        else:
            mask = self._merged_mask(attn_mask, key_padding_mask, is_causal, B, L, S, x.dtype)
            if need_weights:
                out, weights = scaled_dot_product_attention(q, k, v, mask, dropout_p=dropout_p)
                if average_attn_weights:
                    weights = weights.mean(dim=1)
            else:
                out, weights = self._fused(q, k, v, mask, dropout_p), None
        out = self.out_proj(out.transpose(1, 2).reshape(B, L, self.embed_dim))
        if use_cache:
            return out, weights, (k, v)
        return out, weights

    def _fused(self, q, k, v, mask, dropout_p):
        """PyTorch's fused attention kernel, with the same fully-masked-row rule as ours."""
        if mask is None:
            return F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p)
        mask, rows = _guard_fully_masked(mask)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p)
        return out if rows is None else out.masked_fill(rows, 0.0)

    def _check_input(self, x: torch.Tensor) -> tuple[int, int]:
        if not isinstance(x, torch.Tensor) or x.dim() != 3 or x.shape[-1] != self.embed_dim:
            got = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
            raise ValueError(
                f"MultiHeadAttention expects input x of shape (batch, seq_len, embed_dim={self.embed_dim}), "
                f"got {got}. For one sequence of shape (seq_len, embed_dim) pass x.unsqueeze(0)."
            )
        if not x.is_floating_point():
            raise TypeError(f"MultiHeadAttention expects float input x (embeddings), got {x.dtype}.")
        return x.shape[0], x.shape[1]

    def _check_options(self, attn_mask, key_padding_mask, *flags) -> None:
        names = ("need_weights", "average_attn_weights", "is_causal", "use_cache")
        for name, flag in zip(names, flags, strict=True):
            check_bool(name, flag)
        for name, mask in (("attn_mask", attn_mask), ("key_padding_mask", key_padding_mask)):
            if mask is not None and not isinstance(mask, torch.Tensor):
                raise TypeError(f"{name} must be a tensor or None, got {describe(mask)}")

    def _check_cache(self, past_kv, B: int, x: torch.Tensor):
        want = (B, self.num_heads, None, self.head_dim)
        ok = isinstance(past_kv, (tuple, list)) and len(past_kv) == 2
        if ok:
            for t in past_kv:
                ok = ok and isinstance(t, torch.Tensor) and t.dim() == 4
                ok = ok and all(w is None or g == w for g, w in zip(t.shape, want, strict=True))
            ok = ok and past_kv[0].shape[2] == past_kv[1].shape[2]
        if not ok:
            items = past_kv if isinstance(past_kv, (tuple, list)) else [past_kv]
            shapes = [tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__ for t in items]
            raise ValueError(
                f"past_kv must be the (keys, values) pair returned with use_cache=True, each of shape "
                f"(batch={B}, num_heads={self.num_heads}, cached_len, head_dim={self.head_dim}); "
                f"got {shapes}."
            )
        return past_kv[0].to(x.dtype), past_kv[1].to(x.dtype)

    def _merged_mask(self, attn_mask, key_padding_mask, is_causal, B, L, S, dtype):
        """All masks as one additive float mask broadcastable to (B, H, L, S), or None."""
        H = self.num_heads
        mask = None
        if attn_mask is not None:
            mask = _as_additive(attn_mask, dtype, "attn_mask")
            shape = tuple(mask.shape)
            if mask.dim() == 2 and shape == (L, S):
                pass
            elif mask.dim() == 3 and shape == (B * H, L, S):
                mask = mask.reshape(B, H, L, S)
            elif (
                mask.dim() == 4
                and shape[0] in (1, B)
                and shape[1] in (1, H)
                and shape[2:] == (L, S)
            ):
                pass
            else:
                hint = ""
                if mask.dim() == 3 and shape[-1] == self.embed_dim and attn_mask.is_floating_point():
                    hint = ("It looks like embeddings: MultiHeadAttention is self-attention, call it as "
                            "mha(x), not mha(q, k, v) as nn.MultiheadAttention. ")  # fmt: skip
                raise ValueError(
                    f"{hint}attn_mask has shape {shape}; with {B} sequences, {H} heads, {L} queries and "
                    f"{S} keys it must be ({L}, {S}), ({B * H}, {L}, {S}) (batch-major, as in "
                    f"nn.MultiheadAttention) or (B or 1, H or 1, {L}, {S}). For one mask per sequence "
                    "use attn_mask[:, None] of shape (B, 1, L, S)."
                )
        if key_padding_mask is not None:
            if key_padding_mask.dtype != torch.bool:
                raise TypeError(
                    f"key_padding_mask must be a bool tensor (True at padding), got {key_padding_mask.dtype}."
                )
            if tuple(key_padding_mask.shape) != (B, S):
                raise ValueError(
                    f"key_padding_mask must have shape (batch, key_len) = ({B}, {S}), got "
                    f"{tuple(key_padding_mask.shape)} (True where a key is padding)."
                )
            pad = _as_additive(key_padding_mask, dtype, "key_padding_mask")[:, None, None, :]
            mask = pad if mask is None else mask + pad
        if is_causal and L > 1:  # one new query (cached generation) may see every key: nothing to mask
            causal = causal_mask(L, S, dtype=dtype, device=self.in_proj.weight.device)
            mask = causal if mask is None else mask + causal
        return mask


def load_torch_multihead_attention(ours: MultiHeadAttention, theirs: nn.MultiheadAttention):
    """Copy an ``nn.MultiheadAttention``'s parameters into our module (same layout); return ours.

    Introduced in notebook 09. Both keep the query, key and value weights stacked
    in one ``(3D, D)`` matrix, so this is a plain copy. Only self-attention
    layouts are supported: ``batch_first=True``, equal ``kdim``/``vdim``, no
    ``add_bias_kv``/``add_zero_attn``.
    """
    if not isinstance(ours, MultiHeadAttention):
        raise TypeError(f"ours must be a mllm_utils.attention.MultiHeadAttention, got {describe(ours)}")
    if not isinstance(theirs, nn.MultiheadAttention):
        raise TypeError(f"theirs must be a torch.nn.MultiheadAttention, got {describe(theirs)}")
    problems = []
    if not theirs.batch_first:
        problems.append("batch_first=False (ours reads (B, L, D): build it with batch_first=True)")
    if not theirs._qkv_same_embed_dim or theirs.in_proj_weight is None:
        problems.append("separate kdim/vdim projections")
    if theirs.bias_k is not None or theirs.add_zero_attn:
        problems.append("add_bias_kv/add_zero_attn")
    if (theirs.embed_dim, theirs.num_heads) != (ours.embed_dim, ours.num_heads):
        problems.append(
            f"embed_dim/num_heads {theirs.embed_dim}/{theirs.num_heads} vs ours "
            f"{ours.embed_dim}/{ours.num_heads}"
        )
    if (theirs.in_proj_bias is None) != (ours.in_proj.bias is None):
        problems.append("one has biases, the other not (match bias=...)")
    if problems:
        raise ValueError("cannot load this nn.MultiheadAttention: " + "; ".join(problems) + ".")
    with torch.no_grad():
        ours.in_proj.weight.copy_(theirs.in_proj_weight)
        ours.out_proj.weight.copy_(theirs.out_proj.weight)
        if ours.in_proj.bias is not None:
            ours.in_proj.bias.copy_(theirs.in_proj_bias)
        if ours.out_proj.bias is not None:
            ours.out_proj.bias.copy_(theirs.out_proj.bias)
    ours.dropout = theirs.dropout
    return ours
