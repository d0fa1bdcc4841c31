"""The encoder lens: how early does each vector, and the sentence, settle on its final meaning?

A decoder's "logit lens" reads every layer through the output head. MiniLM has no output head,
so the lens here compares every layer with the last one: each token's cosine to its own final
vector, the mean-pooled layer state's cosine to the final sentence embedding, and (through the
input word-piece table, which BERT also uses as its output table) the nearest word pieces of a
token at every layer, via core.geometry.nearest_words.
"""

from __future__ import annotations

import numpy as np

from core.geometry import nearest_words
from core.positional import cosine, unit_rows


def token_settling(hidden_states: np.ndarray) -> np.ndarray:
    """(L + 1, n, d) -> (L + 1, n): cos(h_l[i], h_L[i]), each token against its final vector."""
    n_states, n, d = hidden_states.shape
    final = np.broadcast_to(hidden_states[-1], (n_states, n, d)).reshape(-1, d)
    # (L + 1, n, d) -> ((L + 1)·n, d): one row per (state, token), then back
    return cosine(hidden_states.reshape(-1, d), final).reshape(n_states, n)


def sentence_settling(hidden_states: np.ndarray) -> np.ndarray:
    """(L + 1, n, d) -> (L + 1,): cos(mean_i h_l[i], final sentence embedding)."""
    pooled = unit_rows(hidden_states.astype(np.float64).mean(axis=1))  # (L + 1, d)
    return np.clip(pooled @ pooled[-1], -1.0, 1.0)


def similarity_by_layer(first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """(L + 1, n_a, d), (L + 1, n_b, d) -> (L + 1,): cos of the two mean-pooled states per state.

    The last entry is the two sentences' similarity; the earlier ones say where it emerges.
    """
    pooled_first = unit_rows(first.astype(np.float64).mean(axis=1))  # (L + 1, d)
    pooled_second = unit_rows(second.astype(np.float64).mean(axis=1))
    return np.clip(np.einsum("ld,ld->l", pooled_first, pooled_second), -1.0, 1.0)


def nearest_by_layer(
    hidden_states: np.ndarray,
    token: int,
    unit_table: np.ndarray,
    allowed: np.ndarray | None = None,
    k: int = 5,
) -> tuple[np.ndarray, np.ndarray]:
    """(L + 1, k) ids and cosines of the word pieces nearest one token's vector at every state."""
    return nearest_words(hidden_states[:, token], unit_table, k, allowed)
