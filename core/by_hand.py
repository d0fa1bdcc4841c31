"""Attention small enough to check on paper, and what makes it different from a dense layer.

Three lessons, each a pure function over tiny arrays:
1. A toy sentence of four words in four dimensions: the scores X Xᵀ are sums of four products of
   small integers, so a learner can redo every number of Y = softmax(X Xᵀ) X by hand.
2. Attention as a soft dictionary lookup: a query is compared with every key; a hard lookup
   returns the value of the best key, a soft lookup a softmax-weighted mix of all values.
3. A dense layer mixes tokens with weights fixed after training; attention recomputes its mixing
   weights from the tokens themselves, so the same position mixes differently in another sentence.
Plus the cost of attention: its n × n matrices grow with the square of the sentence length.

Shapes: n tokens, d dimensions; everything returned is float64 numpy (small and exact enough to
print with two decimals and still add up).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# The toy's four dimensions mean something, so a learner can read a dot product as "shared
# features": money and bank share "finance", river and bank share "water". Every word's own
# score is the largest in its row, so a hard lookup never has to break a tie.
TOY_FEATURES = ("finance", "water", "place", "action")
TOY_VECTORS: dict[str, tuple[float, ...]] = {
    "money": (2, 0, 0, 0),
    "bank": (1, 1, 2, 0),
    "river": (0, 2, 1, 0),
    "grows": (1, 0, 0, 2),
}


@dataclass(frozen=True)
class ToySentence:
    words: tuple[str, ...]  # n words
    vectors: np.ndarray  # (n, 4) rows of TOY_VECTORS

    def feature_columns(self) -> dict[str, list[float]]:
        """Each of TOY_FEATURES with its value for every word, in word order: a table's
        columns."""
        return {
            feature: self.vectors[:, k].tolist()  # (n,) column k
            for k, feature in enumerate(TOY_FEATURES)
        }


def toy_sentence(words: tuple[str, ...]) -> ToySentence:
    """Words from TOY_VECTORS -> their (n, 4) vectors; KeyError names an unknown word."""
    return ToySentence(tuple(words), np.array([TOY_VECTORS[w] for w in words], dtype=np.float64))


@dataclass(frozen=True)
class ByHand:
    """Every intermediate of Y = softmax(X Xᵀ) X, with the exponentials a learner writes down."""

    scores: np.ndarray  # (n, n) S = X Xᵀ, small integers for the toy
    exponentials: np.ndarray  # (n, n) e^{S_ij}
    row_sums: np.ndarray  # (n,) Σ_j e^{S_ij}
    attn_weights: np.ndarray  # (n, n) e^{S_ij} / Σ_k e^{S_ik}
    output: np.ndarray  # (n, d) Y = weights X

    @property
    def self_weights(self) -> np.ndarray:
        """(n,) α_ii: the weight each word keeps for itself."""
        return self.attn_weights.diagonal()

    def keeps_most_and_least(self) -> tuple[int, int]:
        """The words that keep the most and the least weight for themselves (the first of a
        tie)."""
        return int(self.self_weights.argmax()), int(self.self_weights.argmin())


def attention_by_hand(x: np.ndarray) -> ByHand:
    """x (n, d) -> S = X Xᵀ, e^S, row sums, softmax weights and Y, in the order of a hand calculation.

    No max-subtraction: the toy's scores are small, and the page shows e^S as written on paper.
    """
    x = np.asarray(x, dtype=np.float64)
    scores = x @ x.T  # (n, d) @ (d, n) -> (n, n)
    exponentials = np.exp(scores)
    row_sums = exponentials.sum(axis=1)  # (n,)
    attn_weights = exponentials / row_sums[:, None]  # each row divided by its own sum
    return ByHand(scores, exponentials, row_sums, attn_weights, attn_weights @ x)


# ---- soft dictionary lookup --------------------------------------------------------------------
@dataclass(frozen=True)
class Lookup:
    """One query against a small dictionary of (key, value) pairs, hard and soft."""

    scores: np.ndarray  # (n,) q · k_j
    soft_weights: np.ndarray  # (n,) softmax(sharpness · scores)
    hard_weights: np.ndarray  # (n,) one-hot on the best-matching key (the first if tied)
    soft_value: np.ndarray  # (d_v,) Σ_j soft_j v_j
    hard_value: np.ndarray  # (d_v,) the value of the best key


def lookup(
    query: np.ndarray, keys: np.ndarray, values: np.ndarray, sharpness: float = 1.0
) -> Lookup:
    """query (d,), keys (n, d), values (n, d_v) -> a hard and a soft retrieval.

    sharpness multiplies the scores before the softmax: large values make the soft lookup
    approach the hard one, 0 makes it the plain average of all values.
    """
    query, keys, values = (np.asarray(a, dtype=np.float64) for a in (query, keys, values))
    scores = keys @ query  # (n, d) @ (d,) -> (n,)
    shifted = sharpness * scores - np.max(sharpness * scores)  # same softmax, no overflow
    soft_weights = np.exp(shifted) / np.exp(shifted).sum()
    hard_weights = np.zeros_like(scores)
    hard_weights[int(np.argmax(scores))] = 1.0
    return Lookup(scores, soft_weights, hard_weights, soft_weights @ values, hard_weights @ values)


# ---- a dense layer against attention ------------------------------------------------------------
def dense_token_mixing(n: int, seed: int = 0) -> np.ndarray:
    """(n, n) fixed token-mixing weights, rows summing to 1: what a dense layer over the n
    positions would apply to every sentence alike (seeded, so it stays put between reruns)."""
    rng = np.random.default_rng(seed)
    raw = rng.random((n, n))
    return raw / raw.sum(axis=1, keepdims=True)


@dataclass(frozen=True)
class MixingContrast:
    """How position `row` mixes the tokens of two sentences, by a dense layer and by attention."""

    dense_first: np.ndarray  # (n,) the dense layer's row: the same numbers for both sentences
    dense_second: np.ndarray  # (n,)
    attention_first: np.ndarray  # (n,) softmax(X Xᵀ) row for the first sentence
    attention_second: np.ndarray  # (n,) the same row for the second: other words, other weights


def mixing_contrast(
    x_first: np.ndarray, x_second: np.ndarray, dense: np.ndarray, row: int
) -> MixingContrast:
    """Row `row` of a fixed mixing matrix and of softmax(X Xᵀ), for two sentences of equal length."""
    if np.shape(x_first) != np.shape(x_second):
        raise ValueError("the two sentences must have the same number of tokens and dimensions")
    first, second = attention_by_hand(x_first), attention_by_hand(x_second)
    return MixingContrast(
        dense[row].copy(),
        dense[row].copy(),  # fixed after training: the input never enters these numbers
        first.attn_weights[row],
        second.attn_weights[row],
    )


# ---- what attention costs -----------------------------------------------------------------------
@dataclass(frozen=True)
class LayerCost:
    """Multiply-adds of one layer for n tokens (counting one per product in a matmul).

    The comments give BERT's terms (d_q = d_kv = d_model, two feed-forward matrices); grouped
    key/value heads make K and V narrower (d_kv), a gated feed-forward has a third matrix.
    """

    n: int
    projections: int  # Q, K, V and W_O: n · d_model · (2 d_q + 2 d_kv), BERT 4 · n · d_model²
    scores: int  # Q Kᵀ over all heads: n² · d_q (H heads × n² × d_head)
    mixing: int  # attn_weights @ V over all heads: n² · d_q (each query head its group's V)
    feed_forward: int  # the dense layers: ffn_matrices · n · d_model · d_ff
    attention_cells: int  # H · n² weights to store per layer

    @property
    def quadratic_share(self) -> float:
        """The part of the layer's work that grows with n²: scores and mixing."""
        total = self.projections + self.scores + self.mixing + self.feed_forward
        return (self.scores + self.mixing) / total


def layer_cost(
    n: int,
    d_model: int,
    n_heads: int,
    d_ff: int,
    d_q: int | None = None,
    d_kv: int | None = None,
    ffn_matrices: int = 2,
) -> LayerCost:
    """The multiply-adds of one layer for n tokens, term by term (formulas above).

    d_q: width of all query heads together (None: d_model); d_kv: of all key (or value) heads
    (None: d_q); ffn_matrices: 2 (W_1, W_2), 3 for a gated feed-forward (gate, up, down).
    """
    d_q = d_model if d_q is None else d_q
    d_kv = d_q if d_kv is None else d_kv
    return LayerCost(
        n=n,
        projections=n * d_model * (2 * d_q + 2 * d_kv),
        scores=n * n * d_q,
        mixing=n * n * d_q,
        feed_forward=ffn_matrices * n * d_model * d_ff,
        attention_cells=n_heads * n * n,
    )


def break_even_length(
    d_model: int, d_ff: int, d_q: int | None = None, d_kv: int | None = None, ffn_matrices: int = 2
) -> int:
    """The least n at which the n² terms (2 n² d_q) reach the n terms (layer_cost's
    projections and feed-forward): BERT's 2 d + d_ff."""
    d_q = d_model if d_q is None else d_q
    d_kv = d_q if d_kv is None else d_kv
    linear = d_model * (2 * d_q + 2 * d_kv) + ffn_matrices * d_model * d_ff  # per token
    return -(-linear // (2 * d_q))  # 2 n² d_q >= n · linear, divided by 2 n d_q, rounded up


MAX_TOY_WORDS = 4  # a 4 × 4 score matrix still fits a phone with its numbers written in


def toy_words(text: str, limit: int = MAX_TOY_WORDS) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Typed text -> (the first `limit` words found in TOY_VECTORS, in order; the other words).

    Case and punctuation around a word are ignored; a word may repeat.
    """
    known, unknown = [], []
    for raw in text.split():
        word = raw.strip(".,;:!?\"'()").lower()
        if word in TOY_VECTORS:
            known.append(word)
        elif word:
            unknown.append(word)
    return tuple(known[:limit]), tuple(dict.fromkeys(unknown))  # unknown: each once, in order
