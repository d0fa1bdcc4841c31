"""How position gets into a transformer: sinusoidal, binary and learned position vectors.

Attention compares every token with every other token through dot products; nothing in that
comparison knows which token came first. Order enters only through position: a vector added to
each token that depends on its position p, or a turn of every query and key by p inside
attention (rotary, Su et al., 2021); a decoder's causal mask is an order signal of its own. The
kinds studied here:

    binary      bit j of p: flips every 2^j positions (discrete, the ancestor of the sinusoid)
    sinusoidal  PE[p, 2i] = sin(ω_i p), PE[p, 2i+1] = cos(ω_i p), ω_i = base^(-2i/d_model)
    learned     a (max_positions, d_model) table trained with the model (BERT's choice)
    rotary      pair i of q and k turned by the angle p θ_i (the Llama family)

Everything here returns plain numpy arrays (float64 unless stated) so tests can check the math
exactly; the model is used only for its tables and for the permutation experiment at the end.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import torch

from core.transformer import ATTN_INPUT, ATTN_WEIGHTS, Trace, Transformer, hook_name

BASE = 10_000.0  # the sinusoid's base in "Attention is all you need"
# Attention weights (0..1) of the same pieces run in another order agree to ~1e-7 in float32:
# a difference above this is the order itself, not rounding.
ROUNDING = 1e-4


class Encodings(NamedTuple):
    """The position codes a page compares, at one size: n_positions rows, the sinusoid
    (n_positions, d_model), and a model's learned table's first n_positions rows (None for a
    model with rotary positions, which has no table)."""

    n_positions: int
    d_model: int
    sinusoid: np.ndarray
    learned: np.ndarray | None

    def on_common_rows(self) -> Encodings:
        """The same codes cut to the positions every one of them has: a learned table shorter
        than n_positions leaves len(learned) rows of each (else the codes unchanged)."""
        if self.learned is None or len(self.learned) >= self.n_positions:
            return self
        rows = len(self.learned)
        return Encodings(rows, self.d_model, self.sinusoid[:rows], self.learned)  # (rows, d_model)


def encodings(n_positions: int, d_model: int, table: np.ndarray | None) -> Encodings:
    """The codes at one size: the sinusoid (n_positions, d_model) and the first n_positions rows
    of a learned position table (n_table, d_table), all of it when it has fewer; None stays None
    (a model with rotary positions has no table)."""
    learned = None if table is None else table[:n_positions]  # (min(n_positions, n_table), d_table)
    return Encodings(n_positions, d_model, sinusoidal_encoding(n_positions, d_model), learned)


# ---------------------------------------------------------------------------------------------
# 1. Sinusoidal encoding
# ---------------------------------------------------------------------------------------------


def frequencies(d_model: int, base: float = BASE) -> np.ndarray:
    """(d_model // 2,) angular frequencies ω_i = base^(-2i / d_model), fastest first."""
    if d_model < 2 or d_model % 2:
        raise ValueError(f"d_model must be even and at least 2, got {d_model}")
    pair_index = np.arange(d_model // 2, dtype=np.float64)  # i = 0 .. d/2 - 1
    return base ** (-2.0 * pair_index / d_model)


def sinusoidal_encoding(n_positions: int, d_model: int, base: float = BASE) -> np.ndarray:
    """(n_positions, d_model): PE[p, 2i] = sin(ω_i p), PE[p, 2i+1] = cos(ω_i p)."""
    positions = np.arange(n_positions, dtype=np.float64)[:, None]  # (n, 1)
    angles = positions * frequencies(d_model, base)[None, :]  # (n, d/2): ω_i · p
    encoding = np.empty((n_positions, d_model), dtype=np.float64)
    encoding[:, 0::2] = np.sin(angles)  # even dimensions: sine
    encoding[:, 1::2] = np.cos(angles)  # odd dimensions: cosine of the same angle (interleaved)
    return encoding


def wavelengths(d_model: int, base: float = BASE) -> np.ndarray:
    """(d_model,) the period in positions of every dimension: 2π / ω_i (a pair shares one)."""
    return np.repeat(2.0 * np.pi / frequencies(d_model, base), 2)


def wavelength_ladder(d_model: int, base: float = BASE) -> tuple[float, float, float]:
    """The sinusoid's ladder of wavelengths: (the step from one pair to the next, ω_{i+1} / ω_i
    = base^(-2/d_model); the shortest wavelength, 2π; the longest, 2π / ω_{d/2-1})."""
    periods = 2.0 * np.pi / frequencies(d_model, base)  # (d_model // 2,) one per pair
    step = periods[0] / periods[1] if len(periods) > 1 else 1.0
    return float(step), float(periods[0]), float(periods[-1])


# ---------------------------------------------------------------------------------------------
# 2. Binary encoding: the discrete ancestor
# ---------------------------------------------------------------------------------------------


def n_bits_for(n_positions: int) -> int:
    """Bits needed to write positions 0 .. n_positions - 1 (at least 1)."""
    return max(1, int(n_positions - 1).bit_length())


def binary_encoding(
    n_positions: int, n_bits: int | None = None, signed: bool = False
) -> np.ndarray:
    """(n_positions, n_bits): column j is bit j of p (bit 0 = least significant), 0/1 or ±1."""
    n_bits = n_bits or n_bits_for(n_positions)
    positions = np.arange(n_positions, dtype=np.int64)[:, None]  # (n, 1)
    bits = (positions >> np.arange(n_bits)[None, :]) & 1  # (n, n_bits)
    bits = bits.astype(np.float64)
    # ±1 bits are centred: their dot product counts agreeing minus disagreeing bits.
    return 2.0 * bits - 1.0 if signed else bits


def bit_of(positions: np.ndarray | range, bit: int) -> np.ndarray:
    """(n,) bit j of each position p, 0.0 or 1.0: column j of binary_encoding."""
    return ((np.asarray(positions, dtype=np.int64) >> bit) & 1).astype(np.float64)


def smooth_bit(positions: np.ndarray, bit: int) -> np.ndarray:
    """The sinusoid with bit j's period 2^(j+1), peaking in the middle of each run of ones.

    bit j is 1 for p mod 2^(j+1) in [2^j, 2^(j+1) - 1], whose centre is c = 1.5·2^j - 0.5;
    the curve is 0.5 + 0.5·cos(2π (p - c) / 2^(j+1)).
    """
    period = 2.0 ** (bit + 1)
    centre = 1.5 * 2.0**bit - 0.5
    return 0.5 + 0.5 * np.cos(
        2.0 * np.pi * (np.asarray(positions, dtype=np.float64) - centre) / period
    )


# ---------------------------------------------------------------------------------------------
# 3. Relative position: PE(p + k) = R_k PE(p)
# ---------------------------------------------------------------------------------------------


def rotation_matrix(offset: int, d_model: int, base: float = BASE) -> np.ndarray:
    """(d_model, d_model) block-diagonal R_k: block i = [[cos ω_i k, sin ω_i k], [-sin, cos]].

    sin(a + b) = sin a cos b + cos a sin b and cos(a + b) = cos a cos b - sin a sin b, so the
    block maps the pair (sin ω_i p, cos ω_i p) to (sin ω_i (p+k), cos ω_i (p+k)) for every p.
    """
    angles = frequencies(d_model, base) * offset  # (d/2,) ω_i k
    cos, sin = np.cos(angles), np.sin(angles)
    rotation = np.zeros((d_model, d_model), dtype=np.float64)
    even, odd = np.arange(0, d_model, 2), np.arange(1, d_model, 2)
    rotation[even, even] = cos
    rotation[even, odd] = sin
    rotation[odd, even] = -sin
    rotation[odd, odd] = cos
    return rotation


@dataclass(frozen=True)
class RotationCheck:
    """R_k applied to PE(p) for many p, compared with PE(p + k)."""

    offset: int  # k
    d_model: int
    positions: np.ndarray  # (n,) the p that were checked
    rotation: np.ndarray  # (d_model, d_model) R_k, the same matrix for every p
    original: np.ndarray  # (n, d_model) PE(p)
    rotated: np.ndarray  # (n, d_model) R_k PE(p)
    shifted: np.ndarray  # (n, d_model) PE(p + k)
    max_abs_error: float  # max |R_k PE(p) - PE(p + k)| over every p and dimension
    frequencies: np.ndarray  # (d_model / 2,) ω_i
    angles: np.ndarray  # (d_model / 2,) ω_i k: how far each pair is turned


def rotation_check(
    offset: int, d_model: int, n_positions: int = 128, base: float = BASE
) -> RotationCheck:
    """Check PE(p + k) = R_k PE(p) for p = 0 .. n_positions - 1 with one matrix R_k."""
    encoding = sinusoidal_encoding(n_positions + offset, d_model, base)  # (n + k, d)
    rotation = rotation_matrix(offset, d_model, base)
    rotated = encoding[:n_positions] @ rotation.T  # row p: (R_k PE(p))ᵀ
    shifted = encoding[offset : offset + n_positions]
    omega = frequencies(d_model, base)
    return RotationCheck(
        offset=offset,
        d_model=d_model,
        positions=np.arange(n_positions),
        rotation=rotation,
        original=encoding[:n_positions],
        rotated=rotated,
        shifted=shifted,
        max_abs_error=float(np.max(np.abs(rotated - shifted))) if n_positions else 0.0,
        frequencies=omega,
        angles=omega * offset,
    )


# ---------------------------------------------------------------------------------------------
# 4. Similarity between positions
# ---------------------------------------------------------------------------------------------


def unit_rows(vectors: np.ndarray) -> np.ndarray:
    """(n, d) -> (n, d) every row divided by its length (zero rows stay zero)."""
    vectors = np.asarray(vectors, dtype=np.float64)
    norms = np.linalg.norm(vectors, axis=-1, keepdims=True)
    return vectors / np.where(norms > 0, norms, 1.0)


def cosine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(…, d) x (…, d) -> (…,) cos = a·b / (‖a‖ ‖b‖) of matching rows, float64; 0 for a zero row.

    Two plain (d,) vectors give a 0-d array (use float() for a number).
    """
    a64, b64 = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    norms = np.linalg.norm(a64, axis=-1) * np.linalg.norm(b64, axis=-1)
    dots = (a64 * b64).sum(axis=-1)
    return np.divide(dots, norms, out=np.zeros_like(dots), where=norms > 0)


def similarity_matrix(vectors: np.ndarray, kind: str = "cosine") -> np.ndarray:
    """(n, d) -> (n, n): x_p · x_q ("dot") or x_p · x_q / (‖x_p‖ ‖x_q‖) ("cosine")."""
    if kind not in ("dot", "cosine"):
        raise ValueError(f"kind must be 'dot' or 'cosine', got {kind!r}")
    if kind == "dot":
        rows = np.asarray(vectors, dtype=np.float64)
        return rows @ rows.T
    rows = unit_rows(vectors)
    return np.clip(rows @ rows.T, -1.0, 1.0)  # rounding can pass ±1 by an ulp


def distance_profile(similarity: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(n, n) -> (n,), (n,): mean and spread of similarity[p, q] over pairs with |p - q| = k."""
    n = similarity.shape[0]
    means, spreads = np.zeros(n), np.zeros(n)
    for k in range(n):
        diagonal = np.diagonal(similarity, offset=k)  # every pair (p, p + k)
        means[k], spreads[k] = diagonal.mean(), diagonal.std()
    return means, spreads


SLOW_DRIFT = 0.9  # a dimension whose neighbouring positions correlate above this drifts slowly


def lag_one_correlations(table: np.ndarray) -> np.ndarray:
    """(n, d) position vectors -> (d,): per dimension, the correlation of its value at position
    p with its value at p + 1, over p = 0 … n − 2. Near 1: it drifts slowly with position; near
    0 or below: it jumps from one position to the next. 0 for a dimension constant there."""
    table = np.asarray(table, dtype=np.float64)
    here = table[:-1] - table[:-1].mean(axis=0)  # (n - 1, d)
    after = table[1:] - table[1:].mean(axis=0)
    norms = np.sqrt((here**2).sum(axis=0) * (after**2).sum(axis=0))  # (d,)
    products = (here * after).sum(axis=0)
    return np.divide(products, norms, out=np.zeros_like(products), where=norms > 0)


def slow_drift_share(table: np.ndarray) -> float:
    """The share of a (n, d) table's dimensions that drift slowly with position: lag-one
    correlation above SLOW_DRIFT."""
    return float(np.mean(lag_one_correlations(table) > SLOW_DRIFT))


def explained_by_distance(similarity: np.ndarray) -> float:
    """R² of predicting similarity[p, q] (p ≠ q) by the mean over all pairs at distance |p - q|.

    1.0: similarity is a function of distance alone; 0.0: distance says nothing. The diagonal
    is left out: a cosine of 1 with itself would count as "explained" for any vectors.
    """
    n = similarity.shape[0]
    means, _ = distance_profile(similarity)
    distance = np.abs(np.arange(n)[:, None] - np.arange(n)[None, :])  # (n, n) |p - q|
    off_diagonal = distance > 0
    values = similarity[off_diagonal]
    residual = values - means[distance][off_diagonal]
    total_ss = float(np.sum((values - values.mean()) ** 2)) if values.size else 0.0
    return 1.0 - float(np.sum(residual**2)) / total_ss if total_ss > 0 else 1.0


# ---------------------------------------------------------------------------------------------
# 5. Near-orthogonality in high dimensions
# ---------------------------------------------------------------------------------------------


def random_unit_dot_products(dim: int, n_pairs: int = 4000, seed: int = 0) -> np.ndarray:
    """(n_pairs,) a · b for independent random unit vectors a, b in dim dimensions.

    E[a · b] = 0 and Var[a · b] = 1 / dim: in many dimensions random directions are almost
    perpendicular, with a spread that shrinks like 1 / √dim.
    """
    rng = np.random.default_rng(seed)
    a = unit_rows(rng.standard_normal((n_pairs, dim)))  # a Gaussian, normalised: uniform direction
    b = unit_rows(rng.standard_normal((n_pairs, dim)))
    return np.einsum("pd,pd->p", a, b)


def row_pair_cosines(
    first: np.ndarray, second: np.ndarray | None = None, n_pairs: int = 4000, seed: int = 0
) -> np.ndarray:
    """(n_pairs,) cosines between random rows of first and second (distinct rows if same table)."""
    rng = np.random.default_rng(seed)
    second_table = first if second is None else second
    i = rng.integers(0, first.shape[0], n_pairs)
    j = rng.integers(0, second_table.shape[0], n_pairs)
    if second is None:  # a row compared with itself would give exactly 1: move it along by one
        j = np.where(i == j, (j + 1) % first.shape[0], j)
    a, b = unit_rows(first[i]), unit_rows(second_table[j])
    return np.einsum("pd,pd->p", a, b)


def _cosines_to_rows(unit_x: np.ndarray, table: np.ndarray) -> np.ndarray:
    """(n, d) unit vectors, (r, d) table -> (n, r) cosines, without a float64 copy of the table."""
    norms = np.linalg.norm(table, axis=1)  # (r,)
    dots = unit_x.astype(table.dtype) @ table.T  # (n, r), in the table's own precision
    return dots.astype(np.float64) / np.where(norms > 0, norms, 1.0)[None, :]


@dataclass(frozen=True)
class Recovery:
    """x = token + position, compared with every row of both tables."""

    cos_token: np.ndarray  # (n,) cos(x, its own token row)
    cos_position: np.ndarray  # (n,) cos(x, its own position row)
    token_rank: np.ndarray  # (n,) 1 = its own token is the vocabulary row most similar to x
    position_rank: np.ndarray  # (n,) 1 = its own position is the position row most similar to x
    best_other_token: np.ndarray  # (n,) highest cos(x, another vocabulary row)
    best_other_position: np.ndarray  # (n,) highest cos(x, another position row)


def recover_token_and_position(
    word_table: np.ndarray, position_table: np.ndarray, token_ids: np.ndarray
) -> Recovery:
    """For x_p = W[id_p] + P[p]: can the token and the position still be read off x_p?

    Ranks are by cosine against all (vocab, d) word rows and all (max_pos, d) position rows.
    """
    token_ids = np.asarray(token_ids, dtype=np.int64)
    n = token_ids.shape[0]
    summed = word_table[token_ids].astype(np.float64) + position_table[:n]  # (n, d)
    x = unit_rows(summed)
    cos_words = _cosines_to_rows(x, word_table)  # (n, vocab)
    cos_positions = _cosines_to_rows(x, position_table)  # (n, max_pos)
    rows = np.arange(n)
    own_word = cos_words[rows, token_ids]
    own_position = cos_positions[rows, rows]
    cos_words[rows, token_ids] = -np.inf  # now the best *other* row
    cos_positions[rows, rows] = -np.inf
    best_word, best_position = cos_words.max(axis=1), cos_positions.max(axis=1)
    return Recovery(
        cos_token=own_word,
        cos_position=own_position,
        token_rank=1 + np.sum(cos_words > own_word[:, None], axis=1),
        position_rank=1 + np.sum(cos_positions > own_position[:, None], axis=1),
        best_other_token=best_word,
        best_other_position=best_position,
    )


# ---------------------------------------------------------------------------------------------
# 6. Order matters only through position: the permutation experiment
# ---------------------------------------------------------------------------------------------


def shuffle_order(
    n_tokens: int, seed: int, segments: np.ndarray | None, special: Sequence[bool]
) -> np.ndarray:
    """(n,) a permutation that keeps the tokenizer's special pieces in place and shuffles the
    rest of each sentence.

    special (n,): True where the tokenizer added the piece ([CLS], [SEP], <s>, </s>; none for
    GPT-2), read from the run (Trace.special), so what stays put is what this model adds, not
    BERT's first and last positions. segments (n,): 0 = first sentence, 1 = second (all 0 when
    None); the other pieces move only within their own sentence, so every position keeps its
    sentence id. order[i] is the original position of the token placed at new position i. When
    some sentence has two or more movable pieces it is never the identity.
    """
    segments = np.zeros(n_tokens, np.int64) if segments is None else np.asarray(segments)
    fixed = np.asarray(special, dtype=bool)  # (n,) True = stays in place
    if fixed.shape != (n_tokens,):
        raise ValueError(f"special has shape {fixed.shape}, not ({n_tokens},)")
    rng = np.random.default_rng(seed)
    order = np.arange(n_tokens)
    groups = [np.flatnonzero(~fixed & (segments == s)) for s in np.unique(segments)]
    for group in groups:
        order[group] = rng.permutation(group)
    if np.array_equal(order, np.arange(n_tokens)):
        largest = max(groups, key=len)
        if len(largest) >= 2:  # a shuffle that changes nothing would prove nothing
            order[largest] = np.roll(largest, 1)
    return order.astype(np.int64)


def attention_from_ids(
    model: Transformer,
    input_ids: np.ndarray,
    positions: bool = True,
    scale: bool = True,
    segments: np.ndarray | None = None,
    attention_mask: torch.Tensor | None = None,
    causal: bool = False,
) -> np.ndarray:
    """(n,) token ids (and sentence ids, 0 when None) -> (L, H, n, n) attention.

    positions=False removes every way position enters: the learned rows and the rotary turns.
    attention_mask (n, n) bool, True = may attend: the only mask of the run (see below), unless
    causal adds the causal mask (a decoder as trained).
    """
    names = [hook_name(ATTN_WEIGHTS, layer) for layer in range(model.n_layers)]
    options = model.options(scale=scale, causal=causal, positions=positions)
    _, cache = model.run_with_cache(
        input_ids, segments, names=names, options=options, attention_mask=attention_mask
    )
    return torch.stack([cache[name] for name in names]).numpy()  # L × (H, n, n) -> (L, H, n, n)


@dataclass(frozen=True)
class PermutationResult:
    """Attention of a sentence and of its shuffle, the shuffle read back in the original order."""

    positions: bool  # did positions enter (the learned rows, or the rotary turns)?
    tokens: tuple[str, ...]  # (n,) original order
    shuffled_tokens: tuple[str, ...]  # (n,) order the model read
    special: tuple[bool, ...]  # (n,) the tokenizer's own pieces, which the shuffle left in place
    order: np.ndarray  # (n,) order[i] = original position of the token at new position i
    original: np.ndarray  # (L, H, n, n) attention of the original sentence
    unshuffled: np.ndarray  # (L, H, n, n) attention of the shuffle, rows/cols put back in order
    max_abs_diff_per_layer: np.ndarray  # (L,) max |original - unshuffled| over heads and cells

    @property
    def max_abs_diff(self) -> float:
        return float(self.max_abs_diff_per_layer.max())

    @property
    def agrees(self) -> bool:
        """Do the two runs agree to float rounding (ROUNDING) in every layer and head?"""
        return self.max_abs_diff < ROUNDING

    def head_diff(self, layer: int, head: int) -> float:
        """max |original - unshuffled| for one head's (n, n) matrix."""
        diff = self.original[layer, head].astype(np.float64) - self.unshuffled[layer, head]
        return float(np.abs(diff).max())


def permutation_experiment(
    model: Transformer,
    tokens: tuple[str, ...],
    input_ids: np.ndarray,
    special: Sequence[bool],
    positions: bool,
    seed: int = 0,
    scale: bool = True,
    max_tokens: int | None = None,
    segments: np.ndarray | None = None,
    causal: bool = False,
) -> PermutationResult:
    """Run a sentence (or pair) and its shuffle; un-permute the shuffle's attention and compare.

    With max_tokens, only the first max_tokens - 1 pieces and the last one (a closing special
    such as [SEP], where the tokenizer adds one) are used. special (n,): the tokenizer's own
    pieces (Trace.special), which the shuffle keeps in place; segments (n,) are the sentence ids
    (all 0 when None), and the other pieces move only within their sentence (shuffle_order).

    If A' is the attention of the shuffled ids, A'[i, j] is between the tokens originally at
    order[i] and order[j]; writing B[order[i], order[j]] = A'[i, j] puts it back. Without
    positions (no learned rows, no rotary turns) every step treats tokens alike, so B = A up to
    float rounding, in every family. By default both runs have no causal mask: a decoder's mask
    is itself a statement about order (the shuffled run's mask, put back, is another mask), so
    with causal=True B differs from A even without positions.
    """
    input_ids = np.asarray(input_ids, dtype=np.int64)
    segments = np.zeros_like(input_ids) if segments is None else np.asarray(segments, np.int64)
    special = np.asarray(special, dtype=bool)  # (n,)
    if max_tokens is not None and len(input_ids) > max_tokens:  # the first pieces and the last
        keep = np.r_[0 : max_tokens - 1, len(input_ids) - 1]
        input_ids, tokens = input_ids[keep], tuple(tokens[i] for i in keep)
        segments, special = segments[keep], special[keep]
    order = shuffle_order(len(input_ids), seed, segments, special)
    # Tokens move only within their sentence, so segments[order] == segments: every position
    # keeps its sentence id, and each token its sentence.
    original = attention_from_ids(  # (L, H, n, n)
        model, input_ids, positions, scale, segments, causal=causal
    )
    shuffled = attention_from_ids(
        model, input_ids[order], positions, scale, segments, causal=causal
    )
    inverse = np.argsort(order)  # inverse[original position] = new position
    unshuffled = shuffled[:, :, inverse][:, :, :, inverse]  # rows then columns back in order
    diff = np.abs(original.astype(np.float64) - unshuffled)  # (L, H, n, n)
    return PermutationResult(
        positions=positions,
        tokens=tuple(tokens),
        shuffled_tokens=tuple(tokens[i] for i in order),
        special=tuple(bool(flag) for flag in special),
        order=order,
        original=original,
        unshuffled=unshuffled,
        max_abs_diff_per_layer=diff.reshape(diff.shape[0], -1).max(axis=1),  # (L, H·n·n) -> (L,)
    )


# ---------------------------------------------------------------------------------------------
# Small summaries a page shows as numbers
# ---------------------------------------------------------------------------------------------


def spread(values: np.ndarray) -> tuple[float, float]:
    """(mean, variance) of a sample of dot products or cosines."""
    values = np.asarray(values, dtype=np.float64)
    return float(values.mean()), float(values.var())


def rotation_rows(check: RotationCheck, position: int, pairs: list[int]) -> list[dict[str, object]]:
    """One row per dimension pair i: ω_i, the angle ω_i k, PE(p), R_k PE(p) and PE(p + k)."""
    rows = []
    for i in pairs:
        dims = [2 * i, 2 * i + 1]
        rows.append(
            {
                "pair (dims)": f"{i} ({dims[0]}, {dims[1]})",
                "ω_i": float(check.frequencies[i]),
                "angle ω_i·k (rad)": float(check.angles[i]),
                "PE(p)": _pair(check.original[position], dims),
                "R_k·PE(p)": _pair(check.rotated[position], dims),
                "PE(p+k)": _pair(check.shifted[position], dims),
            }
        )
    return rows


def _pair(vector: np.ndarray, dims: list[int]) -> str:
    return f"({vector[dims[0]]:+.6f}, {vector[dims[1]]:+.6f})"


# ---------------------------------------------------------------------------------------------
# 8. Why sine and cosine come in pairs; adding versus concatenating position
# ---------------------------------------------------------------------------------------------


def sine_only_encoding(n_positions: int, d_model: int, base: float = BASE) -> np.ndarray:
    """(n, d_model / 2) the sinusoid's sine columns alone: the same frequencies, no cosine partner."""
    return sinusoidal_encoding(n_positions, d_model, base)[:, 0::2]  # even columns are the sines


@dataclass(frozen=True)
class SharedComponent:
    """How much of the cosine between rows of a table is one direction shared by every row."""

    mean_cosine: float  # mean cosine over random pairs of distinct rows
    centred_mean_cosine: float  # the same after subtracting the table's mean row from every row
    mean_row_share: float  # ‖mean row‖² / mean ‖row‖²: the part of a row's length all rows share


def centred_rows(table: np.ndarray) -> np.ndarray:
    """(n, d) -> (n, d): every row minus the mean row, the one direction all rows share."""
    table = np.asarray(table, dtype=np.float64)
    return table - table.mean(axis=0)


def shared_component(table: np.ndarray, n_pairs: int = 4000, seed: int = 0) -> SharedComponent:
    """Mean pair cosine before and after removing the mean row, and the mean row's share."""
    table = np.asarray(table, dtype=np.float64)
    mean_row = table.mean(axis=0)  # (d,)
    return SharedComponent(
        mean_cosine=float(row_pair_cosines(table, n_pairs=n_pairs, seed=seed).mean()),
        centred_mean_cosine=float(
            row_pair_cosines(centred_rows(table), n_pairs=n_pairs, seed=seed).mean()
        ),
        mean_row_share=float(mean_row @ mean_row / np.mean(np.sum(table**2, axis=1))),
    )


@dataclass(frozen=True)
class ScoreTerms:
    """(w_i + p_i)·(w_j + p_j) split into its four parts, for the tokens of one sentence."""

    word_word: np.ndarray  # (n, n) w_i · w_j
    position_position: np.ndarray  # (n, n) p_i · p_j
    cross: np.ndarray  # (n, n) w_i · p_j + p_i · w_j: the terms concatenation would not have
    total: np.ndarray  # (n, n) (w_i + p_i) · (w_j + p_j), the sum of the three above

    @property
    def cross_share(self) -> float:
        """Σ|cross| / Σ(|word_word| + |position_position| + |cross|): the mixing adding costs."""
        parts = np.abs(self.word_word) + np.abs(self.position_position) + np.abs(self.cross)
        return float(np.abs(self.cross).sum() / parts.sum())


def score_terms(word_rows: np.ndarray, position_rows: np.ndarray) -> ScoreTerms:
    """word_rows, position_rows (n, d) -> the four parts of the dot products of their sums.

    With concatenation, [w; p]·[w'; p'] = w·w' + p·p' exactly: the cross terms are what adding
    brings in, and they stay small when word and position directions are nearly perpendicular.
    """
    w = np.asarray(word_rows, dtype=np.float64)
    p = np.asarray(position_rows, dtype=np.float64)
    cross = w @ p.T + p @ w.T  # (n, n): w_i·p_j + p_i·w_j
    return ScoreTerms(w @ w.T, p @ p.T, cross, (w + p) @ (w + p).T)


# ---------------------------------------------------------------------------------------------
# 8. Rotary positions (Su et al., 2021): the Llama family's scheme
# ---------------------------------------------------------------------------------------------


def rotary_frequencies(d_head: int, theta: float) -> np.ndarray:
    """(d_head / 2,) θ_i = theta^(-2i/d_head): pair i turns θ_i radians per position."""
    return theta ** (-np.arange(0, d_head, 2, dtype=np.float64) / d_head)


def rotary_turn(vectors: np.ndarray, positions: np.ndarray, theta: float) -> np.ndarray:
    """(n, d_head) vectors at (n,) positions -> each turned by its position, in float64.

    Pair i is coordinates (i, i + d_head/2) (Llama's layout), turned by the angle p θ_i:
    (a, b) -> (a cos − b sin, a sin + b cos). Written out here, apart from core.attention's
    apply_rotary, so that it checks the model's turn rather than repeating it.
    """
    x = np.asarray(vectors, dtype=np.float64)
    half = x.shape[-1] // 2
    angles = np.asarray(positions, dtype=np.float64)[:, None] * rotary_frequencies(
        x.shape[-1], theta
    )  # (n, d_head / 2)
    cos, sin = np.cos(angles), np.sin(angles)
    first, second = x[..., :half], x[..., half:]
    return np.concatenate([first * cos - second * sin, first * sin + second * cos], axis=-1)


@dataclass(frozen=True)
class RotaryCheck:
    """One head's rotary positions, checked by numbers on a sentence's own queries and keys."""

    layer: int
    head: int
    frequencies: np.ndarray  # (d_head / 2,) θ_i, radians per position of each pair
    max_turn_error: float  # max |R_p q_p − the model's own turned q_p| (and the same for k)
    shift: int  # s: every position moved s places on
    max_shift_error: float  # max over p, r of |R_{p+s} q_p · R_{r+s} k_r − R_p q_p · R_r k_r|
    scores: np.ndarray  # (n, n) R_p q_p · R_r k_r, before the √d_head: the head's own dot products

    @property
    def periods(self) -> np.ndarray:
        """(d_head / 2,) positions per full turn of each pair: 2π / θ_i."""
        return 2.0 * np.pi / self.frequencies


@torch.inference_mode()
def rotary_check(
    model: Transformer, trace: Trace, layer: int, head: int, shift: int
) -> RotaryCheck:
    """Does the model turn q and k by position, and does a turned score depend only on p − r?

    trace: a rotary model's run. The head's unturned q and k are recomputed from what the
    layer's attention reads (its ATTN_INPUT point in a rerun of the Trace's pieces, then W_q and
    W_k); turned here in float64 (rotary_turn) they must equal the Trace's turned ones; moved s
    positions on, every score must stay the same.
    """
    if model.arch.positions != "rotary":
        raise ValueError(f"{model.name} has no rotary positions")
    queries, keys = trace.queries, trace.keys  # (L, H, n, d_head), turned by the model
    weights = model.attention_weights(layer)
    name = hook_name(ATTN_INPUT, layer)
    _, cache = model.run_with_cache(
        trace.input_ids, trace.segments, names=[name], options=trace.options
    )
    x = cache[name]  # (n, d_model)
    n, d_head = x.shape[0], model.d_head
    kv_head = head // (model.n_heads // model.n_kv_heads)  # grouped keys: the head's group
    query = weights.query(x)[:, head * d_head : (head + 1) * d_head].double().numpy()  # (n, d_h)
    key = weights.key(x)[:, kv_head * d_head : (kv_head + 1) * d_head].double().numpy()
    theta = model.dims.rope_theta
    positions = np.arange(n)
    turned_q, turned_k = rotary_turn(query, positions, theta), rotary_turn(key, positions, theta)
    turn_error = max(
        float(np.abs(turned_q - queries[layer, head]).max()),
        float(np.abs(turned_k - keys[layer, head]).max()),
    )
    scores = turned_q @ turned_k.T  # (n, n)
    moved = (
        rotary_turn(query, positions + shift, theta) @ rotary_turn(key, positions + shift, theta).T
    )
    return RotaryCheck(
        layer=layer,
        head=head,
        frequencies=rotary_frequencies(d_head, theta),
        max_turn_error=turn_error,
        shift=shift,
        max_shift_error=float(np.abs(moved - scores).max()),
        scores=scores,
    )


def rotary_encoding(n_positions: int, d_head: int, theta: float) -> np.ndarray:
    """(n_positions, d_head) the angles a rotary model turns pair i by at position p, written as
    [cos p θ_i …, sin p θ_i …]: row p · row q = Σ_i cos((p − q) θ_i), a function of p − q
    alone, as for the sinusoid (the turn itself is rotary_turn)."""
    angles = np.arange(n_positions, dtype=np.float64)[:, None] * rotary_frequencies(d_head, theta)
    return np.concatenate([np.cos(angles), np.sin(angles)], axis=-1)
