"""The numbers behind the course's before-and-after check: six facts read off one model's runs.

Each function reads arrays a Trace already holds (attention weights, queries and keys, hidden
states) and returns a few numbers; the check's feedback quotes them, so a learner sees the fact
they reasoned out hold on the sentence and model on screen. Pure numpy: no model, no streamlit.
"""

from __future__ import annotations

import numpy as np


def row_sum_range(attn_weights: np.ndarray) -> tuple[float, float]:
    """(L, H, n, n) weights -> (smallest, largest) row sum Σ_j α_ij over every layer, head, row."""
    sums = np.asarray(attn_weights).sum(axis=-1, dtype=np.float64)  # (L, H, n)
    return float(sums.min()), float(sums.max())


def largest_above_diagonal(attn_weights: np.ndarray) -> float:
    """(L, H, n, n) weights -> the largest α_ij with j > i (a word on a later one); 0 for n = 1."""
    weights = np.asarray(attn_weights)
    n = weights.shape[-1]
    later = np.triu(np.ones((n, n), dtype=bool), k=1)  # (n, n): True where key j > query i
    if not later.any():
        return 0.0
    return float(weights[..., later].max())  # (L, H, n(n-1)/2) cells -> one number


def raw_score_spread(queries: np.ndarray, keys: np.ndarray, causal: bool) -> float:
    """Standard deviation of the unscaled q·k over every layer, head and allowed cell.

    queries, keys: (L, H, n, d_head); causal: only cells with j ≤ i count (the others are masked).
    One layer at a time: the whole (L, H, n, n) block would be ~150 MB in float64 at 512 pieces.
    """
    n = queries.shape[-2]
    allowed = np.tril(np.ones((n, n), dtype=bool)) if causal else np.ones((n, n), dtype=bool)
    total = total_sq = 0.0
    count = 0
    for query, key in zip(queries, keys, strict=True):  # (H, n, d_head) each
        scores = (query @ np.swapaxes(key, -1, -2))[:, allowed]  # (H, n, n) -> (H, cells)
        total += float(scores.sum(dtype=np.float64))
        total_sq += float(np.square(scores, dtype=np.float64).sum())
        count += scores.size
    mean = total / count
    return float(np.sqrt(max(total_sq / count - mean * mean, 0.0)))


def mean_top_weight(attn_weights: np.ndarray) -> float:
    """(L, H, n, n) weights -> the largest weight of a row, averaged over every row."""
    return float(np.asarray(attn_weights).max(axis=-1).mean(dtype=np.float64))


def top_keys(attn_weights: np.ndarray) -> np.ndarray:
    """(L, H, n, n) weights -> (L, H, n) the key each head's row weights most (first on a tie)."""
    return np.asarray(attn_weights).argmax(axis=-1)


def distinct_top_keys(attn_weights: np.ndarray) -> np.ndarray:
    """(L, H, n, n) weights -> (L, n): how many different keys a layer's H heads weight most,
    row by row (1 = every head picks the same key, H = each head its own)."""
    ranked = np.sort(top_keys(attn_weights), axis=1)  # (L, H, n), heads sorted per row
    return 1 + (np.diff(ranked, axis=1) != 0).sum(axis=1)  # (L, H-1, n) changes -> (L, n)


def _unit_rows(vectors: np.ndarray) -> np.ndarray:
    """(..., d) -> (..., d) each row divided by its length, in float64."""
    vectors = np.asarray(vectors, dtype=np.float64)
    return vectors / np.linalg.norm(vectors, axis=-1, keepdims=True)


def residual_cosines(hidden_states: np.ndarray) -> np.ndarray:
    """(L + 1, n, d_model) -> (L, n): cosine of each piece's vector leaving layer l with the one
    that entered it."""
    unit = _unit_rows(hidden_states)  # (L + 1, n, d_model)
    return (unit[1:] * unit[:-1]).sum(axis=-1)  # (L, n, d_model) -> (L, n)


def other_piece_cosine(hidden_states: np.ndarray) -> float:
    """(L + 1, n, d_model) -> the mean cosine of two different pieces' vectors leaving the same
    layer: how alike any two vectors of that stream are, the baseline for residual_cosines."""
    unit = _unit_rows(hidden_states[1:])  # (L, n, d_model)
    n = unit.shape[1]
    if n < 2:
        return float("nan")
    cosines = unit @ np.swapaxes(unit, -1, -2)  # (L, n, n)
    others = ~np.eye(n, dtype=bool)  # (n, n): pairs of two different pieces
    return float(cosines[:, others].mean())
