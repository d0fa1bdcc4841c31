"""Attention, one formula at a time.

Every function here is pure torch: tensors in, tensors out, no hidden state. Shapes use
    n      = number of tokens (n_q queries, n_k keys when they differ)
    d      = width of a token vector (d_model)
    d_head = width of one head's query/key/value vectors
    H      = number of heads

Masks are boolean and say who *may* be attended: mask[i, j] is True when query i may look at
key j. A masked score becomes -inf, so softmax gives it exactly zero weight.

A fully masked row (a query that may look at nothing) has no defined softmax: every entry is
-inf and a plain softmax returns NaN. We decide: such a row gets all-zero weights, so its output
is the zero vector. It never happens inside BERT (a token may always attend to itself), but
a hand-made mask can produce it and NaN must not leak into a figure.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch.nn import functional as F

# ---------------------------------------------------------------------------------------------
# Masks
# ---------------------------------------------------------------------------------------------


def causal_mask(n: int, device: torch.device | None = None) -> torch.Tensor:
    """(n, n) bool, True on and below the diagonal: token i may attend to tokens 0..i."""
    return torch.ones(n, n, dtype=torch.bool, device=device).tril()


def padding_mask(is_real: torch.Tensor) -> torch.Tensor:
    """(n,) bool "is a real token" -> (n, n) bool: every query may attend to real keys only."""
    n = is_real.shape[0]
    return is_real.unsqueeze(0).expand(n, n)  # row i is the same key pattern for every query


def segment_mask(segments: torch.Tensor) -> torch.Tensor:
    """(n,) segment ids -> (n, n) bool: a token may attend only within its own sentence."""
    return segments.unsqueeze(1) == segments.unsqueeze(0)


# ---------------------------------------------------------------------------------------------
# Scores, softmax, weighted sum
# ---------------------------------------------------------------------------------------------


def attention_scores(
    query: torch.Tensor, key: torch.Tensor, scale: bool = True, out: torch.Tensor | None = None
) -> torch.Tensor:
    """(..., n_q, d_head) x (..., n_k, d_head) -> (..., n_q, n_k) = Q Kᵀ, times 1/√d_head if scale.

    Without the scale, the dot product of two random d_head-dim vectors has variance d_head, so
    wide heads produce huge scores and a softmax that is almost one-hot. `out`, if given, is a
    preallocated tensor to write into (the encoder keeps every layer in one block, no copies).
    """
    scores = torch.matmul(query, key.transpose(-2, -1), out=out)
    if scale:
        d_head = query.shape[-1]
        scores.mul_(d_head**-0.5)  # multiply by the reciprocal, as BERT does
    return scores


def apply_mask(scores: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """Set the scores of forbidden pairs (mask False) to -inf; mask broadcasts to scores."""
    if mask is None:
        return scores
    return scores.masked_fill(~mask, float("-inf"))


def masked_softmax(scores: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    """Row-wise softmax over the last axis; a row that is entirely -inf gives zeros, not NaN."""
    # A row is fully masked exactly when its maximum is -inf: one cheap reduction tells.
    fully_masked = torch.isneginf(scores.amax(dim=-1, keepdim=True))
    if not fully_masked.any():
        return torch.softmax(scores, dim=-1, out=out)
    # Replace such rows by zeros before the softmax (any finite value works) so no NaN appears,
    # then zero their weights explicitly.
    attn_weights = torch.softmax(scores.masked_fill(fully_masked, 0.0), dim=-1, out=out)
    return attn_weights.masked_fill_(fully_masked, 0.0)


def scaled_dot_product_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    mask: torch.Tensor | None = None,
    scale: bool = True,
) -> tuple[torch.Tensor, torch.Tensor]:
    """softmax(Q Kᵀ / √d_head, masked) V.

    query (..., n_q, d_head), key (..., n_k, d_head), value (..., n_k, d_v),
    mask broadcastable to (..., n_q, n_k).
    Returns (output (..., n_q, d_v), attn_weights (..., n_q, n_k)).
    """
    scores = apply_mask(attention_scores(query, key, scale), mask)
    attn_weights = masked_softmax(scores)
    output = attn_weights @ value  # each output row is a weighted average of value rows
    return output, attn_weights


def parameter_free_attention(
    x: torch.Tensor, scale: bool = False
) -> tuple[torch.Tensor, torch.Tensor]:
    """Y = softmax(X Xᵀ) X for x (n, d): every token is its own query, key and value.

    Returns (y (n, d), attn_weights (n, n)). Nothing here can be trained: the similarity of two
    words is fixed by their vectors alone.
    """
    return scaled_dot_product_attention(x, x, x, scale=scale)


# ---------------------------------------------------------------------------------------------
# Heads
# ---------------------------------------------------------------------------------------------


def split_heads(x: torch.Tensor, n_heads: int) -> torch.Tensor:
    """(..., n, H * d_head) -> (..., H, n, d_head): head h owns columns h*d_head .. (h+1)*d_head - 1."""
    *batch, n, width = x.shape
    d_head = width // n_heads
    # (..., n, H, d_head) -> (..., H, n, d_head)
    return x.view(*batch, n, n_heads, d_head).transpose(-3, -2)


def merge_heads(x: torch.Tensor) -> torch.Tensor:
    """(..., H, n, d_head) -> (..., n, H * d_head): the heads' outputs side by side (concatenation)."""
    *batch, n_heads, n, d_head = x.shape
    # (..., H, n, d_head) -> (..., n, H, d_head) -> (..., n, H * d_head)
    return x.transpose(-3, -2).reshape(*batch, n, n_heads * d_head)


def share_heads(x: torch.Tensor, n_heads: int) -> torch.Tensor:
    """(..., H_kv, n, d_head) -> (..., H, n, d_head): grouped-query attention's sharing.

    With H_kv key/value heads for H query heads, key/value head g serves the query heads
    g * H/H_kv .. (g+1) * H/H_kv - 1 (as Llama's repeat_kv lays them out).
    """
    n_kv_heads = x.shape[-3]
    if n_kv_heads == n_heads:
        return x
    return x.repeat_interleave(n_heads // n_kv_heads, dim=-3)


# ---------------------------------------------------------------------------------------------
# Rotary positions (Su et al., 2021): position p turns each pair of a query's or key's
# coordinates by the angle p · θ_i, so that q_p · k_r depends on p - r.
# ---------------------------------------------------------------------------------------------


def rotary_tables(
    n_positions: int, d_head: int, theta: float = 10_000.0
) -> tuple[torch.Tensor, torch.Tensor]:
    """(cos, sin), each (n_positions, d_head): angle p · θ^(-2i/d_head) for pair i at position p.

    The pair i is coordinates (i, i + d_head/2), the layout of Llama's rotate_half; the float32
    steps are those of transformers' LlamaRotaryEmbedding, so the angles agree bit for bit.
    """
    inverse_frequencies = 1.0 / (
        theta ** (torch.arange(0, d_head, 2, dtype=torch.float) / d_head)
    )  # (d_head / 2,)
    angles = torch.arange(n_positions).float()[:, None] * inverse_frequencies  # (n, d_head / 2)
    angles = torch.cat((angles, angles), dim=-1)  # (n, d_head): pair i at i and i + d_head/2
    return angles.cos(), angles.sin()


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    """(..., d_head): (x1, x2) -> (-x2, x1), the halves being the first and second d_head/2."""
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """(..., n, d_head) turned by the (n, d_head) angles: x cos + rotate_half(x) sin."""
    return x * cos + rotate_half(x) * sin


# Two numbers that differ by less than this are tied: two rivals equally near an occurrence
# (core/embeddings.py), two keys sharing a row's largest weight (core/qkv.py). Vectors are
# float32, so their cosines and scores carry rounding from about the seventh decimal; and a model
# without a position table hands every copy of a piece the very same vector, where "nearest" or
# "largest" would otherwise be whichever copy comes first. Defined here, beside the attention
# arithmetic, so that a page importing it loads no projection library.
NEAREST_TIE = 1e-6


@dataclass(frozen=True)
class Projection:
    """One linear map y = x Wᵀ + b in torch's (out, in) layout, as checkpoints store it."""

    weight: torch.Tensor  # (d_out, d_in)
    bias: torch.Tensor | None  # (d_out,)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.weight, self.bias)


@dataclass(frozen=True)
class AttentionWeights:
    """The four projections of one multi-head attention block."""

    query: Projection
    key: Projection
    value: Projection
    output: Projection  # W_O: (d_model, H * d_head), mixes the concatenated heads


# The values inside attention a caller may read or replace (core/transformer.py names them per
# layer): queries and keys after the rotary turn, values, per query head, and the weights.
QUERY, KEY, VALUE, ATTN_WEIGHTS = "query", "key", "value", "attn_weights"
# (value, point) -> the value to use (None keeps it): the order of core/transformer.py's hooks
AttentionHook = Callable[[torch.Tensor, str], torch.Tensor | None]


@dataclass(frozen=True)
class MultiHeadResult:
    """Everything one multi-head attention block computed, per head."""

    query: torch.Tensor  # (H, n_q, d_head), after the rotary turn if any
    key: torch.Tensor  # (H, n_k, d_head), a shared key/value head repeated for each query head
    value: torch.Tensor  # (H, n_k, d_head)
    scores: torch.Tensor | None  # (H, n_q, n_k), scaled if scale=True, -inf where masked
    attn_weights: torch.Tensor | None  # (H, n_q, n_k); both None when not kept (fused)
    head_outputs: torch.Tensor  # (H, n_q, d_head) = attn_weights @ value
    output: torch.Tensor  # (n_q, d_model) = concat(head_outputs) W_Oᵀ + b_O


def multi_head_attention(
    x_query: torch.Tensor,
    x_key_value: torch.Tensor,
    weights: AttentionWeights,
    n_heads: int,
    mask: torch.Tensor | None = None,
    scale: bool = True,
    head_keep: torch.Tensor | None = None,
    out_scores: torch.Tensor | None = None,
    out_weights: torch.Tensor | None = None,
    *,
    n_kv_heads: int | None = None,
    rotary: tuple[torch.Tensor, torch.Tensor] | None = None,
    fused: bool = False,
    hook: AttentionHook | None = None,
) -> MultiHeadResult:
    """Multi-head attention of x_query (..., n_q, d) over x_key_value (..., n_k, d).

    Self-attention passes the same tensor twice; cross-attention passes two sentences. Leading
    axes (a batch) pass through. mask (n_q, n_k) bool, shared by all heads. head_keep (H,) float:
    1 keeps a head, 0 removes its output before W_O (head ablation). out_scores / out_weights:
    optional preallocated (H, n_q, n_k) tensors to fill, so a caller that keeps every layer needs
    no extra copy. n_kv_heads: key/value heads shared by groups of query heads (grouped-query
    attention; None: one per query head). rotary: (cos, sin) (n, d_head) that turn queries and
    keys by their positions (self-attention only). fused: steps 2-4 in torch's fused kernel
    (F.scaled_dot_product_attention), which never holds the (H, n_q, n_k) scores or weights (a
    gradient pass at 512 pieces kept ~60 MB of them per layer for the way back, the fused kernel
    ~16 MB); the result then has no scores or weights. No row may be fully masked.
    hook(value, point): called with the queries, keys, values (QUERY, KEY, VALUE) and weights
    (ATTN_WEIGHTS, not when fused); what it returns is used from then on, None keeps the value
    (a weight written into out_weights stays in it).
    """
    hook = _keeping(hook)
    # 1. Project every token into query, key and value space, then cut each into heads.
    n_kv_heads = n_kv_heads or n_heads
    query = split_heads(weights.query(x_query), n_heads)  # (..., H, n_q, d_head)
    key = split_heads(weights.key(x_key_value), n_kv_heads)  # (..., H_kv, n_k, d_head)
    value = split_heads(weights.value(x_key_value), n_kv_heads)  # (..., H_kv, n_k, d_head)
    if rotary is not None:  # positions enter here, as a turn of every query and key
        query, key = apply_rotary(query, *rotary), apply_rotary(key, *rotary)
    key, value = share_heads(key, n_heads), share_heads(value, n_heads)  # (..., H, n_k, d_head)
    query, key, value = hook(query, QUERY), hook(key, KEY), hook(value, VALUE)
    if fused:  # 2-4 at once; scale=None is 1/√d_head, 1.0 is none
        head_outputs = F.scaled_dot_product_attention(
            query, key, value, attn_mask=mask, scale=None if scale else 1.0
        )  # (..., H, n_q, d_head)
        scores = attn_weights = None
    else:
        # 2. Score every query against every key, per head; forbidden pairs get -inf.
        scores = attention_scores(query, key, scale, out=out_scores)  # (..., H, n_q, n_k)
        if mask is not None:
            scores.masked_fill_(~mask, float("-inf"))
        # 3. Softmax each row into weights that sum to 1.
        attn_weights = masked_softmax(scores, out=out_weights)
        replaced = hook(attn_weights, ATTN_WEIGHTS)
        if replaced is not attn_weights:  # keep a preallocated block true to what was used
            attn_weights = replaced if out_weights is None else out_weights.copy_(replaced)
        # 4. Each head mixes its value vectors with its own weights.
        head_outputs = attn_weights @ value  # (..., H, n_q, d_head)
    if head_keep is not None:
        head_outputs = head_outputs * head_keep.view(-1, 1, 1).to(head_outputs.dtype)
    # 5. Concatenate the heads and let W_O mix them back into d_model.
    output = weights.output(merge_heads(head_outputs))  # (..., n_q, d_model)
    return MultiHeadResult(query, key, value, scores, attn_weights, head_outputs, output)


def _keeping(hook: AttentionHook | None) -> Callable[[torch.Tensor, str], torch.Tensor]:
    """The hook as one that always returns the value to use (None from it keeps the value)."""
    if hook is None:
        return lambda value, _point: value

    def hooked(value: torch.Tensor, point: str) -> torch.Tensor:
        replaced = hook(value, point)
        return value if replaced is None else replaced

    return hooked
