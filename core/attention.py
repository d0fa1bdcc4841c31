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
    """(n, d_model) -> (H, n, d_head): head h owns columns h*d_head .. (h+1)*d_head - 1."""
    n, d_model = x.shape
    d_head = d_model // n_heads
    return x.view(n, n_heads, d_head).transpose(0, 1)  # (n, H, d_head) -> (H, n, d_head)


def merge_heads(x: torch.Tensor) -> torch.Tensor:
    """(H, n, d_head) -> (n, H * d_head): the heads' outputs side by side (concatenation)."""
    n_heads, n, d_head = x.shape
    return x.transpose(0, 1).reshape(n, n_heads * d_head)  # (H, n, d_head) -> (n, H, d_head)


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


@dataclass(frozen=True)
class MultiHeadResult:
    """Everything one multi-head attention block computed, per head."""

    query: torch.Tensor  # (H, n_q, d_head)
    key: torch.Tensor  # (H, n_k, d_head)
    value: torch.Tensor  # (H, n_k, d_head)
    scores: torch.Tensor  # (H, n_q, n_k), scaled if scale=True, -inf where masked
    attn_weights: torch.Tensor  # (H, n_q, n_k)
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
) -> MultiHeadResult:
    """Multi-head attention of x_query (n_q, d) over x_key_value (n_k, d).

    Self-attention passes the same tensor twice; cross-attention passes two sentences.
    mask (n_q, n_k) bool, shared by all heads. head_keep (H,) float: 1 keeps a head, 0 removes
    its output before W_O (head ablation). out_scores / out_weights: optional preallocated
    (H, n_q, n_k) tensors to fill, so a caller that keeps every layer needs no extra copy.
    """
    # 1. Project every token into query, key and value space, then cut each into H heads.
    query = split_heads(weights.query(x_query), n_heads)  # (H, n_q, d_head)
    key = split_heads(weights.key(x_key_value), n_heads)  # (H, n_k, d_head)
    value = split_heads(weights.value(x_key_value), n_heads)  # (H, n_k, d_head)
    # 2. Score every query against every key, per head; forbidden pairs get -inf.
    scores = attention_scores(query, key, scale, out=out_scores)  # (H, n_q, n_k)
    if mask is not None:
        scores.masked_fill_(~mask, float("-inf"))
    # 3. Softmax each row into weights that sum to 1.
    attn_weights = masked_softmax(scores, out=out_weights)
    # 4. Each head mixes its value vectors with its own weights.
    head_outputs = attn_weights @ value  # (H, n_q, d_head)
    if head_keep is not None:
        head_outputs = head_outputs * head_keep.view(-1, 1, 1)
    # 5. Concatenate the heads and let W_O mix them back into d_model.
    output = weights.output(merge_heads(head_outputs))  # (n_q, d_model)
    return MultiHeadResult(query, key, value, scores, attn_weights, head_outputs, output)
